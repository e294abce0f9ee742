"""`clawsdk data select|export|list`: which rollouts make training data, and versioned exports of them."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from clawsdk.cli.common import Finite, console, db_option, friendly_errors
from clawsdk.errors import FailureKind
from clawsdk.store.store import Store


def _selection_options(fn: Callable) -> Callable:
    opts = [
        click.option(
            "--run", "runs", multiple=True, help="Run id to draw from (repeat; default: every run)."
        ),
        click.option("--agent", "agents", multiple=True, help="Only rollouts of this agent (repeat)."),
        click.option(
            "--min-reward",
            type=Finite(),
            default=1.0,
            show_default=True,
            help="Keep rollouts scoring at least this (use -1 for any).",
        ),
        click.option("--passed-only", is_flag=True, help="Keep only rollouts whose verdict passed."),
        click.option(
            "--failure-kind",
            "failure_kinds",
            multiple=True,
            type=click.Choice([k.value for k in FailureKind]),
            default=("ok",),
            show_default=True,
            help="Allowed endings (repeat): ok, agent_timeout, agent_error, ...",
        ),
        click.option(
            "--max-turns", type=click.IntRange(1), default=None, help="At most this many assistant turns."
        ),
        click.option(
            "--max-tokens",
            type=click.IntRange(1),
            default=None,
            help="At most this long (tokens, estimated at 4 characters each).",
        ),
        click.option(
            "--max-tool-error-rate",
            type=Finite(0, 1),
            default=None,
            help="At most this share of failed tool calls.",
        ),
        click.option(
            "--per-task-cap", type=click.IntRange(1), default=None, help="At most this many per task."
        ),
        click.option(
            "--best-of",
            type=click.IntRange(1),
            default=None,
            help="Per task, only the k best (reward, then fewer turns, then shorter).",
        ),
        click.option(
            "--dedup/--no-dedup",
            default=True,
            show_default=True,
            help="Drop trajectories repeating a kept one's tool calls on the same task.",
        ),
        click.option(
            "--keep-truncated",
            is_flag=True,
            help="Keep rollouts with a model reply cut at its token limit (finish_reason length).",
        ),
        click.option(
            "--exclude-task",
            "exclude_tasks",
            multiple=True,
            help="Task id or hash never to use, e.g. a held-out task (repeat).",
        ),
        click.option(
            "--exclude-tasks-from",
            type=click.Path(exists=True),
            help="Task folder(s) whose tasks are held out (any task source): by id and hash, and their "
            "near-duplicates (the same hidden files, workspace or reference solution; else a close "
            "instruction).",
        ),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _selection(
    runs,
    agents,
    min_reward,
    passed_only,
    failure_kinds,
    max_turns,
    max_tokens,
    max_tool_error_rate,
    per_task_cap,
    best_of,
    dedup,
    keep_truncated,
    exclude_tasks,
    exclude_tasks_from,
):
    """The Selection, and the held-out tasks whose near-duplicates it drops too."""
    from clawsdk.data.select import Selection

    excluded = list(exclude_tasks)
    held = []
    if exclude_tasks_from:
        from clawsdk.tasks.sources import load_tasks

        held_out = load_tasks(exclude_tasks_from)
        if held_out.errors:  # a held-out task left unread would have its rollouts trained on
            files = list(dict.fromkeys(e.path for e in held_out.errors))
            more = f" and {len(files) - 5} more" if len(files) > 5 else ""
            first = held_out.errors[0]
            why = f"{first.field}: {first.message}" if first.field else first.message
            raise ValueError(
                f"--exclude-tasks-from {exclude_tasks_from}: {len(held_out.errors)} held-out task(s) could "
                f"not be read: {', '.join(files[:5])}{more} (first: {why}); fix them, or move them out of it "
                "and hold them out with --exclude-task ID"
            )
        held = held_out.tasks
        # by id as well: a held-out task whose verifier or limits changed since has another hash
        excluded += [x for t in held for x in (t.hash, t.id)]
    return Selection(
        runs=list(runs),
        agents=list(agents),
        min_reward=None if min_reward < 0 else min_reward,
        passed_only=passed_only,
        failure_kinds=list(failure_kinds),
        max_turns=max_turns,
        max_tokens=max_tokens,
        max_tool_error_rate=max_tool_error_rate,
        per_task_cap=per_task_cap,
        best_of=best_of,
        dedup=dedup,
        exclude_tasks=excluded,
        keep_truncated=keep_truncated,
    ), held


def _held_out_line(counts: dict[str, int]) -> str:
    """How many rollouts were held out by which test (`held out: 2 by hash, 1 by id`); "" when none was."""
    parts = [f"{counts.get(k, 0)} {what}" for k, what in
             (("hash", "by hash"), ("id", "by id"), ("near_duplicate", "near-duplicate(s) of held-out tasks"))
             if counts.get(k)]
    return f"held out: {', '.join(parts)}" if parts else ""


@click.group("data")
def data_group():
    """Select trajectories from the store and export them as training data."""


@data_group.command("select")
@_selection_options
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the ledger as JSON.")
@click.option("--show", type=click.Choice(["all", "kept", "dropped"]), default="all", show_default=True)
@friendly_errors
def select_command(db, as_json, show, **rules):
    """Dry run: which rollouts the rules keep, and the rule that drops each other one. Writes nothing."""
    from clawsdk.data.select import select

    selection, held_out = _selection(**rules)
    with Store(db) as store:
        result = select(store, selection, held_out=held_out)
    rows = [c for c in result.candidates if show == "all" or (show == "kept") == c.keep]
    if as_json:
        click.echo(
            json.dumps(
                {
                    "kept": len(result.kept),
                    "dropped": len(result.dropped),
                    "reasons": result.reasons(),
                    "held_out": result.held_out,
                    "rollouts": [
                        {
                            "rollout_id": c.rollout_id,
                            "task_id": c.rollout["task_id"],
                            "agent": c.rollout.get("agent"),
                            "reward": c.reward,
                            "keep": c.keep,
                            "reason": c.reason,
                            "turns": c.trajectory.n_assistant_turns if c.trajectory else None,
                            "tokens": c.tokens,
                        }
                        for c in rows
                    ],
                },
                indent=2,
            )
        )
        return
    table = Table(title=f"selection: {len(result.kept)} kept, {len(result.dropped)} dropped")
    for col in ("rollout", "task", "agent", "reward", "turns", "tokens", "decision"):
        table.add_column(col, justify="right" if col in ("reward", "turns", "tokens") else "left")
    for c in rows:
        t = c.trajectory
        table.add_row(
            c.rollout_id,
            escape(c.rollout["task_id"]),
            escape(str(c.rollout.get("agent"))),
            "-" if c.reward is None else f"{c.reward:.2f}",
            str(t.n_assistant_turns if t else "-"),
            str(c.tokens),
            "[green]kept[/green]" if c.keep else f"[yellow]{escape(c.reason)}[/yellow]",
        )
    console.print(table)
    if not result.kept:
        from clawsdk.data.export import explain_empty_selection

        console.print(f"[yellow]nothing kept:[/yellow] {escape(explain_empty_selection(result))}")
    elif result.dropped:
        console.print(
            "dropped by rule: " + ", ".join(f"{k} {v}" for k, v in sorted(result.reasons().items()))
        )
    if line := _held_out_line(result.held_out):
        console.print(escape(line))


@data_group.command("export")
@click.option("--kind", type=click.Choice(["sft", "preference", "rl"]), default="sft", show_default=True)
@click.option("--name", required=True, help="Dataset name; each export of a name is a new version (NAME@vN).")
@click.option(
    "--out",
    "-o",
    default="datasets",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder that receives NAME-vN/.",
)
@click.option(
    "--format",
    "formats",
    multiple=True,
    type=click.Choice(["jsonl", "hf", "parquet", "atif", "rl"]),
    default=("jsonl", "hf", "parquet"),
    show_default=True,
    help="atif: one ATIF-v1.7 document per rollout under atif/; rl: token ids, logprobs and loss masks per turn of "
    "each rollout's model calls. Either is a dataset of its own, of the SFT selection's rollouts, with an index "
    "in the other formats given (default jsonl).",
)
@click.option(
    "--style",
    type=click.Choice(["openai", "text"]),
    default="openai",
    show_default=True,
    help="openai: messages with tool_calls + tools; text: rendered in clawsdk's tool-call format.",
)
@click.option(
    "--tasks",
    "task_paths",
    multiple=True,
    type=click.Path(exists=True),
    help="RL: the task folders of the prompt set (default: the tasks of --run).",
)
@click.option(
    "--min-chosen", type=Finite(), default=1.0, show_default=True, help="Preference: chosen reward floor."
)
@click.option(
    "--margin",
    type=Finite(min=0, min_open=True),
    default=0.01,
    show_default=True,
    help="Preference: rejected scores at least this much lower.",
)
@click.option("--pairs-per-task", type=click.IntRange(1), default=1, show_default=True)
@click.option(
    "--max-length",
    type=click.IntRange(16),
    default=None,
    help="SFT: warn about conversations longer than this many tokens  [default: the --tokenizer's "
    "context window, else 2048]",
)
@click.option(
    "--tokenizer",
    default=None,
    help="SFT: count tokens exactly with this model's tokenizer (embedded, transformers:PATH, PATH or the "
    "name of a model in the local Hugging Face cache) instead of estimating 4 characters a token.",
)
@_selection_options
@db_option
@friendly_errors
def export_command(
    kind, name, out, formats, style, task_paths, min_chosen, margin, pairs_per_task, max_length, tokenizer, db,
    **rules
):
    """Write a versioned dataset and record it, with the rollouts it holds, in the store.

    Nothing is written when nothing qualifies: the command says which rule left no rows and exits 2."""
    from clawsdk.data.export import ROW_FORMATS, export_preferences, export_rl, export_sft
    from clawsdk.data.select import HeldOut, load_candidates, select

    selection, held_out = _selection(**rules)
    rule = HeldOut(selection.exclude_tasks, held_out)
    with Store(db) as store:
        row_format = next((f for f in formats if f in ROW_FORMATS), None)
        if row_format is not None:  # a dataset of its own: the selected rollouts in that format
            import importlib

            if kind != "sft":
                raise click.UsageError(f"--format {row_format} writes the rollouts of an SFT selection; leave --kind "
                                       "out")
            module, _, function = ROW_FORMATS[row_format].partition(":")
            result = select(store, selection, held_out=held_out)
            rule.counts.update(result.held_out)
            _warn_unreadable(result.candidates)
            exp = getattr(importlib.import_module(module), function)(
                store, result, out, name=name, formats=[f for f in formats if f not in ROW_FORMATS],
                tokenizer=_load_tokenizer(tokenizer) if tokenizer else None)
            kind = exp.kind
        elif kind == "sft":
            result = select(store, selection, held_out=held_out)
            rule.counts.update(result.held_out)
            _warn_unreadable(result.candidates)
            exp = export_sft(store, result, out, name=name, formats=formats, style=style, max_length=max_length,
                             tokenizer=_load_tokenizer(tokenizer) if tokenizer else None)
        elif kind == "preference":
            pool = selection.__class__(**{**selection.to_dict(), "min_reward": None, "failure_kinds": []})
            loaded = load_candidates(store, pool)
            _warn_unreadable(loaded)
            cands = [c for c in loaded if not c.reason]
            cands = [c for c in cands if not rule.why(store, c.rollout["task_id"], c.rollout["task_hash"])]
            if selection.agents:
                cands = [c for c in cands if c.rollout.get("agent") in selection.agents]
            exp = export_preferences(
                store,
                cands,
                out,
                name=name,
                min_chosen=min_chosen,
                margin=margin,
                pairs_per_task=pairs_per_task,
                formats=formats,
                style=style,
                selection=pool.to_dict(),
            )
        else:
            tasks = _rl_tasks(store, task_paths, selection, rule)
            exp = export_rl(store, tasks, out, name=name, formats=formats)
    console.print(
        f"[green]exported[/green] {exp.dataset_id}: {exp.n_rows} {kind} rows -> {escape(str(exp.path))} "
        f"({', '.join(exp.files)})"
    )
    if line := _held_out_line(rule.counts):
        console.print(escape(line))
    warning = exp.length_warning()
    if warning:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    elif exp.kind == "sft":
        console.print(f"[dim]the longest conversation is {exp.longest} tokens ({exp.length_basis}), within "
                      f"max_length={exp.max_length}[/dim]")


def _warn_unreadable(candidates) -> None:
    """Rollouts left out because they could not be read, or not as the model gave them, are not a rule the user
    chose: say so."""
    from clawsdk.data.select import NOT_USABLE

    said = {"unreadable": "could not be read", "unverified": "hold assistant turns no reply of the model backs",
            "control_tokens": "hold a chat template's control token as text"}
    for kind in NOT_USABLE:
        bad = [c.reason.removeprefix(f"{kind}: ") for c in candidates if c.reason.startswith(f"{kind}:")]
        if bad:
            more = f"; and {len(bad) - 3} more (`clawsdk data select --show dropped`)" if len(bad) > 3 else ""
            console.print(f"[yellow]warning:[/yellow] {len(bad)} rollout(s) {said[kind]} and are left out: "
                          f"{escape('; '.join(bad[:3]))}{more}")


def _load_tokenizer(spec: str):
    """A Hugging Face tokenizer for `spec`, knowing its model's context window (config.json)."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise click.UsageError("--tokenizer needs transformers: pip install 'clawsdk[embedded]'") from None
    from clawsdk.train import resolve_weights

    path = resolve_weights(spec)
    # a folder or a model already in the local Hugging Face cache (as docs/training.md names models):
    # asking the hub for any other name retried for ~50 s on a machine without internet before failing.
    # Only HF_HUB_OFFLINE=0, set explicitly, lets transformers fetch it.
    online = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("0", "false", "no", "off")
    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=not online)
    except (OSError, ValueError):
        if online or Path(path).is_dir():  # transformers' own message says what the folder lacks
            raise
        from huggingface_hub.constants import HF_HUB_CACHE

        raise click.UsageError(
            f"--tokenizer {spec}: {path!r} is neither a folder nor a model in the local Hugging Face cache "
            f"({HF_HUB_CACHE}); pass a checkpoint folder (transformers:PATH or PATH), `embedded`, or the "
            f"name of a model downloaded before (`hf download NAME`; HF_HUB_OFFLINE=0 lets this command fetch it)"
        ) from None
    config = Path(path) / "config.json"
    if config.is_file():
        window = json.loads(config.read_text()).get("max_position_embeddings")
        if window:
            tok.clawsdk_context_window = int(window)
    return tok


def _rl_tasks(store: Store, task_paths: tuple[str, ...], selection, rule) -> list:
    if task_paths:
        from clawsdk.tasks.sources import load_tasks

        tasks = []
        for p in task_paths:
            loaded = load_tasks(p)
            if loaded.errors:
                raise ValueError(
                    f"{p}: {len(loaded.errors)} task(s) could not be read, first: "
                    f"{loaded.errors[0]}; fix them or leave them out"
                )
            tasks += loaded.tasks
    else:
        if not selection.runs:
            raise click.UsageError("an RL prompt set needs --tasks PATH or --run RUN_ID (whose tasks to use)")
        hashes = [
            r["task_hash"]
            for r in store.query(
                f"SELECT DISTINCT task_hash FROM rollouts WHERE run_id IN ({','.join('?' * len(selection.runs))}) "
                "ORDER BY task_id",
                selection.runs,
            )
        ]
        tasks = [store.task(h) for h in hashes]
    return [t for t in tasks if t is not None and not rule.why(store, t.id, t.hash, t)]


@data_group.command("import")
@click.argument("source")
@click.option("--run", "run_id", default=None, help="The run the rollouts are recorded in (default: a new id).")
@click.option("--tasks", "task_paths", multiple=True, type=click.Path(exists=True),
              help="Tasks to attach the trajectories to, by the task id each names (repeat); else each gets a task "
              "made from its instruction.")
@db_option
@friendly_errors
def import_command(source, run_id, task_paths, db):
    """Record trajectories made elsewhere as rollouts of agent `imported`: SOURCE is atif:PATH (an ATIF
    document, a .jsonl of them, or a folder of them, an export's atif/ included).

    Their scores are the ones the documents carry, not taken again: replay them on their tasks
    (`clawsdk run TASKS --agent replay --agent-opt run=RUN`) to score them anew."""
    from clawsdk.data.atif import import_atif
    from clawsdk.runtime.ids import new_run_id

    fmt, _, path = source.partition(":")
    if fmt != "atif" or not path:
        raise click.UsageError(f"{source!r}: give atif:PATH (ATIF is the format clawsdk imports)")
    if not Path(path).exists():
        raise click.UsageError(f"{path}: no such file or folder")
    tasks = {}
    if task_paths:
        from clawsdk.tasks.sources import load_many

        loaded = load_many(task_paths)
        tasks = {t.id: t for t in loaded.tasks}
    run_id = run_id or new_run_id()
    with Store(db) as store:
        report = import_atif(store, Path(path), run_id=run_id, tasks=tasks)
    for line in report["errors"]:
        console.print(f"[red]not imported[/red] {escape(line)}")
    console.print(f"imported {report['imported']} trajectories into run {escape(run_id)}"
                  + (f" ({report['skipped']} already there)" if report["skipped"] else "")
                  + (f"; {len(report['errors'])} could not be read" if report["errors"] else ""))
    if report["errors"] and not report["imported"]:
        raise SystemExit(1)


@data_group.command("list")
@db_option
@friendly_errors
def list_command(db):
    """The datasets exported from this store, newest first."""
    with Store(db) as store:
        rows = store.query(
            "SELECT d.*, (SELECT COUNT(DISTINCT rollout_id) FROM dataset_rows r "
            "WHERE r.dataset_id = d.id) AS rollouts FROM datasets d ORDER BY created_at DESC"
        )
    table = Table(title="datasets")
    for col in ("id", "kind", "rows", "rollouts", "created", "path"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            escape(r["id"]),
            r["kind"],
            str(r["n_rows"]),
            str(r["rollouts"]),
            r["created_at"][:19],
            escape(r["path"] or ""),
        )
    console.print(table)
