"""`clawsdk tasks list|show|validate`."""

from __future__ import annotations

import json
import sys

import anyio
import click
from rich.markup import escape
from rich.table import Table

from clawsdk.cli.common import console, fmt_reward, friendly_errors, load_all, print_task_errors
from clawsdk.cli.options import concurrency_option, sandbox_option
from clawsdk.tasks.model import category_inferred, category_label


@click.group("tasks")
def tasks_group():
    """Read, inspect and validate tasks (folders, or SOURCE:PATH)."""


@tasks_group.command("list")
@click.argument("paths", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True)
@friendly_errors
def list_command(paths, as_json):
    """List the tasks under PATHS, and any that cannot be read."""
    tasks, errors = load_all(paths)
    if as_json:
        click.echo(json.dumps({
            "tasks": [{"id": t.id, "category": t.category,
                       "category_inferred": category_inferred(t), "difficulty": t.difficulty, "hash": t.hash,
                       "files": len(t.workspace), "hidden": len(t.hidden), "solution": bool(t.solution)}
                      for t in tasks],
            "errors": [{"path": e.path, "field": e.field, "message": e.message} for e in errors],
        }, indent=2))
        return
    table = Table()
    for col in ("id", "category", "difficulty", "files", "hidden", "verifier", "solution", "hash"):
        table.add_column(col)
    for t in tasks:
        table.add_row(escape(t.id), escape(category_label(t)), t.difficulty or "", str(len(t.workspace)),
                      str(len(t.hidden)), t.verifier.type, "yes" if t.solution else "no", t.hash[:12])
    console.print(table)
    console.print(f"{len(tasks)} task(s)" + (f", {len(errors)} unreadable" if errors else ""))
    print_task_errors(errors)


@tasks_group.command("show")
@click.argument("path")
@click.argument("task_id", required=False)
@friendly_errors
def show_command(path, task_id):
    """Show a task: instruction, files, verifier, solution (TASK_ID picks one of a collection)."""
    tasks, errors = load_all((path,))
    print_task_errors(errors)
    chosen = [t for t in tasks if task_id in (None, t.id)]
    if not chosen:
        raise LookupError(f"no task {task_id!r} under {path}")
    if len(chosen) > 1:
        raise LookupError(f"{len(chosen)} tasks under {path}; name one: {', '.join(t.id for t in chosen[:10])}")
    t = chosen[0]
    console.print(f"[bold]{escape(t.id)}[/bold]  {escape(category_label(t))}  {t.difficulty or ''}  hash {t.hash[:12]}")
    console.print(escape(t.instruction))
    console.rule("workspace")
    for f in t.workspace:
        console.print(f"  {escape(f.path)}  ({len(f.data)} bytes)")
    console.rule("hidden (verifier only)")
    for f in t.hidden:
        console.print(f"  {escape(f.path)}  ({len(f.data)} bytes)")
    console.rule(f"verifier: {t.verifier.type}")
    console.print(escape(json.dumps(t.verifier.model_dump(mode="json"), indent=2)))
    if t.solution:
        console.rule("reference solution")
        for step in t.solution:
            console.print(f"  {step.tool} {escape(json.dumps(step.args)[:200])}")


@tasks_group.command("validate")
@click.argument("paths", nargs=-1, required=True)
@sandbox_option()
@concurrency_option(4, "Tasks validated at once.")
@click.option("--no-cheap", is_flag=True,
              help="Skip the cheap agents (wipe the workspace, empty or copied deliverables).")
@click.option("--json", "as_json", is_flag=True)
@friendly_errors
def validate_command(paths, sandbox, concurrency, no_cheap, as_json):
    """Check each task: it parses, its untouched workspace fails, its reference solution passes, and no
    cheap agent (one that wipes the workspace, or leaves an empty or copied file where the deliverable
    goes) passes, scores above the untouched workspace, or makes the verifier fail."""
    tasks, errors = load_all(paths)
    from dataclasses import asdict

    from clawsdk.runtime.validate import validate_tasks

    results = anyio.run(lambda: validate_tasks(tasks, sandbox, concurrency, cheap=not no_cheap))
    if as_json:
        click.echo(json.dumps({
            "tasks": [asdict(r) | {"ok": r.ok, "problem": r.problem} for r in results],
            "errors": [{"path": e.path, "field": e.field, "message": e.message} for e in errors],
        }, indent=2))
    else:
        table = Table()
        for col in ("task", "untouched", "solution", "cheap agents", "result"):
            table.add_column(col)
        for r in results:
            sol = "-" if not r.has_solution else (r.solution_error and "error") or fmt_reward(r.solution_score)
            base = "error" if r.baseline_error else fmt_reward(r.baseline_score)
            cheap = " ".join(f"{p.agent} {'error' if p.error else fmt_reward(p.score)}" for p in r.cheap) or "-"
            table.add_row(escape(r.task_id), base, sol, cheap,
                          "[green]ok[/green]" if r.ok else f"[red]{escape(r.problem)}[/red]")
        console.print(table)
        ok = sum(r.ok for r in results)
        console.print(f"{ok}/{len(results)} valid" + (f", {len(errors)} unreadable" if errors else ""))
        print_task_errors(errors)
    if errors or not all(r.ok for r in results):
        sys.exit(1)
