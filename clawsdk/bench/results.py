"""A run as the benchmark sees it, read from the store (the only source of scores).

Each task gets its scored samples; infrastructure failures (scored = 0) are kept apart as
unscored, never counted as zeros; samples not finished yet are pending. Task files the run
could not read (its task_errors) are skipped tasks. A run is complete when every task has its
k scored samples and none was skipped, partial otherwise.

A sample whose attempt ended unscored may be tried again (the runner's --retries, a resume with
--retry-unscored, `bench run` on the same run id): the rollout row keeps the last attempt only.
The attempts before it are counted here from the store (the row's attempt number, and each earlier
attempt's ending from its own `error` events), so a report can say how many were thrown away and
what the score would be had each been a failure; the cost is summed over every attempt.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from clawsdk.bench.manifest import Manifest, parse_manifest
from clawsdk.errors import FailureKind
from clawsdk.store.store import Store

#: endings that leave a sample unscored, so that it may be tried again as a next attempt
UNSCORED_ENDINGS = frozenset(k.value for k in FailureKind if not k.scored)

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
    #: attempts its samples took, the kept (last) one of each included
    attempts: int = 0
    #: ending -> attempts before a sample's kept one: unscored, tried again, in no score
    discarded: Counter = field(default_factory=Counter)
    #: of those, the attempts of samples that were scored in the end (what a worst case counts as failures)
    discarded_scored: int = 0

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
    #: the finished rollouts (last attempt's row), with prompt/completion tokens and all_model_calls,
    #: all_tool_calls, all_duration_s summed over every attempt
    rollouts: list[dict[str, Any]]
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

    @property
    def attempts(self) -> int:
        return sum(t.attempts for t in self.tasks)

    @property
    def discarded_attempts(self) -> Counter:
        """ending -> attempts before a sample's kept one (tried again, so in no score)."""
        out: Counter = Counter()
        for t in self.tasks:
            out.update(t.discarded)
        return out

    @property
    def selection_runs(self) -> list[str]:
        """The benchmark's build runs (`bench build --runs` / `--reference-run`) that this run is one of."""
        if self.manifest is None:
            return []
        build = self.manifest.build or {}
        return [key for key in ("runs", "reference_runs") if self.run_id in (build.get(key) or [])]

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


def attempt_endings(store: Store, run_id: str) -> dict[str, list[str]]:
    """rollout id -> how each attempt before its kept (last) one ended, oldest first; only rollouts that
    took more than one attempt.

    The rollout row holds its last attempt only. An earlier attempt's ending is the last `error` event it
    recorded with an unscored kind (an attempt records one before its ending, and an agent_error and then a
    verifier_error both land in one attempt); an attempt with none was cut off in flight (Ctrl-C, SIGTERM, a
    killed runner) and then resumed: `cancelled`.
    """
    rows = store.query("SELECT id, attempt FROM rollouts WHERE run_id = ? AND attempt > 0", [run_id])
    if not rows:
        return {}
    ended: dict[tuple[str, int], str] = {}
    for e in store.query(
            """SELECT e.rollout_id AS id, e.attempt AS attempt, json_extract(e.payload, '$.kind') AS kind
               FROM rollouts o JOIN events e ON e.rollout_id = o.id AND e.attempt < o.attempt
               WHERE o.run_id = ? AND o.attempt > 0 AND e.kind = 'error' ORDER BY e.rollout_id, e.attempt, e.seq""",
            [run_id]):
        if e["kind"] in UNSCORED_ENDINGS:
            ended[(e["id"], e["attempt"])] = e["kind"]
    return {r["id"]: [ended.get((r["id"], a), FailureKind.CANCELLED.value) for a in range(r["attempt"])]
            for r in rows}


def _earlier_costs(store: Store, run_id: str) -> dict[str, dict[str, float]]:
    """rollout id -> model calls, tool calls and seconds of its attempts before the kept one, from their
    events (the row counts the last attempt only). An earlier attempt's time is the span of its recorded
    events: what it spent starting its sandbox before the first one is not in the store."""
    out: dict[str, dict[str, float]] = {}
    for e in store.query(
            """SELECT e.rollout_id AS id, e.attempt AS attempt, SUM(e.kind = 'model_request') AS model_calls,
                      SUM(e.kind = 'tool_call') AS tool_calls,
                      (julianday(MAX(e.ts)) - julianday(MIN(e.ts))) * 86400.0 AS seconds
               FROM rollouts o JOIN events e ON e.rollout_id = o.id AND e.attempt < o.attempt
               WHERE o.run_id = ? AND o.attempt > 0 GROUP BY e.rollout_id, e.attempt""", [run_id]):
        c = out.setdefault(e["id"], {"model_calls": 0, "tool_calls": 0, "seconds": 0.0})
        c["model_calls"] += e["model_calls"] or 0
        c["tool_calls"] += e["tool_calls"] or 0
        c["seconds"] += max(0.0, e["seconds"] or 0.0)
    return out


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
    endings = attempt_endings(store, run_id)  # the attempts before each kept one
    earlier = _earlier_costs(store, run_id)
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
            for row in store.query("SELECT category FROM tasks WHERE hash = ?", [h]):
                tasks[key(task_id, h)] = TaskSamples(hash=h, id=task_id, category=row["category"])
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
        before = endings.get(r["id"], [])
        ts.attempts += (r["attempt"] or 0) + 1
        ts.discarded.update(before)
        if r["status"] != "finished":
            ts.pending += 1
            continue
        kinds[r["failure_kind"] or "unknown"] += 1
        tok = tokens.get(r["id"]) or {}
        more = earlier.get(r["id"]) or {}
        # the row's counts and time are its last attempt's; tokens are every attempt's: the cost is every attempt's
        r = dict(r, prompt_tokens=tok.get("prompt_tokens") or 0, completion_tokens=tok.get("completion_tokens") or 0,
                 category=ts.category, attempts=(r["attempt"] or 0) + 1,
                 all_model_calls=(r["n_model_calls"] or 0) + more.get("model_calls", 0),
                 all_tool_calls=(r["n_tool_calls"] or 0) + more.get("tool_calls", 0),
                 all_duration_s=(r["duration_s"] or 0.0) + more.get("seconds", 0.0))
        finished.append(r)
        if r["scored"] and r["reward"] is not None:
            ts.discarded_scored += len(before)
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
