"""OpenClaw as a clawsdk agent: `clawsdk openclaw install`, then `clawsdk run TASKS --agent openclaw ...`.

The agent (agent.py) imports nothing heavy and needs the install only when a run starts.
"""

from __future__ import annotations

from typing import Any

import click

from clawsdk.hookspecs import hookimpl
from clawsdk_plugins.agents.cli_agent.commands import agent_group
from clawsdk_plugins.agents.openclaw.install import PACKAGE

openclaw_group = agent_group(PACKAGE)


@openclaw_group.command("config")
@click.option("--serve", "url", default="http://127.0.0.1:8765/mcp", show_default=True,
              help="The `clawsdk serve --http` URL.")
@click.option("--token-env", default="CLAWSDK_TOKEN", show_default=True, metavar="VAR",
              help="The variable OpenClaw takes the bearer token from (as `serve --token-env`).")
@click.option("--base-url", default=None, help="Also add a model provider: an OpenAI-compatible /v1 URL.")
@click.option("--model", default=None, help="With --base-url: the model id (OpenClaw's `clawsdk/MODEL`).")
@click.option("--api-key-env", default=None, metavar="VAR", help="With --base-url: the variable with its key.")
def config_command(url, token_env, base_url, model, api_key_env) -> None:
    """Print an openclaw.json for `clawsdk serve`: its MCP server, and none of OpenClaw's own tools.

    The model then sees only the server's tools (`clawsdk__task`, `clawsdk__read`, ...), so every
    workspace action is recorded and sandboxed; the deny list is the `openclaw` agent's, plus
    OpenClaw's file, command, web and memory tools.
    """
    import json

    from clawsdk_plugins.agents.openclaw.config import models_config, serve_config

    if (base_url is None) != (model is None):
        raise click.UsageError("--base-url and --model go together")
    cfg = serve_config(url, token_env=token_env)
    if base_url is not None:
        key = f"${{{api_key_env}}}" if api_key_env else "none"
        cfg = {"models": models_config(base_url=base_url, token=key, model=model), **cfg}
    click.echo(json.dumps(cfg, indent=2))


def _openclaw(**options: Any):
    from clawsdk_plugins.agents.openclaw.agent import OpenClawAgent

    return OpenClawAgent(**options)


@hookimpl
def register_agents(register):
    register("openclaw", _openclaw)


@hookimpl
def register_commands(register):
    register(openclaw_group)
