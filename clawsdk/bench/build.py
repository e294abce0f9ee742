"""Building a benchmark from a task pool: the tasks that separate models, measured honestly.

The filters run cheapest first and every dropped task says why:

1. tasks that could not be read (`load_error`);
2. overlap with a training export: the same content hash (`training_hash`) or a
   near-duplicate instruction (`training_near_duplicate`);
3. measured pass rates from the store (one or more runs, k samples each; the pass rate of a
   task is the mean of its per-run pass rates, so every model counts the same):
   `unmeasured`, `too_easy` / `too_hard` (outside the difficulty band), `low_spread` (the
   runs agree, so the task does not separate them);
4. near-duplicates within the pool (`pool_near_duplicate`; the more discriminating one stays);
5. flaky verifiers: differing scores in repeated deterministic runs (`flaky_verifier`) and,
   optionally, re-verification of the same final workspace;
6. optionally, validation (`validation_failed`: the untouched workspace passes, or the
   reference solution fails);
7. category quotas (`over_quota`, `no_quota`), most discriminating tasks first (pass rate
   nearest 1/2, then widest spread between runs, then a seeded shuffle).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from clawsdk.bench.decontam import DEFAULT_THRESHOLD, TrainingSet, pool_duplicates
from clawsdk.bench.manifest import BenchTask, Manifest, ManifestError
from clawsdk.errors import TaskFormatError
from clawsdk.store.store import Store, dumps, now
from clawsdk.tasks.model import Task

OTHER = "*"  # the quota key for categories not named


@dataclass
class BuildOptions:
    name: str
    version: str
    description: str = ""
    #: keep tasks whose mean pass rate lies in [low, high]; None keeps every difficulty
    band: tuple[float, float] | None = (0.1, 0.9)
    #: scored samples a run needs on a task for its pass rate to count
    min_samples: int = 1
    #: keep tasks whose pass rates across runs differ by at least this much (0: off)
    min_spread: float = 0.0
    #: category -> how many tasks; the key "*" covers categories not named; empty: no quotas
    quotas: dict[str, int] = field(default_factory=dict)
    #: at most this many tasks in all, balanced across categories
    total: int | None = None
    near_duplicate: float = DEFAULT_THRESHOLD
    dedup_pool: bool = True
    weighting: str = "uniform"  # uniform | category (each category weighs the same in all)
    judge_model: str | None = None
    samples: int = 1
    seed: int = 0


@dataclass
class Dropped:
    id: str
    hash: str | None
    category: str | None
    reason: str
    detail: str = ""


@dataclass
class Candidate:
    task: Task
    rates: dict[str, float] = field(default_factory=dict)  # run id -> pass rate
    samples: dict[str, int] = field(default_factory=dict)

    @property
    def pass_rate(self) -> float | None:
        return sum(self.rates.values()) / len(self.rates) if self.rates else None

    @property
    def spread(self) -> float:
        return max(self.rates.values()) - min(self.rates.values()) if len(self.rates) > 1 else 0.0


@dataclass
class BuildResult:
    manifest: Manifest
    kept: list[Candidate]
    dropped: list[Dropped]
    shortfalls: dict[str, tuple[int, int]]  # category -> (quota, available)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for d in self.dropped:
            out[d.reason] = out.get(d.reason, 0) + 1
        return out


Measurements = dict[str, dict[str, tuple[int, int]]]  # task hash -> run id -> (scored n, passed c)


def measure(store: Store, run_ids: Sequence[str]) -> Measurements:
    """Scored samples and passes of every task in each run; infrastructure failures do not count."""
    out: Measurements = {}
    for run_id in run_ids:
        if store.run(run_id) is None:
            raise LookupError(f"no run {run_id!r} in {store.path} to measure pass rates from")
        for r in store.query(
                """SELECT task_hash, COUNT(*) AS n, SUM(passed = 1) AS c FROM rollouts
                   WHERE run_id = ? AND status = 'finished' AND scored = 1 GROUP BY task_hash""", [run_id]):
            out.setdefault(r["task_hash"], {})[run_id] = (r["n"], r["c"] or 0)
    return out


def tasks_of_runs(store: Store, run_ids: Sequence[str]) -> list[Task]:
    """The pool when none is given: every task the runs rolled out, as the store holds it."""
    hashes = [r["task_hash"] for run_id in run_ids for r in
              store.query("SELECT DISTINCT task_hash FROM rollouts WHERE run_id = ?", [run_id])]
    tasks = {}
    for h in hashes:
        t = store.task(h)
        if t is not None:
            tasks[h] = t
    return list(tasks.values())


def _order_key(seed: int):
    def key(c: Candidate) -> tuple:
        p = c.pass_rate
        tie = hashlib.sha256(f"{seed}:{c.task.hash}".encode()).hexdigest()
        return (abs(p - 0.5) if p is not None else 0.0, -c.spread, tie)
    return key


def select(pool: Sequence[Task], options: BuildOptions, *, measurements: Measurements | None = None,
           load_errors: Sequence[TaskFormatError] = (), training: TrainingSet | None = None,
           flaky: dict[str, str] | None = None, checks: Any = None, sources: Sequence[str] = (),
           runs: Sequence[str] = (), reference_runs: Sequence[str] = ()) -> BuildResult:
    """Apply the filters to `pool` and freeze what is left as a manifest.

    `checks(candidates) -> dict[hash, (reason, detail)]` runs the expensive checks
    (re-verification, validation) on the tasks that survived the cheap filters.
    """
    if options.band is not None and measurements is None:
        raise ManifestError("a difficulty band needs measured pass rates: give the runs to measure "
                            "(--runs), or build without a band (--no-band)")
    if options.band is not None and not (0 <= options.band[0] <= options.band[1] <= 1):
        raise ManifestError(f"difficulty band {options.band} must satisfy 0 <= low <= high <= 1")
    if options.weighting not in ("uniform", "category"):
        raise ManifestError(f"weighting {options.weighting!r}: use 'uniform' or 'category'")
    dropped: list[Dropped] = []

    def drop(t: Task, reason: str, detail: str = "") -> None:
        dropped.append(Dropped(t.id, t.hash, t.category, reason, detail))

    for e in load_errors:
        dropped.append(Dropped(e.task_id or e.path, None, None, "load_error", str(e)))

    # 2. training overlap
    cands: list[Candidate] = []
    seen: set[str] = set()
    for t in pool:
        if t.hash in seen:
            drop(t, "duplicate_hash", "the same task appears twice in the pool")
            continue
        seen.add(t.hash)
        if training is not None:
            if t.hash in training.hashes:
                drop(t, "training_hash", "the training export holds this exact task")
                continue
            m = training.near_duplicate(t, options.near_duplicate)
            if m is not None:
                drop(t, "training_near_duplicate", f"{m.detail} as training task {m.other}")
                continue
        cands.append(Candidate(t))

    # 3. measured difficulty
    if measurements is not None:
        kept = []
        for c in cands:
            for run_id, (n, k) in (measurements.get(c.task.hash) or {}).items():
                if n >= options.min_samples:
                    c.rates[run_id], c.samples[run_id] = k / n, n
            p = c.pass_rate
            if p is None:
                drop(c.task, "unmeasured", f"fewer than {options.min_samples} scored sample(s) in every run")
            elif options.band is not None and p > options.band[1]:
                drop(c.task, "too_easy", f"pass rate {p:.2f} above {options.band[1]:g}")
            elif options.band is not None and p < options.band[0]:
                drop(c.task, "too_hard", f"pass rate {p:.2f} below {options.band[0]:g}")
            elif options.min_spread > 0 and c.spread < options.min_spread:
                drop(c.task, "low_spread", f"pass rates across runs differ by {c.spread:.2f} "
                                           f"(< {options.min_spread:g})")
            else:
                kept.append(c)
        cands = kept
    cands.sort(key=_order_key(options.seed))

    # 4. near-duplicates within the pool: the more discriminating (earlier) one stays
    if options.dedup_pool:
        dups = pool_duplicates([c.task for c in cands], options.near_duplicate)
        by_hash = {c.task.hash: c.task for c in cands}
        for h, (kept_id, detail) in dups.items():
            drop(by_hash[h], "pool_near_duplicate", f"{detail} as task {kept_id!r}")
        cands = [c for c in cands if c.task.hash not in dups]

    # 5./6. flaky verifiers and validation
    if flaky:
        for c in cands:
            if c.task.hash in flaky:
                drop(c.task, "flaky_verifier", flaky[c.task.hash])
        cands = [c for c in cands if c.task.hash not in flaky]
    if checks is not None and cands:
        failed = checks(cands)
        for c in cands:
            if c.task.hash in failed:
                drop(c.task, *failed[c.task.hash])
        cands = [c for c in cands if c.task.hash not in failed]

    # 7. quotas and balance
    cands, shortfalls = _apply_quotas(cands, options, drop)
    if not cands:
        raise ManifestError(f"no task is left for the benchmark (dropped: {_counts(dropped) or 'none, the pool is empty'}); "
                            "widen the band or quotas")
    manifest = Manifest(
        name=options.name, version=options.version, description=options.description,
        judge_model=options.judge_model, samples=options.samples, sources=list(sources),
        tasks=_weighted(cands, options.weighting),
        build={
            "built_at": now(), "options": asdict(options), "runs": list(runs),
            "reference_runs": list(reference_runs), "pool": len(pool) + len(load_errors),
            "training_exports": training.sources if training else [],
            "dropped_counts": _counts(dropped),
            "dropped": [asdict(d) for d in dropped],
            "shortfalls": {k: {"quota": q, "available": a} for k, (q, a) in shortfalls.items()},
        },
    )
    return BuildResult(manifest, cands, dropped, shortfalls)


def _counts(dropped: list[Dropped]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dropped:
        out[d.reason] = out.get(d.reason, 0) + 1
    return out


def _apply_quotas(cands: list[Candidate], options: BuildOptions, drop) -> tuple[list[Candidate], dict]:
    by_cat: dict[str, list[Candidate]] = {}
    for c in cands:  # already in order of preference
        by_cat.setdefault(c.task.category or "(none)", []).append(c)
    shortfalls: dict[str, tuple[int, int]] = {}
    if options.quotas:
        chosen: dict[str, list[Candidate]] = {}
        for cat, cs in by_cat.items():
            quota = options.quotas.get(cat, options.quotas.get(OTHER))
            if quota is None:
                for c in cs:
                    drop(c.task, "no_quota", f"category {cat!r} has no quota")
                continue
            chosen[cat] = cs[:quota]
            for c in cs[quota:]:
                drop(c.task, "over_quota", f"category {cat!r} is full ({quota})")
        for cat, quota in options.quotas.items():
            have = len(chosen.get(cat, []))
            if cat != OTHER and have < quota:
                shortfalls[cat] = (quota, have)
        by_cat = chosen
    if options.total is not None:
        # round robin over categories, best first in each: a balanced benchmark of `total`
        picked: dict[str, list[Candidate]] = {c: [] for c in by_cat}
        queues = {c: list(cs) for c, cs in sorted(by_cat.items())}
        n = 0
        while n < options.total and any(queues.values()):
            for cat, q in queues.items():
                if q and n < options.total:
                    picked[cat].append(q.pop(0))
                    n += 1
        for q in queues.values():
            for c in q:
                drop(c.task, "over_quota", f"the benchmark is full ({options.total} tasks)")
        by_cat = picked
    kept = [c for cs in by_cat.values() for c in cs]
    kept.sort(key=lambda c: (c.task.category or "", c.task.id))
    return kept, shortfalls


def _weighted(cands: list[Candidate], weighting: str) -> list[BenchTask]:
    sizes: dict[str, int] = {}
    for c in cands:
        sizes[c.task.category or ""] = sizes.get(c.task.category or "", 0) + 1
    n_cat = len(sizes)
    out = []
    for c in cands:
        w = 1.0
        if weighting == "category":  # each category sums to len/n_cat, so weights average 1
            w = len(cands) / (n_cat * sizes[c.task.category or ""])
        p = c.pass_rate
        out.append(BenchTask(hash=c.task.hash, id=c.task.id, category=c.task.category, weight=round(w, 6),
                             pass_rate=None if p is None else round(p, 4)))
    return out


def register_manifest(store: Store, manifest: Manifest) -> None:
    """Record a manifest in the store (idempotent: the same manifest hash is one row)."""
    with store.transaction():
        store.db.execute(
            "INSERT OR IGNORE INTO benchmarks (hash, name, version, n_tasks, created_at, data) VALUES (?, ?, ?, ?, ?, ?)",
            [manifest.hash, manifest.name, manifest.version, len(manifest.tasks), now(),
             dumps(manifest.model_dump(mode="json"))],
        )


def runtime_checks(*, reverify: int = 0, validate: bool = False, sandbox: str = "auto",
                   concurrency: int = 4, progress: Any = None):
    """The expensive checks `select` runs on the survivors: re-verification and validation."""
    if not reverify and not validate:
        return None

    def checks(cands: list[Candidate]) -> dict[str, tuple[str, str]]:
        import anyio

        from clawsdk.bench.flaky import reverify_tasks
        from clawsdk.runtime.validate import validate_tasks

        tasks = [c.task for c in cands]
        failed: dict[str, tuple[str, str]] = {}

        async def go() -> None:
            if validate:
                if progress:
                    progress(f"validating {len(tasks)} task(s)")
                for t, v in zip(tasks, await validate_tasks(tasks, sandbox, concurrency), strict=True):
                    if not v.ok:
                        failed[t.hash] = ("validation_failed", v.problem)
            if reverify:
                rest = [t for t in tasks if t.hash not in failed]
                if progress:
                    progress(f"re-verifying {len(rest)} task(s) {reverify} times each")
                for t, r in zip(rest, await reverify_tasks(rest, reverify, sandbox, concurrency), strict=True):
                    if r.broken:
                        failed[t.hash] = ("validation_failed", r.detail)
                    elif r.flaky:
                        failed[t.hash] = ("flaky_verifier", r.detail)

        anyio.run(go)
        return failed

    return checks
