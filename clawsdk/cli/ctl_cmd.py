"""`clawsdk ctl RUN ...`: steer a live run through its control channel; `log` reads how it was steered."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from clawsdk.cli.common import console, db_option, friendly_errors
from clawsdk.store.store import Store, default_db_path

ACTIONS = ("status", "pause", "resume", "cancel", "requeue-unscored", "set", "log")


@click.command("ctl")
@click.argument("run_id", metavar="RUN")
@click.argument("action", type=click.Choice(ACTIONS))
@click.argument("settings", nargs=-1, metavar="[KEY=VALUE]...")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the run's state (or its log) as JSON.")
@friendly_errors
def ctl_command(run_id, action, settings, db, as_json):
    """Steer RUN while it runs: pause, resume, cancel, requeue-unscored, set KEY=VALUE, status; or log.

    \b
      clawsdk ctl nightly pause                 no new rollout or model call starts; those in flight wait
      clawsdk ctl nightly resume
      clawsdk ctl nightly set concurrency=32    fixed from now on (concurrency=auto hands it back)
      clawsdk ctl nightly set ceiling=256       the most -c auto may reach; verifiers=N: verifiers at once
      clawsdk ctl nightly requeue-unscored      the rollouts that ended unscored run again, as a next attempt
      clawsdk ctl nightly cancel                as Ctrl-C: rerun with --run-id nightly to finish it
      clawsdk ctl nightly log                   every change, who made it and when (also after the run)

    The run's process listens on a unix socket beside the store, with the store's permissions: whoever may
    write the store may steer the run. Every change is recorded in the store with who and when.
    """
    from clawsdk.runtime.control import parse_settings, request

    path = Path(db) if db else default_db_path()
    if action == "log":
        return _log(path, run_id, as_json)
    if settings and action != "set":
        raise click.UsageError(f"{action} takes no KEY=VALUE (only set does)")
    args = {}
    if action == "set":
        try:
            args["settings"] = parse_settings(settings)
        except ValueError as e:
            raise click.UsageError(str(e)) from None
    state = request(path, run_id, action.replace("-", "_"), by="clawsdk ctl", **args)
    if as_json:
        click.echo(json.dumps(state, indent=2))
        return
    _print_state(state, action)


def _print_state(state: dict, action: str) -> None:
    head = {"pause": "paused", "resume": "resumed", "cancel": "cancelling", "set": "set",
            "requeue-unscored": f"requeued {state.get('requeued', 0)} unscored rollout(s)"}.get(action)
    if head:
        console.print(f"[bold]{escape(state['run_id'])}[/bold]: {head}")
    mode = state.get("mode")
    line = (f"concurrency {state['concurrency']} ({mode}"
            + (f", ceiling {state['ceiling']}" if mode == "auto" and state.get("ceiling") else "") + ")"
            + f"  in flight {state['in_flight']}"
            + ("  [yellow]paused[/yellow]" if state.get("paused") else ""))
    if state.get("verifiers") and state["verifiers"] < max(state["concurrency"], state.get("ceiling") or 0):
        line += f"  verifiers {state['verifiers']}"  # a limit of its own only when it is below the rollouts'
    console.print(line)
    if state.get("reason") and mode == "auto":
        console.print(f"[dim]{escape(state['reason'])}[/dim]")


def _log(path: Path, run_id: str, as_json: bool) -> None:
    with Store(path, readonly=True) as store:
        if store.run(run_id) is None:
            raise LookupError(f"no run {run_id!r} in {path} (see `clawsdk runs`)")
        rows = store.run_control(run_id)
    if as_json:
        for r in rows:
            r["detail"] = json.loads(r["detail"]) if r["detail"] else None
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=f"how run {run_id} was steered", title_justify="left")
    for col in ("when", "who", "action", "level", "why"):
        table.add_column(col)
    for r in rows:
        level = f"{r['level']}" + (" paused" if r["paused"] else "") if r["level"] is not None else ""
        table.add_row(r["ts"][:19], escape(r["actor"]), r["action"], level, escape(r["reason"] or ""))
    console.print(table)
    if not rows:
        console.print("nothing recorded: the run predates run_control (clawsdk before it)")
