"""`clawsdk synth`: make tasks (procedural families, persona and skill routes), ask why one was dropped.

The task source `procedural:FAMILY?...` is sources/procedural.py (reading tasks loads no CLI).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import anyio
import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from clawsdk.cli.common import announce_sandbox, console, db_option, err_console, friendly_errors, parse_options
from clawsdk.cli.options import sandbox_option
from clawsdk.hookspecs import hookimpl
from clawsdk.store.store import Store, default_db_path
from clawsdk.tasks.model import check_task_id


def _task_id_prefix(ctx, param, value: str | None) -> str | None:
    """A route's tasks are named RUN_ID-NNNNN, so the run id must fit in a task id."""
    if value is not None:
        try:
            check_task_id(f"{value}-00000")
        except ValueError as e:
            raise click.BadParameter(f"it names the tasks (RUN_ID-00000): {e}") from None
    return value


def _default_run_id(route: str, config: dict) -> str:
    """The same command gets the same run id, so running it again resumes it."""
    digest = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:8]
    return f"{route}-{digest}"


def _progress(label: str, as_json: bool) -> tuple[Progress, TaskID]:
    show = not as_json and sys.stderr.isatty()
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("accepted {task.fields[accepted]}"), TimeElapsedColumn(),
                        console=err_console, disable=not show)
    return progress, progress.add_task(label, total=None, accepted=0)


def _print_report(summary: dict, result=None, as_json: bool = False) -> None:
    if as_json:
        out = dict(summary)
        out["reasons"] = [{"stage": s, "reason": r, "count": n} for (s, r), n in summary["reasons"]]
        if result is not None:
            out["elapsed_s"] = round(result.elapsed_s, 3)
            out["throughput_per_s"] = round(result.throughput, 3)
            out["skipped_already_done"] = result.skipped
        click.echo(json.dumps(out, indent=2, default=str))
        return
    run = summary["run"] or {}
    n = summary["candidates"]
    console.print(f"[bold]synthesis run {escape(run.get('id', '?'))}[/bold]  route {run.get('route')}  "
                  f"status {run.get('status')}  out {escape(str(run.get('out_dir')))}")
    gates = Table(title="gates")
    gates.add_column("stage")
    gates.add_column("passed", justify="right")
    gates.add_column("of generated", justify="right")
    for stage, passed in summary["gates"]:
        gates.add_row(stage, str(passed), f"{passed / n:.1%}" if n else "-")
    console.print(gates)
    groups = Table(title="by family / category")
    for col in ("group", "generated", "accepted", "rejected", "validity"):
        groups.add_column(col, justify="left" if col == "group" else "right")
    for g, c in summary["groups"].items():
        gen = c.get("generated", 0)
        groups.add_row(escape(g), str(gen), str(c.get("accepted", 0)), str(c.get("rejected", 0) + c.get("error", 0)),
                       f"{c.get('accepted', 0) / gen:.1%}" if gen else "-")
    console.print(groups)
    if summary["reasons"]:
        reasons = Table(title="why candidates were dropped")
        for col in ("stage", "reason", "count"):
            reasons.add_column(col)
        for (stage, reason), count in summary["reasons"][:20]:
            reasons.add_row(stage or "", escape(reason), str(count))
        console.print(reasons)
    status = summary["status"]
    line = (f"generated {n}, accepted {status.get('accepted', 0)}, rejected {status.get('rejected', 0)}, "
            f"errors {status.get('error', 0)}; validity {summary['validity']:.1%}")
    if result is not None:
        line += f"; {result.throughput:.2f} candidates/s over {result.elapsed_s:.1f} s"
        if result.skipped:
            line += f" ({result.skipped} already done in an earlier run)"
    console.print(line)


@click.group("synth")
def synth_group():
    """Make tasks: procedural families (no model), persona and skill routes (a model), and their records."""


@synth_group.command("families")
@click.option("--json", "as_json", is_flag=True)
def families_command(as_json):
    """List the procedural task families."""
    from clawsdk.synth.families import FAMILIES

    if as_json:
        click.echo(json.dumps([{"name": f.name, "category": f.category, "subcategory": f.subcategory,
                                "summary": f.summary} for f in FAMILIES.values()], indent=2))
        return
    table = Table()
    for col in ("family", "category", "subcategory", "what"):
        table.add_column(col)
    for f in FAMILIES.values():
        table.add_row(f.name, f.category, f.subcategory, f.summary)
    console.print(table)


@synth_group.command("procedural")
@click.option("--families", "-f", default="all", show_default=True,
              help="'all', family names or categories, comma-separated (see `clawsdk synth families`).")
@click.option("--n", "-n", "n", default=60, show_default=True, type=click.IntRange(0), help="Tasks to make.")
@click.option("--seed", default=1, show_default=True, type=int)
@click.option("--difficulty", default="mixed", show_default=True,
              type=click.Choice(["mixed", "easy", "medium", "hard"]))
@click.option("--out", "-o", required=True, type=click.Path(file_okay=False), help="Folder for the tasks.")
@click.option("--validate/--no-validate", default=True, show_default=True,
              help="Run each task: untouched workspace must fail, reference solution must pass.")
@sandbox_option("auto", "Sandbox of validation; auto is bwrap where bubblewrap works, else local.")
@click.option("--concurrency", "-c", default=4, show_default=True, type=click.IntRange(1))
@click.option("--run-id", default=None, help="Name the synthesis run; rerunning an id resumes it.")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@friendly_errors
def procedural_command(families, n, seed, difficulty, out, validate, sandbox, concurrency, run_id, db, as_json):
    """Generate N verifiable tasks with reference solutions from the procedural families, without a model."""
    from clawsdk.synth.families import resolve_families
    from clawsdk.synth.procedural import synthesize_procedural
    from clawsdk.synth.records import SynthRecords

    fams = resolve_families(families)
    if validate:
        sandbox = announce_sandbox(sandbox)
    run_id = run_id or _default_run_id("procedural", {"f": [f.name for f in fams], "n": n, "seed": seed,
                                                      "d": difficulty, "out": str(Path(out).resolve())})
    progress, bar = _progress("procedural", as_json)
    with Store(db or default_db_path()) as store, progress:
        records = SynthRecords(store)
        progress.update(bar, total=n)

        def tick(done: int, total: int, accepted: int) -> None:
            progress.update(bar, completed=done, accepted=accepted)

        result = anyio.run(lambda: synthesize_procedural(
            fams, n, seed, out, records=records, run_id=run_id, difficulty=difficulty, validate=validate,
            sandbox=sandbox, concurrency=concurrency, progress=tick))
        summary = records.summary(run_id)
    _print_report(summary, result, as_json)
    if result.accepted < result.candidates:
        sys.exit(1)


def _make_model(spec: str, options: dict):
    """'BACKEND' or 'BACKEND:NAME' (e.g. openai:Qwen2.5-7B-Instruct, embedded) -> a Model."""
    from clawsdk.plugins import get_registry

    backend, _, name = spec.partition(":")
    factory = get_registry().get("models", backend)
    try:
        return factory(name=name, **options) if name else factory(**options)
    except TypeError as e:
        raise ValueError(f"model backend {backend!r} does not take these options ({sorted(options)}): {e}") from e


def _route_options(fn):
    opts = [
        click.option("--model", "-m", required=True, help="BACKEND[:NAME], e.g. openai:Qwen2.5-7B-Instruct or embedded."),
        click.option("--base-url", default=None, help="Base URL of an OpenAI-compatible server."),
        click.option("--model-opt", "model_opts", multiple=True, metavar="KEY=VALUE", help="Model backend option."),
        click.option("--judge", default=None, help="Model for the leak/factual judge (default: --model)."),
        click.option("--n", "-n", "n", default=20, show_default=True, type=click.IntRange(0), help="Candidates."),
        click.option("--seed", default=1, show_default=True, type=int),
        click.option("--categories", default=None, help="Comma-separated categories to cover (default: all six)."),
        click.option("--repair-rounds", default=3, show_default=True, type=click.IntRange(0),
                     help="Verifier repair rounds fed with the execution failure."),
        click.option("--rubric/--no-rubric", default=True, show_default=True, help="Generate a rubric per task."),
        click.option("--dedup", default="auto", show_default=True,
                     type=click.Choice(["auto", "minilm", "minhash", "off"]),
                     help="Near-duplicate check: MiniLM embeddings, MinHash, or none."),
        click.option("--dedup-threshold", default=None, type=click.FloatRange(0, 1),
                     help="Similarity at which a candidate counts as a duplicate."),
        click.option("--concurrency", "-c", default=4, show_default=True, type=click.IntRange(1),
                     help="Model calls at once."),
        sandbox_option("auto", "Sandbox of the execution gate, which runs the model's solution and check.py; auto "
                               "is bwrap where bubblewrap works, else local (which isolates nothing)."),
        click.option("--max-tokens", default=4096, show_default=True, type=click.IntRange(16)),
        click.option("--temperature", default=0.7, show_default=True, type=float),
        click.option("--out", "-o", required=True, type=click.Path(file_okay=False), help="Folder for the tasks."),
        click.option("--run-id", default=None, callback=_task_id_prefix,
                     help="Name the synthesis run (and its tasks, RUN_ID-00000...); rerunning an id resumes it."),
        db_option,
        click.option("--json", "as_json", is_flag=True, help="Print the report as JSON."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _run_route(route: str, kw: dict, **route_kw) -> None:
    from clawsdk.synth.pipeline import RouteOptions, synthesize_route
    from clawsdk.synth.records import SynthRecords

    options = parse_options(kw["model_opts"], "--model-opt")
    if kw["base_url"]:
        options["base_url"] = kw["base_url"]
    cats = [c.strip() for c in kw["categories"].split(",")] if kw["categories"] else None
    out = Path(kw["out"])
    identity = {"route": route, "model": kw["model"], "n": kw["n"], "seed": kw["seed"], "cats": cats,
                "out": str(out.resolve()),
                **{k: v for k, v in route_kw.items() if k in ("k_operations", "supporting", "primary_skills")},
                "skills": [s.name for s in route_kw.get("skills", [])]}
    run_id = kw["run_id"] or _default_run_id(route, identity)
    kw["sandbox"] = announce_sandbox(kw["sandbox"])
    ro = RouteOptions(route=route, n=kw["n"], seed=kw["seed"], out=out, run_id=run_id, categories=cats,
                      repair_rounds=kw["repair_rounds"], rubric=kw["rubric"], dedup=kw["dedup"],
                      dedup_threshold=kw["dedup_threshold"], concurrency=kw["concurrency"], sandbox=kw["sandbox"],
                      max_tokens=kw["max_tokens"], temperature=kw["temperature"], model_name=kw["model"], **route_kw)
    progress, bar = _progress(route, kw["as_json"])

    async def go(records):
        model = _make_model(kw["model"], options)
        judge = _make_model(kw["judge"], options) if kw["judge"] else None
        try:
            def tick(done, total, accepted):
                progress.update(bar, completed=done, accepted=accepted)

            return await synthesize_route(model, ro, records, judge, tick)
        finally:
            await model.aclose()
            if judge is not None:
                await judge.aclose()

    with Store(kw["db"] or default_db_path()) as store, progress:
        records = SynthRecords(store)
        progress.update(bar, total=kw["n"])
        result = anyio.run(go, records)
        summary = records.summary(run_id)
    _print_report(summary, result, kw["as_json"])


@synth_group.command("persona")
@_route_options
@click.option("--seeds", "seeds_dir", default=None, type=click.Path(file_okay=False),
              help="Folder with your personas.yaml / categories.yaml / operations.yaml (default: built-in).")
@click.option("--k-ops", "k_operations", default=3, show_default=True, type=click.IntRange(1),
              help="Basic operations each task must need.")
@friendly_errors
def persona_command(seeds_dir, k_operations, **kw):
    """Persona-driven route: persona x category x k basic operations -> a model writes tasks, then the gates."""
    from clawsdk.synth.seeds import load_seeds

    _run_route("persona", kw, seeds=load_seeds(seeds_dir), k_operations=k_operations)


@synth_group.command("skill")
@_route_options
@click.option("--skills", "skill_paths", multiple=True, type=click.Path(exists=True),
              help="A skill folder (with SKILL.md) or a folder of them; repeatable (default: clawsdk's skill packs).")
@click.option("--only", default=None, help="Comma-separated skill names to use as primary skills.")
@click.option("--supporting", default=1, show_default=True, type=click.IntRange(0),
              help="Supporting skills alongside the primary one.")
@friendly_errors
def skill_command(skill_paths, only, supporting, **kw):
    """Skill-grounded route: a primary SKILL.md (+ supporting ones) -> a model writes tasks, then the gates."""
    from clawsdk.synth.seeds import find_skills

    skills = find_skills(list(skill_paths) or None)
    if only:
        wanted = [n.strip() for n in only.split(",")]
        missing = [n for n in wanted if n not in {s.name for s in skills}]
        if missing:
            raise LookupError(f"no skill named {missing} (found: {', '.join(s.name for s in skills)})")
    if not skills:
        raise LookupError("no skills found: give --skills with folders holding a SKILL.md")
    _run_route("skill", kw, skills=skills, supporting=supporting,
               primary_skills=[n.strip() for n in only.split(",")] if only else None)


@synth_group.command("why")
@click.argument("query")
@db_option
@click.option("--full", is_flag=True, help="Show every stage's whole output.")
@click.option("--json", "as_json", is_flag=True)
@friendly_errors
def why_command(query, db, full, as_json):
    """Why a candidate or task (candidate id, task id, or a prefix of either or of the task hash) was
    accepted or dropped: every stage it went through, with verdicts and reasons."""
    from clawsdk.synth.records import SynthRecords

    with Store(db or default_db_path(), readonly=True) as store:
        records = SynthRecords(store)
        found = records.find(query)
        if not found:
            raise LookupError(f"no synthesis candidate or task matches {query!r} in {store.path}")
        items = [(c, records.stages(c["id"])) for c in found[:10]]
    if as_json:
        click.echo(json.dumps([{**c, "stages": s} for c, s in items], indent=2, default=str))
        return
    for c, stages in items:
        color = {"accepted": "green", "rejected": "red", "error": "red"}.get(c["status"], "yellow")
        console.print(f"[bold]{escape(c['id'])}[/bold]  task {escape(str(c['task_id']))}  route {c['route']}  "
                      f"category {c['category']}  [{color}]{c['status']}[/{color}]"
                      + (f" at {c['stage']}: {escape(c['reason'] or '')}" if c["status"] != "accepted" else ""))
        if c["seed"]:
            console.print(f"  [dim]made from {escape(json.dumps(c['seed'], ensure_ascii=False))[:300]}[/dim]")
        for s in stages:
            mark = {"pass": "[green]pass[/green]", "fail": "[red]fail[/red]", "repair": "[yellow]repair[/yellow]",
                    "error": "[red]error[/red]"}.get(s["verdict"], s["verdict"])
            rnd = f" round {s['round']}" if s["round"] else ""
            took = f" [dim]{s['duration_s']:.2f}s[/dim]" if s["duration_s"] else ""
            console.print(f"  {s['stage']}{rnd}: {mark}{took} {escape(s['detail'] or '')}")
            if full and s["output"] is not None:
                console.print(escape(json.dumps(s["output"], indent=2, ensure_ascii=False)))
        console.print()


@synth_group.command("report")
@click.argument("run_id", required=False)
@db_option
@click.option("--json", "as_json", is_flag=True)
@friendly_errors
def report_command(run_id, db, as_json):
    """The report of a synthesis run (gates passed, validity, rejection reasons); without RUN_ID, list runs."""
    from clawsdk.synth.records import SynthRecords

    with Store(db or default_db_path(), readonly=True) as store:
        records = SynthRecords(store)
        if run_id is None:
            rows = records.runs()
            if as_json:
                click.echo(json.dumps(rows, indent=2, default=str))
                return
            table = Table()
            for col in ("run", "route", "created", "status", "candidates", "accepted", "rejected", "out"):
                table.add_column(col)
            for r in rows:
                table.add_row(escape(r["id"]), r["route"], r["created_at"][:19], r["status"], str(r["candidates"]),
                              str(r["accepted"] or 0), str((r["rejected"] or 0) + (r["errors"] or 0)),
                              escape(str(r["out_dir"])))
            console.print(table)
            return
        if records.run(run_id) is None:
            raise LookupError(f"no synthesis run {run_id!r} in {store.path} (`clawsdk synth report` lists them)")
        summary = records.summary(run_id)
    _print_report(summary, None, as_json)


@hookimpl
def register_commands(register):
    register(synth_group)
