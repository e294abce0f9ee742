"""`clawsdk plugins`: what is loaded, from where, and what failed."""

from __future__ import annotations

import json

import click
from rich.markup import escape
from rich.table import Table

from clawsdk.cli.common import console


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True)
def plugins_command(as_json):
    """List loaded plugins, where each comes from and what it provides."""
    from clawsdk.cli import plugin_commands
    from clawsdk.plugins import get_registry

    registry = get_registry()
    registry.load_all()  # kinds load on first use; this command reports on all of them
    plugin_commands()  # settles plugin commands against the core's, so clashes show below
    if as_json:
        click.echo(json.dumps([p.__dict__ for p in registry.plugins], indent=2))
        return
    table = Table()
    for col in ("plugin", "from", "provides", "status"):
        table.add_column(col)
    for p in registry.plugins:
        provides = "; ".join(f"{k}: {', '.join(v)}" for k, v in p.provides.items())
        status = f"[red]failed: {escape(p.error)}[/red]" if p.error else "[green]ok[/green]"
        if p.notes:
            status += "".join(f"\n[yellow]{escape(n)}[/yellow]" for n in p.notes)
        table.add_row(p.name, p.origin, provides, status)
    console.print(table)
