"""`clawsdk run`: roll an agent out on tasks and record everything in the store."""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import anyio
import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from clawsdk.bench.manifest import MAX_SAMPLES
from clawsdk.cli.common import (
    announce_sandbox,
    console,
    db_option,
    err_console,
    exit_if_nothing_scored,
    fmt_reward,
    friendly_errors,
    load_all,
    parse_options,
    print_task_errors,
)
from clawsdk.cli.options import agent_options, json_option, rollout_options
from clawsdk.runtime.runner import RolloutOutcome, RunResult, run
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.sandbox.hostdir import check_root
from clawsdk.store.store import Store


@click.command("run")
@click.argument("tasks", nargs=-1, required=True)
@agent_options()
@rollout_options()
@click.option("--samples", "-k", default=1, show_default=True, type=click.IntRange(1, MAX_SAMPLES),
              help="Rollouts per task.")
@click.option("--max-concurrency", default=None, type=click.IntRange(1), metavar="N",
              help="The most rollouts at once -c auto may reach [default: 1024, or the rollouts to run].")
@click.option("--no-control", is_flag=True, help="Do not open the run's control channel (clawsdk ctl).")
@click.option("--run-id", default=None, help="Name the run; rerunning an id resumes it.")
@click.option("--retry-unscored", is_flag=True, help="On a resume, run again the samples an earlier invocation "
              "left unscored (the model server, sandbox or verifier failed), as a next attempt.")
@click.option("--executor", "-x", default="local", show_default=True, help="Where rollouts run (local, ray).")
@click.option("--executor-opt", "executor_opts", multiple=True, metavar="KEY=VALUE",
              help="Option for the executor (e.g. num_cpus=4).")
@click.option("--ray-address", default=None, help="Run on this Ray cluster (implies --executor ray; 'auto' joins "
              "the local node's cluster).")
@db_option
@json_option("Print the summary as JSON.")
@click.option("--watch", is_flag=True, help="Show the live terminal view while the run goes on (needs textual).")
@friendly_errors
def run_command(tasks, agent, agent_opts, model, base_url, sandbox, sandbox_root, samples, concurrency, retries,
                max_concurrency, no_control, run_id, retry_unscored, executor, executor_opts, ray_address, db,
                as_json, watch):
    """Run AGENT on every task in TASKS (folders, or SOURCE:PATH), SAMPLES times each.

    Tasks that cannot be read are reported, recorded and skipped; the others run.
    Interrupt with Ctrl-C: rollouts in flight are cancelled, their sandboxes removed, and
    `clawsdk run ... --run-id ID` finishes the rest.
    """
    if watch:
        check_root(sandbox_root)  # here too: the view would wait for a run its child never starts
        return run_and_watch(run_id, db)
    loaded, errors = load_all(tasks)
    print_task_errors(errors)
    if not loaded:
        raise click.ClickException("no task could be read")
    sandbox = announce_sandbox(sandbox)
    options = parse_options(agent_opts, "--agent-opt")
    if model:
        options["model"] = model
    if base_url:
        options["base_url"] = base_url
    total = len(loaded) * samples
    show_progress = not as_json and sys.stderr.isatty()
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("pass {task.fields[passed]}"), TimeElapsedColumn(),
                        console=err_console, disable=not show_progress)
    passed = [0]

    with progress:
        bar = progress.add_task("rollouts", total=total, passed=0)

        def on_rollout(o: RolloutOutcome) -> None:
            passed[0] += bool(o.passed)
            progress.update(bar, advance=1, passed=passed[0])

        result = anyio.run(lambda: run(
            loaded, agent=agent, agent_options=options, sandbox=sandbox,
            sandbox_config=SandboxConfig(root=sandbox_root), samples=samples, concurrency=concurrency,
            max_concurrency=max_concurrency, control=not no_control, run_id=run_id, db=db, retries=retries,
            task_errors=errors, on_rollout=on_rollout,
            handle_signals=True, executor="ray" if ray_address else executor,
            executor_options=parse_options(executor_opts, "--executor-opt")
            | ({"address": ray_address} if ray_address else {}), retry_unscored=retry_unscored,
        ))
        progress.update(bar, completed=result.skipped + len(result.outcomes))
    print_task_errors(result.task_errors[len(errors):])  # the runner's: tools no installed skill provides
    summary = summarize(result)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        print_summary(summary)
    if result.interrupted:
        sys.exit(130)
    exit_if_nothing_scored(summary["total"]["rollouts"], summary["total"]["scored"], result.outcomes)


def run_and_watch(run_id: str | None, db: str | None) -> None:
    """The same run in a child process, the watch view in this one; the summary when both are done."""
    import subprocess

    from clawsdk.cli.watch_cmd import watch_command
    from clawsdk.runtime.ids import new_run_id
    from clawsdk.store.store import Store, default_db_path

    run_id = run_id or new_run_id()
    db_path = Path(db) if db else default_db_path()
    Store(db_path).close()  # create and migrate it before the view opens it read-only
    argv = [a for a in sys.argv[1:] if a != "--watch"]
    if "--run-id" not in argv:
        argv += ["--run-id", run_id]
    log = db_path.parent / f"run-{run_id}.log"
    with open(log, "w") as out:
        child = subprocess.Popen([sys.executable, "-m", "clawsdk", *argv], stdout=out, stderr=subprocess.STDOUT)
        try:
            # the child may not have recorded the run yet: the view waits for it
            click.get_current_context().invoke(watch_command, db=str(db_path), run_id=run_id, interval=0.5,
                                               wait_for_run=True)
            if child.poll() is None:
                err_console.print(f"the run goes on: waiting for it (Ctrl-C stops it; resume with --run-id {run_id})")
            child.wait()
        except KeyboardInterrupt:
            child.terminate()
            child.wait()
    click.echo(log.read_text(), nl=False)
    if child.returncode:
        sys.exit(child.returncode)


def summarize(result: RunResult) -> dict:
    """The run as the store has it (this invocation and any earlier one of the same run id).

    `pass_rate` and `mean_reward` are per task, as `clawsdk bench report` gives pass@1 and the mean score:
    the mean over tasks of each task's share of passing scored samples and of its mean reward (a mean over
    scored rollouts let a task whose samples ended unscored weigh less). `passed` and `scored` count rollouts.
    `discarded_attempts`: attempts before each rollout's last one, by ending, that were tried again."""
    from clawsdk.bench.results import attempt_endings

    with Store(result.db) as store:
        rows = store.rollouts(result.run_id)
        earlier = attempt_endings(store, result.run_id)
    kinds = Counter(r["failure_kind"] or r["status"] for r in rows)
    scored = [r for r in rows if r["scored"]]
    cats: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        cats[r["category"] or "(none)"].append(r)

    def block(rs: list[dict]) -> dict:
        sc = [r for r in rs if r["scored"]]
        by_task: dict[str, list[dict]] = defaultdict(list)
        for r in sc:
            by_task[r["task_id"]].append(r)
        rates = [sum(1 for r in t if r["passed"]) / len(t) for t in by_task.values()]
        means = [sum(r["reward"] for r in t) / len(t) for t in by_task.values()]
        return {
            "rollouts": len(rs),
            "scored": len(sc),
            "passed": sum(1 for r in sc if r["passed"]),
            "tasks": len({r["task_id"] for r in rs}),
            "tasks_scored": len(by_task),
            "pass_rate": sum(rates) / len(rates) if rates else None,  # per task: pass@1
            "mean_reward": sum(means) / len(means) if means else None,  # per task: the mean score
        }

    discarded = Counter(k for ks in earlier.values() for k in ks)
    return {
        "run_id": result.run_id,
        "db": str(result.db),
        "interrupted": result.interrupted,
        "resumed_skipped": result.skipped,
        "retried_unscored": result.retried,
        "skipped_tasks": [{"path": e.path, "field": e.field, "message": e.message} for e in result.task_errors],
        "total": block(rows),
        "unscored": len(rows) - len(scored),
        # every attempt, and those before each rollout's last one (unscored, tried again, in no score)
        "attempts": sum((r["attempt"] or 0) + 1 for r in rows),
        "discarded_attempts": dict(sorted(discarded.items())),
        "retried_now": sum(o.attempts - 1 for o in result.outcomes),  # by the runner, in this invocation
        "failure_kinds": dict(kinds),
        "categories": {c: block(rs) for c, rs in sorted(cats.items())},
        "rollouts": [{"id": r["id"], "task": r["task_id"], "sample": r["sample"], "status": r["status"],
                      "failure_kind": r["failure_kind"], "reward": r["reward"], "passed": r["passed"]}
                     for r in rows],
    }


def retries_line(discarded: dict, now: int = 0) -> str | None:
    """The attempts that ended unscored and were run again (the runner's --retries, --retry-unscored), said on
    stdout: the table keeps each rollout's last attempt, so they are in no figure."""
    n = sum(discarded.values())
    if not n:
        return None
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(discarded.items()))
    return (f"{n} earlier attempt{' was' if n == 1 else 's were'} retried: {kinds}"
            + (f" ({now} in this invocation)" if now else "")
            + "; each rollout keeps its last attempt (`clawsdk show ID --attempt N` shows an earlier one)")


def print_summary(s: dict) -> None:
    from clawsdk.cli.runs_cmd import PER_TASK_CAPTION

    table = Table(title=f"run {s['run_id']}", title_justify="left", caption=PER_TASK_CAPTION, caption_justify="left")
    for col in ("category", "tasks", "rollouts", "scored", "passed", "pass@1", "mean score"):
        table.add_column(col, justify="left" if col == "category" else "right")
    for cat, b in s["categories"].items():
        table.add_row(cat, str(b["tasks"]), str(b["rollouts"]), str(b["scored"]), str(b["passed"]),
                      fmt_reward(b["pass_rate"]), fmt_reward(b["mean_reward"]))
    t = s["total"]
    table.add_section()
    table.add_row("[bold]all[/bold]", str(t["tasks"]), str(t["rollouts"]), str(t["scored"]), str(t["passed"]),
                  f"[bold]{fmt_reward(t['pass_rate'])}[/bold]", fmt_reward(t["mean_reward"]))
    console.print(table)
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(s["failure_kinds"].items()))
    console.print(f"endings: {kinds}" + (f"   (unscored: {s['unscored']})" if s["unscored"] else ""))
    if line := retries_line(s.get("discarded_attempts") or {}, s.get("retried_now", 0)):
        console.print(line)
    if s["resumed_skipped"]:
        console.print(f"resumed: {s['resumed_skipped']} rollouts had finished before and were kept")
    if s["retried_unscored"]:
        console.print(f"retried: {s['retried_unscored']} rollouts an earlier invocation left unscored")
    if s["skipped_tasks"]:
        console.print(f"[yellow]{len(s['skipped_tasks'])} task(s) could not be read and were skipped[/yellow]")
    if s["interrupted"]:
        console.print(f"[yellow]interrupted[/yellow]: resume with --run-id {s['run_id']}")
    console.print(f"store: {s['db']}")
    if s["rollouts"]:
        console.print(f"look at a rollout: clawsdk show {s['rollouts'][0]['id']}"
                      + (f" --db {s['db']}" if s["db"] != ".clawsdk/clawsdk.db" else ""))
