"""The `clawsdk` command. One module per command group; plugins add commands through the same hook."""

from __future__ import annotations

import logging
import sys

import click

from clawsdk.cli.convert_cmd import convert_command
from clawsdk.cli.plugins_cmd import plugins_command
from clawsdk.cli.run_cmd import run_command
from clawsdk.cli.runs_cmd import runs_command, show_command
from clawsdk.cli.tasks_cmd import tasks_group
from clawsdk.cli.watch_cmd import watch_command


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="clawsdk")
@click.option("-v", "--verbose", count=True, help="More logging (-vv for debug).")
def cli(verbose: int) -> None:
    """clawsdk: workspace tasks, sandboxed MCP rollouts, one SQLite store."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


cli.add_command(run_command)
cli.add_command(runs_command)
cli.add_command(show_command)
cli.add_command(tasks_group)
cli.add_command(plugins_command)
cli.add_command(watch_command)
cli.add_command(convert_command)


def _add_plugin_commands() -> None:
    from clawsdk.plugins import get_registry

    for name, command in get_registry().tables["commands"].items():
        if name not in cli.commands:
            cli.add_command(command)


def main() -> None:
    _add_plugin_commands()
    cli()
