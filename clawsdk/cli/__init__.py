"""The `clawsdk` command. One module per command group; plugins add commands through the same hook.

Start-up is lazy: a core command's module is imported only when that command runs, and the
plugins load only for a command the core does not have (or for the command list in --help),
so `clawsdk --version` and `clawsdk runs` import no plugin, no MCP and no pydantic models.
"""

from __future__ import annotations

import importlib
import logging
import sys

import click

#: core commands: name -> "module:attribute", imported on first use
CORE_COMMANDS = {
    "run": "clawsdk.cli.run_cmd:run_command",
    "runs": "clawsdk.cli.runs_cmd:runs_command",
    "show": "clawsdk.cli.runs_cmd:show_command",
    "tasks": "clawsdk.cli.tasks_cmd:tasks_group",
    "convert": "clawsdk.cli.convert_cmd:convert_command",
    "plugins": "clawsdk.cli.plugins_cmd:plugins_command",
    "watch": "clawsdk.cli.watch_cmd:watch_command",
    "data": "clawsdk.cli.data_cmd:data_group",
    "train": "clawsdk.cli.train_cmd:train_group",
    "db": "clawsdk.cli.db_cmd:db_group",
    "ctl": "clawsdk.cli.ctl_cmd:ctl_command",
}


def plugin_commands() -> dict[str, click.Command]:
    """The plugins' commands; one named like a core command is refused, and said so once."""
    from clawsdk.plugins import get_registry

    registry = get_registry()
    table = registry.tables["commands"]
    for name in [n for n in table if n in CORE_COMMANDS]:
        owner = registry.owner("commands", name)
        note = f"refused command {name!r}: clawsdk has its own command of that name"
        del table[name]
        for info in registry.plugins:
            if info.name == owner:
                info.notes.append(note)
                if name in info.provides.get("commands", []):
                    info.provides["commands"].remove(name)
        click.echo(f"warning: plugin {owner}: {note}", err=True)
    return table


class LazyGroup(click.Group):
    """A group whose commands are imported when first used: core ones by module, the rest from plugins."""

    def __init__(self, *args, lazy: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def _core(self, name: str) -> click.Command:
        module, _, attr = self.lazy[name].partition(":")
        command = getattr(importlib.import_module(module), attr)
        self.add_command(command, name)
        return command

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands:
            return self.commands[name]
        if name in self.lazy:
            return self._core(name)
        return plugin_commands().get(name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy, *plugin_commands()})


def _version() -> str:
    from clawsdk import __version__

    return __version__


@click.group(cls=LazyGroup, lazy=CORE_COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(version=_version(), prog_name="clawsdk")
@click.option("-v", "--verbose", count=True, help="More logging (-vv for debug).")
def cli(verbose: int) -> None:
    """clawsdk: workspace tasks, sandboxed MCP rollouts, one SQLite store."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def _add_plugin_commands() -> None:
    """Nothing to do: plugin commands resolve on first use. Kept for code written before that."""


def main(argv: list[str] | None = None) -> None:
    """The `clawsdk` entry point. Whatever a command raises is one line on stderr and exit 2, never a
    traceback (usage errors are click's, also exit 2)."""
    from clawsdk.cli.common import fail

    try:
        cli.main(args=argv, prog_name="clawsdk")
    except Exception as e:  # click has handled its own errors; this is everything else
        fail(e)
