"""`clawsdk runs` and `clawsdk show`: what the store holds."""

from __future__ import annotations

import json

import click
from rich.markup import escape
from rich.table import Table

from clawsdk._text import clean
from clawsdk.cli.common import console, db_option, fmt_reward, friendly_errors
from clawsdk.cli.show_render import render_event
from clawsdk.store.events import ErrorEvent, StoredEvent, ToolCall
from clawsdk.store.store import Store, default_db_path

#: what the summaries' pass@1 and mean score are (`clawsdk runs`, `clawsdk run`)
PER_TASK_CAPTION = ("pass@1, mean score: the mean over tasks (each weighted 1) of each task's scored samples, as "
                    "`clawsdk bench report`; passed/scored counts rollouts")


def open_store(db: str | None) -> Store:
    return Store(db or default_db_path(), readonly=True)


@click.command("runs")
@db_option
@click.option("--json", "as_json", is_flag=True)
@friendly_errors
def runs_command(db, as_json):
    """List the runs in the store."""
    with open_store(db) as store:
        rows = store.runs()
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    table = Table(caption=PER_TASK_CAPTION, caption_justify="left")
    for col in ("run", "created", "status", "agent", "sandbox", "rollouts", "finished", "passed/scored",
                "pass@1", "mean score"):
        table.add_column(col)
    for r in rows:
        scored = r["scored"] or 0
        table.add_row(r["id"], r["created_at"][:19], r["status"], r["agent"] or "", r["sandbox"] or "",
                      str(r["rollouts"]), str(r["finished"] or 0), f"{r['passed'] or 0}/{scored}",
                      fmt_reward(r["pass_rate"]), fmt_reward(r["mean_reward"]))
    console.print(table)
    for r in rows:
        if r["status"] == "failed" and r.get("error"):  # why, and how to go on
            console.print(f"[red]{escape(r['id'])} failed:[/red] {escape(r['error'])}; rerun with --run-id {escape(r['id'])}")


def _fold(text: str, lines: int) -> str:
    parts = text.splitlines()
    if lines and len(parts) > lines:
        return "\n".join(parts[:lines]) + f"\n… {len(parts) - lines} more lines (--full shows all)"
    return text


def _earlier_attempt_line(shown: int, last: int, events: list[StoredEvent], verdict: dict | None) -> None:
    """The status line of an attempt before the last: the rollout row holds only the last attempt's
    status, so this one's ending comes from its own error event and its score from its own verdict."""
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    ending = errors[-1].error_kind if errors else "not recorded"
    score = "no verdict"
    if verdict:
        score = f"verdict {verdict['score']:.2f} ({'passed' if verdict['passed'] else 'failed'})"
    n_calls = sum(1 for e in events if isinstance(e, ToolCall))
    console.print(f"an earlier attempt: ending {escape(str(ending))}  {score}  tool calls {n_calls}  "
                  f"[dim](attempt {shown} of 0..{last}; without --attempt, `show` gives the last one)[/dim]")
    if errors:
        console.print(f"[red]{escape(str(errors[-1].message))}[/red]")


@click.command("show")
@click.argument("rollout_id")
@db_option
@click.option("--full", is_flag=True, help="Do not fold long outputs.")
@click.option("--attempt", type=int, default=None, help="An earlier attempt (default: the last).")
@click.option("--json", "as_json", is_flag=True, help="The rollout, its events and verdict as JSON (for machines).")
@friendly_errors
def show_command(rollout_id, db, full, attempt, as_json):
    """Show one rollout's whole trajectory: every model call, tool call and result, and the verdict.

    Files the agent wrote and read, edits (as diffs), commands and their output are shown as text,
    highlighted by file type; --json gives the same data for machines."""
    with open_store(db) as store:
        ro = store.rollout(rollout_id)
        if ro is None:
            raise LookupError(f"no rollout {rollout_id!r} in {store.path}")
        last = ro["attempt"]
        if attempt is not None and not 0 <= attempt <= last:
            raise LookupError(f"rollout {ro['id']} has attempts 0..{last}: --attempt {attempt} is not one")
        shown = last if attempt is None else attempt
        events = store.events(ro["id"], shown)
        verdict = store.verdict(ro["id"], shown)
        task = store.task(ro["task_hash"])
    if as_json:
        doc = {"rollout": ro, "attempt": shown, "events": [
            {"rollout_id": ro["id"], "attempt": shown, "seq": e.seq, "kind": e.kind, "ts": e.ts,
             "duration_ms": e.duration_ms, "payload": e.payload()} for e in events], "verdict": verdict}
        click.echo(json.dumps(doc, indent=2, default=str))
        return
    console.print(f"[bold]rollout {ro['id']}[/bold]  run {ro['run_id']}  task {escape(ro['task_id'])} "
                  f"sample {ro['sample']}  attempt {shown}")
    if shown == last:
        passed = bool(ro["passed"]) if ro["passed"] is not None else "-"
        console.print(f"status {ro['status']}  ending {ro['failure_kind']}  reward {fmt_reward(ro['reward'])}  "
                      f"passed {passed}  "
                      f"tool calls {ro['n_tool_calls']}  {ro['duration_s'] or 0:.2f} s")
        if ro["error"]:
            console.print(f"[red]{escape(clean(ro['error'], lines=True))}[/red]")
    else:
        _earlier_attempt_line(shown, last, events, verdict)
    if task is not None:
        console.print(f"[dim]instruction:[/dim] {escape(clean(_fold(task.instruction, 0 if full else 6), lines=True))}")
    console.rule()
    calls = {e.seq: e for e in events if isinstance(e, ToolCall) and e.seq is not None}
    for e in events:
        for part in render_event(e, full, calls):
            console.print(part)
    if verdict:
        console.rule()
        table = Table(title=f"verdict ({verdict['verifier']}): score {verdict['score']:.2f}, "
                            f"{'passed' if verdict['passed'] else 'failed'}", title_justify="left")
        table.add_column("check")
        table.add_column("score", justify="right")
        table.add_column("weight", justify="right")
        table.add_column("detail")
        for s in verdict["subscores"]:
            table.add_row(escape(s["name"]), f"{s['score']:.2f}", f"{s['weight']:g}", escape(clean((s["detail"] or "")[:120])))
        console.print(table)
