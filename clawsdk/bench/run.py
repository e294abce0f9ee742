"""Running a benchmark: k samples of each of its tasks through the runner, honestly accounted.

- The tasks are found by content hash: in the store, in the manifest's own sources, or in
  task specs given with the run; a task whose content changed is refused, not run.
- Infrastructure failures are retried by the runner; one still failing is recorded as
  unscored and the run stays `partial`. Rerunning the same run id resumes it and tries the
  unscored samples again (their old attempts stay in the store under their attempt number).
- A task folder in another format (ClawGym, PinchBench, ...) runs as a benchmark directly:
  every task it holds, weight 1 each, with the verifier weighting the format defines.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawsdk.bench.build import register_manifest
from clawsdk.bench.manifest import BenchTask, Manifest, ManifestError, load_manifest, looks_like_manifest
from clawsdk.bench.results import RunData, load_run
from clawsdk.errors import TaskFormatError
from clawsdk.runtime.runner import RolloutOutcome, RunResult, check_resume, run
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.store.store import Store, default_db_path, now
from clawsdk.tasks.model import Task
from clawsdk.tasks.sources import load_tasks

JUDGE_ENV = "CLAWSDK_JUDGE"  # what the rubric verifier reads when a task names no judge


@dataclass
class BenchRun:
    manifest: Manifest
    result: RunResult
    data: RunData

    @property
    def status(self) -> str:
        return "complete" if self.data.complete else "partial"


def resolve_benchmark(spec: str | Path, *, name: str | None = None) -> tuple[Manifest, list[Task], list[TaskFormatError]]:
    """A manifest file, or a task spec (SOURCE:PATH or a folder) run as a benchmark of all its tasks."""
    if looks_like_manifest(spec) or str(spec).endswith(".json"):
        return load_manifest(spec), [], []
    loaded = load_tasks(spec)
    if not loaded.tasks:
        raise ManifestError(f"{spec}: no task could be read" + (f" ({loaded.errors[0]})" if loaded.errors else ""))
    tail = str(spec) if Path(str(spec)).exists() else str(spec).partition(":")[2]
    manifest = Manifest(
        name=name or f"{loaded.source}-{Path(tail).resolve().name}", version="adhoc",
        description=f"every task of {spec}, as its format defines them", sources=[str(spec)],
        tasks=[BenchTask(hash=t.hash, id=t.id, category=t.category,
                         weight=float(t.metadata.get("benchmark_weight", 1.0))) for t in loaded.tasks],
        build={"from": str(spec), "source": loaded.source},
    )
    return manifest, loaded.tasks, loaded.errors


def find_tasks(manifest: Manifest, store: Store, extra: Sequence[Task] = (),
               specs: Sequence[str] = ()) -> list[Task]:
    """The manifest's tasks, by hash, from `extra`, the store, then the manifest's sources and `specs`."""
    want = {t.hash: t for t in manifest.tasks}
    found: dict[str, Task] = {t.hash: t for t in extra if t.hash in want}
    for h in want:
        if h not in found:
            t = store.task(h)
            if t is not None:
                found[h] = t
    changed: dict[str, str] = {}
    for spec in [*specs, *manifest.sources]:
        if len(found) == len(want):
            break
        try:
            loaded = load_tasks(spec)
        except Exception as e:  # a stale source: say so below
            changed[f"(source {spec})"] = str(e)
            continue
        by_id = {t.id: t for t in loaded.tasks}
        for h, bt in want.items():
            if h in found:
                continue
            t = next((x for x in loaded.tasks if x.hash == h), None)
            if t is not None:
                found[h] = t
            elif bt.id in by_id:
                changed[bt.id] = f"task {bt.id!r} in {spec} has hash {by_id[bt.id].hash[:12]}, the benchmark " \
                                 f"froze {h[:12]}"
    missing = [bt for h, bt in want.items() if h not in found]
    if missing:
        names = ", ".join(bt.id for bt in missing[:5]) + (" ..." if len(missing) > 5 else "")
        why = "; ".join(list(changed.values())[:3])
        raise ManifestError(f"{len(missing)} task(s) of {manifest.label} not found by hash: {names}"
                            + (f" ({why})" if why else "") +
                            ". Give the task folder with --tasks, or a store that holds them with --db")
    return [found[bt.hash] for bt in manifest.tasks]


def _register(store: Store, manifest: Manifest, run_id: str, samples: int, status: str) -> None:
    register_manifest(store, manifest)
    ts = now()
    with store.transaction():
        existing = store.query("SELECT benchmark_hash FROM bench_runs WHERE run_id = ?", [run_id])
        if existing and existing[0]["benchmark_hash"] != manifest.hash:
            raise ManifestError(f"run {run_id} scored another benchmark (hash {existing[0]['benchmark_hash'][:12]}); "
                                "choose a new --run-id")
        store.db.execute(
            """INSERT INTO bench_runs (run_id, benchmark_hash, samples, status, created_at, updated_at)
               VALUES (?, ?, ?, ?, ?, ?)
               ON CONFLICT(run_id) DO UPDATE SET samples = excluded.samples, status = excluded.status,
                   updated_at = excluded.updated_at""",
            [run_id, manifest.hash, samples, status, ts, ts])


async def bench_run(
    benchmark: str | Path | Manifest,
    *,
    agent: Any = "oracle",
    agent_options: dict[str, Any] | None = None,
    samples: int | None = None,
    sandbox: str = "auto",
    sandbox_config: SandboxConfig | None = None,
    concurrency: int | str = "auto",
    retries: int = 2,
    run_id: str | None = None,
    db: str | os.PathLike | None = None,
    task_specs: Sequence[str] = (),
    judge_model: str | None = None,
    on_rollout: Callable[[RolloutOutcome], None] | None = None,
    handle_signals: bool = False,
) -> BenchRun:
    """Run `agent` on every task of the benchmark, `samples` times each, and record the run as its score.

    The judge of rubric/hybrid verifiers is `judge_model`, else the one the manifest pins
    (through $CLAWSDK_JUDGE while the run lasts), else whatever $CLAWSDK_JUDGE says.
    """
    from clawsdk.runtime.ids import new_run_id
    from clawsdk.sandbox.hostdir import check_root

    # before anything is recorded: a root that cannot hold workspaces makes every rollout unscored
    check_root(sandbox_config.root if sandbox_config else None)
    extra: list[Task]
    errors: list[TaskFormatError]
    if isinstance(benchmark, Manifest):
        manifest, extra, errors = benchmark, [], []
    else:
        manifest, extra, errors = resolve_benchmark(benchmark)
    k = samples or manifest.samples
    run_id = run_id or new_run_id()
    db_path = Path(db) if db is not None else default_db_path()
    with Store(db_path) as store:
        tasks = find_tasks(manifest, store, extra, task_specs)
        if store.run(run_id) is not None and not store.query("SELECT 1 FROM bench_runs WHERE run_id = ?", [run_id]):
            raise ManifestError(f"run {run_id} exists and is not a benchmark run; choose a new --run-id")
        if store.run(run_id) is not None:  # refused now, before the registration: a refused resume changes nothing
            check_resume(store, run_id, agent, sandbox, agent_options)
        _register(store, manifest, run_id, k, "partial")
    judge = judge_model or manifest.judge_model
    saved = os.environ.get(JUDGE_ENV)
    if judge:
        os.environ[JUDGE_ENV] = judge
    try:
        result = await run(tasks, agent=agent, agent_options=agent_options, sandbox=sandbox,
                           sandbox_config=sandbox_config, samples=k, concurrency=concurrency, run_id=run_id,
                           db=db_path, retries=retries, task_errors=errors, on_rollout=on_rollout,
                           handle_signals=handle_signals, retry_unscored=True)
    except Exception:
        with Store(db_path) as store, store.transaction():  # refused before it ran (an agent's preflight):
            if store.run(run_id) is None:                   # no registration of a run that never was
                store.db.execute("DELETE FROM bench_runs WHERE run_id = ?", [run_id])
        raise
    finally:
        if judge:
            if saved is None:
                os.environ.pop(JUDGE_ENV, None)
            else:
                os.environ[JUDGE_ENV] = saved
    with Store(db_path) as store:
        data = load_run(store, run_id, manifest, k)
        _register(store, manifest, run_id, k, "complete" if data.complete else "partial")
        data.bench_status = "complete" if data.complete else "partial"
    return BenchRun(manifest=manifest, result=result, data=data)
