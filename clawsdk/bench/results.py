"""A run as the benchmark sees it, read from the store (the only source of scores).

Each task gets its scored samples; infrastructure failures (scored = 0) are kept apart as
unscored, never counted as zeros; samples not finished yet are pending. Task files the run
could not read (its task_errors) are skipped tasks. A run is complete when every task has its
k scored samples and none was skipped, partial otherwise.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from clawsdk.bench.manifest import Manifest, parse_manifest
from clawsdk.store.store import Store

#: option names whose values never go into a report (api_key, access_token, ...; not max_tokens)


@dataclass
class TaskSamples:
    hash: str
    id: str
    category: str | None
    weight: float = 1.0
    rewards: list[float] = field(default_factory=list)  # scored samples only
    passed: list[bool] = field(default_factory=list)
    unscored: Counter = field(default_factory=Counter)  # failure kind -> finished samples not scored
    pending: int = 0  # samples not finished: never started, running, retrying, cancelled
    subscores: dict[str, list[float]] = field(default_factory=dict)
    #: unscored samples whose automated part was scored (a hybrid with no judge model for its rubric)
    partly_verified: int = 0

    @property
    def n(self) -> int:
        return len(self.rewards)

    @property
    def c(self) -> int:
        return sum(self.passed)

    @property
    def mean_reward(self) -> float | None:
        return sum(self.rewards) / self.n if self.n else None

    @property
    def pass_rate(self) -> float | None:
        return self.c / self.n if self.n else None


@dataclass
class RunData:
    run_id: str
    run: dict[str, Any]
    config: dict[str, Any]
    k: int
    manifest: Manifest | None
    bench_status: str | None  # from bench_runs, when the run was a `bench run`
    tasks: list[TaskSamples]
    rollouts: list[dict[str, Any]]  # the finished rollouts, with their token counts
    failure_kinds: Counter
    models: list[str]
    judges: list[str] = field(default_factory=list)  # judge models that scored its rollouts (from events)
    #: task files the run could not read (one per path): tasks the score should have and does not
    skipped_tasks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.skipped_tasks and all(t.n >= self.k for t in self.tasks)

    @property
    def missing_samples(self) -> int:
        return sum(max(0, self.k - t.n) for t in self.tasks)

    @property
    def pending(self) -> int:
        return sum(t.pending for t in self.tasks)

    @property
    def unscored(self) -> int:
        return sum(sum(t.unscored.values()) for t in self.tasks)

    def pins(self) -> dict[str, Any]:
        """Everything needed to reproduce the numbers."""
        import clawsdk
        from clawsdk.runtime.runner import recorded

        options = recorded(self.config.get("agent_options"))  # runs stored before the runner redacted them
        judge = self.manifest.judge_model if self.manifest else None
        body = {"config": self.config, "benchmark": self.manifest.hash if self.manifest else None, "k": self.k}
        config_hash = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
        return {
            "run_id": self.run_id,
            "benchmark": self.manifest.label if self.manifest else None,
            "benchmark_hash": self.manifest.hash if self.manifest else None,
            "agent": self.run.get("agent"),
            "models": self.models,
            "model_params": options,
            "judge_model": judge,
            "judges_used": self.judges,
            "seeds": {k: v for k, v in options.items() if "seed" in k.lower()},
            "samples_per_task": self.k,
            "sandbox": self.run.get("sandbox"),
            "config_hash": config_hash,
            "clawsdk_version": clawsdk.__version__,
            "run_created_at": self.run.get("created_at"),
        }


def bench_run_row(store: Store, run_id: str) -> dict | None:
    if "bench_runs" not in store.db.table_names():
        return None
    rows = store.query("SELECT b.*, m.data AS manifest FROM bench_runs b JOIN benchmarks m "
                       "ON m.hash = b.benchmark_hash WHERE b.run_id = ?", [run_id])
    return rows[0] if rows else None


def load_run(store: Store, run_id: str, manifest: Manifest | None = None, k: int | None = None) -> RunData:
    """The run `run_id` per task. Without a manifest, that of its `bench run` or all its tasks."""
    run = store.run(run_id)
    if run is None:
        known = [r["id"] for r in store.query("SELECT id FROM runs ORDER BY created_at DESC LIMIT 5")]
        raise LookupError(f"no run {run_id!r} in {store.path}" + (f" (recent: {', '.join(known)})" if known else ""))
    config = json.loads(run["config"] or "{}")
    bench = bench_run_row(store, run_id)
    if manifest is None and bench is not None:
        manifest = parse_manifest(json.loads(bench["manifest"]), f"benchmark of run {run_id}")
    if k is None:
        k = bench["samples"] if bench else (run["samples"] or 1)
    rows = store.query(
        """SELECT o.*, t.category AS category FROM rollouts o LEFT JOIN tasks t ON t.hash = o.task_hash
           WHERE o.run_id = ? AND o.sample < ? ORDER BY o.task_id, o.sample""", [run_id, k])
    tokens = {r["id"]: r for r in store.query(
        """SELECT o.id AS id,
                  SUM(COALESCE(json_extract(e.payload, '$.usage.prompt_tokens'), 0)) AS prompt_tokens,
                  SUM(COALESCE(json_extract(e.payload, '$.usage.completion_tokens'), 0)) AS completion_tokens
           FROM rollouts o JOIN events e ON e.rollout_id = o.id
           WHERE o.run_id = ? AND e.kind = 'model_response' GROUP BY o.id""", [run_id])}  # every attempt: spent
    subs: dict[str, list[tuple[str, float]]] = {}
    for s in store.query(
            """SELECT v.rollout_id, v.name, v.score FROM verdict_scores v
               JOIN rollouts o ON o.id = v.rollout_id AND o.attempt = v.attempt
               WHERE o.run_id = ? AND o.status = 'finished'
                 AND (o.scored = 1 OR o.failure_kind = 'verifier_error') ORDER BY v.rowid""", [run_id]):
        # an unscored verifier_error with sub-scores is a hybrid that could not be fully judged: its
        # automated part is reported as a sub-score, the task stays unscored
        subs.setdefault(s["rollout_id"], []).append((s["name"], s["score"]))

    judges = [r["judge"] for r in store.query(
        """SELECT DISTINCT json_extract(e.payload, '$.judge') AS judge
           FROM rollouts o JOIN events e ON e.rollout_id = o.id AND e.attempt = o.attempt
           WHERE o.run_id = ? AND e.kind = 'note' AND json_extract(e.payload, '$.judge') IS NOT NULL
           ORDER BY 1""", [run_id])]

    # a benchmark's tasks are its manifest's, by content; a plain run's are the ids it was given: two ids of
    # one content (the store keeps one row per hash) merged, one's unscored sample beside the other's pass
    def key(task_id: str, h: str) -> tuple[str, str]:
        return ("", h) if manifest is not None else (task_id, h)

    tasks: dict[tuple[str, str], TaskSamples] = {}
    if manifest is not None:
        for t in manifest.tasks:
            tasks[key(t.id, t.hash)] = TaskSamples(hash=t.hash, id=t.id, category=t.category, weight=t.weight)
    else:  # every task the run was given, so one that never started counts as missing
        for task_id, h in (config.get("tasks") or {}).items():
            for t in store.query("SELECT category FROM tasks WHERE hash = ?", [h]):
                tasks[key(task_id, h)] = TaskSamples(hash=h, id=task_id, category=t["category"])
    finished: list[dict] = []
    kinds: Counter = Counter()
    models: set[str] = set()
    for r in rows:
        ts = tasks.get(key(r["task_id"], r["task_hash"]))
        if ts is None:
            if manifest is not None:
                continue  # a rollout of a task outside the benchmark: not part of its score
            ts = tasks[key(r["task_id"], r["task_hash"])] = TaskSamples(hash=r["task_hash"], id=r["task_id"],
                                                                        category=r["category"])
        if r["model"]:
            models.add(r["model"])
        if r["status"] != "finished":
            ts.pending += 1
            continue
        kinds[r["failure_kind"] or "unknown"] += 1
        tok = tokens.get(r["id"]) or {}
        r = dict(r, prompt_tokens=tok.get("prompt_tokens") or 0, completion_tokens=tok.get("completion_tokens") or 0,
                 category=ts.category)
        finished.append(r)
        if r["scored"] and r["reward"] is not None:
            ts.rewards.append(float(r["reward"]))
            ts.passed.append(bool(r["passed"]))
            for name, score in subs.get(r["id"], []):
                ts.subscores.setdefault(name, []).append(float(score))
        else:
            ts.unscored[r["failure_kind"] or "unknown"] += 1
            for name, score in subs.get(r["id"], []):
                ts.subscores.setdefault(name, []).append(float(score))
            ts.partly_verified += bool(subs.get(r["id"]))
    for ts in tasks.values():  # samples never started count as pending too
        ts.pending = max(ts.pending, k - ts.n - sum(ts.unscored.values()))
    # each invocation records the files it could not read again: one per path. One naming a task the
    # run has (its skill not installed, in a benchmark that lists it) is already counted as missing,
    # and one in the folder of a task the run has was fixed and read by a later invocation.
    skipped: dict[str, dict] = {}
    ids = {t.id for t in tasks.values()}
    read = {r["path"] for ts in tasks.values() for r in store.query(
        "SELECT json_extract(data, '$.provenance.path') AS path FROM tasks WHERE hash = ?", [ts.hash]) if r["path"]}
    if "task_errors" in store.db.table_names():
        for e in store.query("SELECT path, field, task_id, message FROM task_errors WHERE run_id = ? ORDER BY id",
                             [run_id]):
            if e["task_id"] not in ids and not {e["path"], str(PurePath(e["path"]).parent)} & read:
                skipped.setdefault(e["path"], e)
    return RunData(run_id=run_id, run=run, config=config, k=k, manifest=manifest,
                   bench_status=bench["status"] if bench else None,
                   tasks=sorted(tasks.values(), key=lambda t: t.id), rollouts=finished, failure_kinds=kinds,
                   models=sorted(models), judges=judges, skipped_tasks=list(skipped.values()))
