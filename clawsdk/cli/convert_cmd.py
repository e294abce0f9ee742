"""`clawsdk convert`: tasks from any source, written in any format a task source can write."""

from __future__ import annotations

import sys

import click

from clawsdk.cli.common import err_console, friendly_errors, load_all, print_task_errors


@click.command("convert")
@click.argument("sources", nargs=-1, required=True)
@click.option("--to", "fmt", required=True, metavar="FORMAT",
              help="The format to write: a task source that can write (native, clawgym, clawgym-jsonl, harbor; "
                   "jsonl is clawgym-jsonl).")
@click.option("--out", "-o", required=True, type=click.Path(),
              help="A folder (native, clawgym, harbor: one subfolder per task) or a .jsonl file (clawgym-jsonl).")
@friendly_errors
def convert_command(sources, fmt, out):
    """Export the tasks in SOURCES (paths or SOURCE:PATH) as native, ClawGym or Harbor folders, or jsonl."""
    from clawsdk.tasks.convert import ALIASES, export_tasks, formats

    known = formats()
    if ALIASES.get(fmt, fmt) not in known:
        raise click.BadParameter(f"{fmt!r} is not a format any task source writes; one of {', '.join(known)}",
                                 param_hint="--to")
    tasks, errors = load_all(sources)
    print_task_errors(errors)
    n, failed = export_tasks(tasks, out, fmt)
    for e in failed:
        err_console.print(f"[yellow]not exported:[/yellow] {e}")
    click.echo(f"wrote {n} task(s) as {fmt} to {out}" + (f"; {len(failed)} not exported" if failed else ""))
    if errors or failed:
        sys.exit(1)
