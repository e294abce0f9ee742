"""`clawsdk bench`: build a benchmark, run it, report a run, compare two runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from clawsdk.bench.manifest import MAX_SAMPLES
from clawsdk.hookspecs import hookimpl


def _write(path: str, text: str, what: str) -> None:
    from clawsdk.cli.common import err_console

    if path == "-":
        click.echo(text)
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    err_console.print(f"{what}: {p}")


def _band(value: str) -> tuple[float, float]:
    lo, sep, hi = value.partition(":")
    try:
        if not sep:
            raise ValueError
        return float(lo), float(hi)
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected LOW:HIGH pass rates, e.g. 0.1:0.9", param_hint="--band") from None


def _quotas(pairs: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for pair in pairs:
        cat, sep, n = pair.rpartition("=")
        if not sep or not cat or not n.strip().isdigit():
            raise click.BadParameter(f"{pair!r}: expected CATEGORY=N (or *=N for the rest)", param_hint="--quota")
        out[cat.strip()] = int(n)
    return out


def _ks(value: str | None) -> list[int] | None:
    if not value:
        return None
    try:
        ks = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected comma-separated k values, e.g. 1,2,4", param_hint="--ks") from None
    if any(k < 1 for k in ks):
        raise click.BadParameter("k values start at 1", param_hint="--ks")
    return ks


def make_group() -> click.Group:
    from clawsdk.cli.common import (
        console,
        db_option,
        err_console,
        exit_if_nothing_scored,
        friendly_errors,
        parse_options,
        print_task_errors,
    )
    from clawsdk.cli.options import agent_options, rollout_options

    @click.group("bench")
    def bench() -> None:
        """Benchmarks: build a discriminating task set, run it, report and compare runs."""

    @bench.command("build")
    @click.argument("pool", nargs=-1)
    @click.option("--runs", "-r", "runs", multiple=True, metavar="RUN_ID",
                  help="Runs whose scored samples give each task's pass rate (repeat for several models).")
    @click.option("--reference-run", "reference_runs", multiple=True, metavar="RUN_ID",
                  help="A deterministic run with k samples (e.g. the oracle): differing scores mark a flaky verifier.")
    @click.option("--band", default="0.1:0.9", show_default=True, help="Keep pass rates in LOW:HIGH.")
    @click.option("--no-band", is_flag=True, help="Keep every difficulty (no measured pass rates needed).")
    @click.option("--min-samples", default=1, show_default=True, type=click.IntRange(1),
                  help="Scored samples a run needs on a task for its pass rate to count.")
    @click.option("--min-spread", default=0.0, show_default=True, type=click.FloatRange(0, 1),
                  help="Keep tasks whose pass rates across runs differ by at least this.")
    @click.option("--quota", "quotas", multiple=True, metavar="CATEGORY=N",
                  help="Tasks per category (*=N for categories not named); unnamed categories are dropped.")
    @click.option("--total", type=click.IntRange(1), default=None, help="At most N tasks, balanced across categories.")
    @click.option("--exclude-training", "training", multiple=True, type=click.Path(dir_okay=False),
                  help="A training export (JSONL, JSON list or lines of task hashes): drop overlapping tasks.")
    @click.option("--exclude-dataset", "datasets", multiple=True, metavar="NAME@vN",
                  help="A dataset export recorded in the store (clawsdk export): drop its tasks and near-duplicates.")
    @click.option("--near-dup", default=0.7, show_default=True, type=click.FloatRange(0, 1),
                  help="Instruction Jaccard similarity (word 3-grams) that counts as a near-duplicate.")
    @click.option("--no-pool-dedup", is_flag=True, help="Keep near-duplicates within the pool.")
    @click.option("--reverify", default=0, show_default=True, type=click.IntRange(0),
                  help="Verify each task's final workspace N times; differing scores drop it as flaky.")
    @click.option("--validate", is_flag=True, help="Validate each kept task (untouched fails, solution passes).")
    @click.option("--sandbox", "-s", default="auto", show_default=True,
                  help="Sandbox for --reverify/--validate (auto: bwrap where it works, else local).")
    @click.option("--weighting", type=click.Choice(["uniform", "category"]), default="uniform", show_default=True,
                  help="Task weights: all 1, or each category weighing the same.")
    @click.option("--judge-model", default=None, help="The judge model that rubric/hybrid verifiers use (pinned).")
    @click.option("--samples", "-k", default=1, show_default=True, type=click.IntRange(1, MAX_SAMPLES),
                  help="Samples per task the benchmark is meant to be run with.")
    @click.option("--name", required=True, help="Benchmark name.")
    @click.option("--version", "version", required=True, help="Benchmark version (e.g. 1.0).")
    @click.option("--description", default="", help="One line on what it measures.")
    @click.option("--seed", default=0, show_default=True, help="Tie-break seed when choosing within a quota.")
    @click.option("--out", "-o", required=True, type=click.Path(dir_okay=False), help="Manifest file to write (JSON).")
    @db_option
    @click.option("--json", "as_json", is_flag=True, help="Print the build summary as JSON.")
    @friendly_errors
    def build_cmd(pool, runs, reference_runs, band, no_band, min_samples, min_spread, quotas, total, training,
                  datasets, near_dup, no_pool_dedup, reverify, validate, sandbox, weighting, judge_model, samples, name,
                  version, description, seed, out, db, as_json):
        """Freeze a benchmark from the tasks in POOL (folders or SOURCE:PATH; default: the tasks of --runs).

        Drops tasks outside the difficulty band, over their category quota, overlapping a
        training export, with a flaky verifier, or failing validation; every drop says why.
        """
        from clawsdk.bench.build import BuildOptions, measure, register_manifest, runtime_checks, select, tasks_of_runs
        from clawsdk.bench.decontam import read_datasets, read_training
        from clawsdk.bench.flaky import flaky_in_runs
        from clawsdk.store.store import Store
        from clawsdk.tasks.sources import load_many

        options = BuildOptions(
            name=name, version=version, description=description, band=None if no_band else _band(band),
            min_samples=min_samples, min_spread=min_spread, quotas=_quotas(quotas), total=total,
            near_duplicate=near_dup, dedup_pool=not no_pool_dedup, weighting=weighting, judge_model=judge_model,
            samples=samples, seed=seed,
        )
        loaded = load_many(pool)  # ids unique across the pool's sources
        tasks, errors = loaded.tasks, loaded.errors
        with Store(db) as store:
            if not pool:
                if not runs:
                    raise click.UsageError("give a task pool (POOL) or the runs (--runs) whose tasks to use")
                tasks = tasks_of_runs(store, runs)
            measurements = measure(store, runs) if runs else None
            flaky = flaky_in_runs(store, reference_runs) if reference_runs else None
            checks = runtime_checks(reverify=reverify, validate=validate, sandbox=sandbox,
                                    progress=None if as_json else lambda m: err_console.print(f"[dim]{m}[/dim]"))
            train = read_training(training) if training else None
            if datasets:
                train = read_datasets(store, datasets, train)
            result = select(tasks, options, measurements=measurements, load_errors=errors,
                            training=train, flaky=flaky, checks=checks,
                            sources=list(pool), runs=runs, reference_runs=reference_runs)
            result.manifest.save(out)
            register_manifest(store, result.manifest)
        m = result.manifest
        summary = {"manifest": str(out), "name": m.name, "version": m.version, "hash": m.hash, "tasks": len(m.tasks),
                   "categories": _cat_counts(m), "dropped": result.counts(),
                   "shortfalls": {k: {"quota": q, "available": a} for k, (q, a) in result.shortfalls.items()}}
        if as_json:
            click.echo(json.dumps(summary, indent=2))
            return
        from rich.table import Table

        console.print(f"[bold]{m.label}[/bold]: {len(m.tasks)} task(s) of {m.build['pool']} -> {out}  "
                      f"[dim](hash {m.hash[:12]})[/dim]")
        t = Table(title="kept per category", title_justify="left")
        t.add_column("category")
        t.add_column("tasks", justify="right")
        for cat, n in summary["categories"].items():
            t.add_row(cat, str(n))
        console.print(t)
        if result.dropped:
            d = Table(title="dropped", title_justify="left")
            d.add_column("reason")
            d.add_column("tasks", justify="right")
            d.add_column("example")
            for reason, n in sorted(result.counts().items()):
                ex = next(x for x in result.dropped if x.reason == reason)
                d.add_row(reason, str(n), f"{ex.id}: {ex.detail}"[:90])
            console.print(d)
        for cat, (q, a) in result.shortfalls.items():
            console.print(f"[yellow]category {cat!r}: quota {q}, only {a} task(s) qualified[/yellow]")

    @bench.command("run")
    @click.argument("benchmark")
    @agent_options()
    @click.option("--samples", "-k", default=None, type=click.IntRange(1, MAX_SAMPLES),
                  help="Samples per task [default: the manifest's].")
    @rollout_options()
    @click.option("--run-id", default=None, help="Name the run; rerunning an id resumes it and retries unscored samples.")
    @click.option("--tasks", "task_specs", multiple=True, metavar="SPEC",
                  help="Where to find the manifest's tasks if neither the store nor its sources have them.")
    @click.option("--judge-model", default=None, metavar="BACKEND[:MODEL]",
                  help="Judge for rubric/hybrid verifiers [default: the manifest's, else $CLAWSDK_JUDGE].")
    @db_option
    @click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
    @friendly_errors
    def run_cmd(benchmark, agent, agent_opts, model, base_url, samples, sandbox, sandbox_root, concurrency, retries,
                run_id, task_specs, judge_model, db, as_json):
        """Run AGENT on BENCHMARK (a manifest .json, or a task folder / SOURCE:PATH run whole), k samples a task."""
        import anyio

        from clawsdk.bench import render
        from clawsdk.bench.report import build_report
        from clawsdk.bench.run import bench_run
        from clawsdk.sandbox.base import SandboxConfig

        options = parse_options(agent_opts, "--agent-opt")
        if model:
            options["model"] = model
        if base_url:
            options["base_url"] = base_url
        done = [0]

        def on_rollout(o) -> None:
            done[0] += 1
            if not as_json and sys.stderr.isatty():
                err_console.print(f"[dim]{done[0]} rollouts ({o.task_id}#{o.sample}: {o.kind.value})[/dim]")

        br = anyio.run(lambda: bench_run(
            benchmark, agent=agent, agent_options=options, samples=samples, sandbox=sandbox,
            sandbox_config=SandboxConfig(root=sandbox_root), concurrency=concurrency, retries=retries,
            run_id=run_id, db=db, task_specs=task_specs, judge_model=judge_model, on_rollout=on_rollout,
            handle_signals=True))
        report = build_report(br.data)
        print_task_errors(br.result.task_errors)  # on stderr, as `clawsdk run` says them
        if as_json:
            click.echo(json.dumps(report, indent=2, default=str))
        else:
            # on stdout with the report: the attempts retried are in no figure (the report's RETRIED line
            # counts every one, this invocation's and earlier ones')
            if br.result.retried:
                console.print(f"retried {br.result.retried} sample(s) left unscored by an earlier invocation")
            if now := sum(o.attempts - 1 for o in br.result.outcomes):
                console.print(f"retried {now} attempt(s) that ended unscored in this invocation (--retries)")
            render.terminal(report, console)
            console.print(f"report again: clawsdk bench report {br.result.run_id}"
                          + (f" --db {db}" if db else ""))
        if br.result.interrupted:
            sys.exit(130)
        exit_if_nothing_scored(sum(t["n"] for t in report["tasks"]) + report["unscored"],
                               sum(t["n"] for t in report["tasks"]), br.result.outcomes)

    @bench.command("report")
    @click.argument("run_id")
    @click.option("--md", "md_path", default=None, metavar="PATH", help="Write Markdown ('-': stdout).")
    @click.option("--html", "html_path", default=None, metavar="PATH", help="Write an HTML page with plots.")
    @click.option("--json", "json_path", default=None, metavar="PATH", help="Write the numbers as JSON ('-': stdout).")
    @click.option("--manifest", "manifest_path", default=None, type=click.Path(dir_okay=False),
                  help="Score the run against this benchmark (default: the one it ran).")
    @click.option("--ks", default=None, help="k values for pass@k and pass^k, e.g. 1,2,4 [default: 1, powers of 2, k].")
    @click.option("--bootstrap", "n_boot", default=2000, show_default=True, type=click.IntRange(100),
                  help="Bootstrap resamples for the confidence intervals.")
    @click.option("--seed", default=0, show_default=True, help="Bootstrap seed.")
    @db_option
    @friendly_errors
    def report_cmd(run_id, md_path, html_path, json_path, manifest_path, ks, n_boot, seed, db):
        """Score RUN_ID: pass@1, pass@k, pass^k and mean score with CIs; per category, sub-score; cost."""
        from clawsdk.bench import html, render
        from clawsdk.bench.manifest import load_manifest
        from clawsdk.bench.report import build_report
        from clawsdk.bench.results import load_run
        from clawsdk.store.store import Store

        manifest = load_manifest(manifest_path) if manifest_path else None
        with Store(db, readonly=True) as store:
            data = load_run(store, run_id, manifest)
        report = build_report(data, ks=_ks(ks), n_boot=n_boot, seed=seed)
        to_stdout = "-" in (md_path, json_path)
        if not to_stdout:
            render.terminal(report, console)
        if md_path:
            _write(md_path, render.markdown(report), "markdown")
        if json_path:
            _write(json_path, json.dumps(report, indent=2, default=str), "json")
        if html_path:
            _write(html_path, html.page(report), "html")

    @bench.command("compare")
    @click.argument("run_a")
    @click.argument("run_b")
    @click.option("--md", "md_path", default=None, metavar="PATH", help="Write Markdown ('-': stdout).")
    @click.option("--json", "json_path", default=None, metavar="PATH", help="Write JSON ('-': stdout).")
    @click.option("--alpha", default=0.05, show_default=True, type=click.FloatRange(0, 1),
                  help="Significance level for 'this category moved'.")
    @click.option("--bootstrap", "n_boot", default=2000, show_default=True, type=click.IntRange(100))
    @click.option("--seed", default=0, show_default=True)
    @db_option
    @friendly_errors
    def compare_cmd(run_a, run_b, md_path, json_path, alpha, n_boot, seed, db):
        """Paired comparison of RUN_B against RUN_A on the tasks both scored."""
        from clawsdk.bench import compare
        from clawsdk.bench.results import load_run
        from clawsdk.store.store import Store

        with Store(db, readonly=True) as store:
            a, b = load_run(store, run_a), load_run(store, run_b)
        c = compare.compare_runs(a, b, n_boot=n_boot, seed=seed, alpha=alpha)
        if "-" not in (md_path, json_path):
            compare.terminal(c, console)
        if md_path:
            _write(md_path, compare.markdown(c), "markdown")
        if json_path:
            _write(json_path, json.dumps(c, indent=2, default=str), "json")

    @bench.command("list")
    @db_option
    @friendly_errors
    def list_cmd(db):
        """Benchmarks in the store and the runs that scored them."""
        from rich.table import Table

        from clawsdk.store.store import Store

        with Store(db, readonly=True) as store:
            if "bench_runs" not in store.db.table_names():
                console.print("no benchmark in this store yet")
                return
            rows = store.query("""SELECT b.run_id, m.name, m.version, m.n_tasks, b.samples, b.status, r.agent,
                                         b.updated_at FROM bench_runs b JOIN benchmarks m ON m.hash = b.benchmark_hash
                                         LEFT JOIN runs r ON r.id = b.run_id ORDER BY b.updated_at DESC""")
            built = store.query("SELECT name, version, n_tasks, hash, created_at FROM benchmarks ORDER BY created_at DESC")
        t = Table(title="benchmarks", title_justify="left")
        for col in ("name", "version", "tasks", "hash", "recorded"):
            t.add_column(col)
        for r in built:
            t.add_row(r["name"], r["version"], str(r["n_tasks"]), r["hash"][:12], r["created_at"][:19])
        console.print(t)
        t = Table(title="benchmark runs", title_justify="left")
        for col in ("run", "benchmark", "agent", "k", "status", "updated"):
            t.add_column(col)
        for r in rows:
            t.add_row(r["run_id"], f"{r['name']}@{r['version']}", r["agent"] or "-", str(r["samples"]),
                      r["status"] if r["status"] == "complete" else f"[yellow]{r['status']}[/yellow]",
                      r["updated_at"][:19])
        console.print(t)

    return bench


def _cat_counts(manifest) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in manifest.tasks:
        out[t.category or "(none)"] = out.get(t.category or "(none)", 0) + 1
    return dict(sorted(out.items()))


@hookimpl
def register_commands(register):
    register(make_group())
