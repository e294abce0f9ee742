"""A benchmark report of one run: the numbers, as a plain dict that every renderer reads.

Per-task values first (each task's pass rate, mean score, pass@k and pass^k from its own
scored samples), then weighted means over tasks with CIs over tasks (Wilson where every task's
value is 0 or 1, else a bootstrap: `estimators.mean_ci`). A task with
fewer scored samples than k has no pass@k and is counted, not guessed.
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from clawsdk.bench.estimators import DEFAULT_BOOTSTRAP, DEFAULT_SEED, mean_ci, pass_at_k, pass_hat_k
from clawsdk.bench.results import RunData, TaskSamples
from clawsdk.errors import FailureKind

REPORT_SCHEMA_VERSION = 1


def default_ks(k: int) -> list[int]:
    """1, the powers of two below k, and k."""
    ks, x = [1], 2
    while x < k:
        ks.append(x)
        x *= 2
    if k > 1:
        ks.append(k)
    return ks


def _block(tasks: list[TaskSamples], ks: list[int], *, n_boot: int, seed: int, confidence: float) -> dict:
    scored = [t for t in tasks if t.n]

    def est(values: list[float], weights: list[float]) -> dict:
        return mean_ci(values, weights, n_boot=n_boot, confidence=confidence, seed=seed).as_dict()

    out: dict[str, Any] = {
        "tasks": len(tasks),
        "tasks_scored": len(scored),
        "samples_scored": sum(t.n for t in tasks),
        "samples_unscored": sum(sum(t.unscored.values()) for t in tasks),
        "pass@1": est([t.c / t.n for t in scored], [t.weight for t in scored]),
        "mean_score": est([t.mean_reward for t in scored], [t.weight for t in scored]),  # type: ignore[misc]
        "pass@k": {},
        "pass^k": {},
    }
    for k in ks:
        eligible = [t for t in scored if t.n >= k]
        w = [t.weight for t in eligible]
        out["pass@k"][str(k)] = est([pass_at_k(t.n, t.c, k) for t in eligible], w)
        out["pass^k"][str(k)] = est([pass_hat_k(t.n, t.c, k) for t in eligible], w)
        out["pass@k"][str(k)]["short"] = len(scored) - len(eligible)  # tasks with fewer than k samples
    return out


def _cost(rows: list[dict]) -> dict:
    def stats(key: str) -> dict:
        vals = [float(r.get(key) or 0) for r in rows]
        if not vals:
            return {"mean": None, "median": None, "total": 0}
        return {"mean": sum(vals) / len(vals), "median": statistics.median(vals), "total": sum(vals)}

    return {
        "rollouts": len(rows),
        "model_calls": stats("n_model_calls"),  # turns
        "tool_calls": stats("n_tool_calls"),
        "prompt_tokens": stats("prompt_tokens"),
        "completion_tokens": stats("completion_tokens"),
        "duration_s": stats("duration_s"),
    }


def build_report(data: RunData, *, ks: list[int] | None = None, n_boot: int = DEFAULT_BOOTSTRAP,
                 seed: int = DEFAULT_SEED, confidence: float = 0.95) -> dict[str, Any]:
    ks = sorted(set(ks or default_ks(data.k)))
    opts = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
    cats: dict[str, list[TaskSamples]] = {}
    for t in data.tasks:
        cats.setdefault(t.category or "(none)", []).append(t)

    subscores: dict[str, list[tuple[float, float]]] = {}
    for t in data.tasks:
        for name, vals in t.subscores.items():
            subscores.setdefault(name, []).append((sum(vals) / len(vals), t.weight))
    kinds = Counter(data.failure_kinds)
    unscored_kinds = {k: v for k, v in kinds.items() if not _scored_kind(k)}
    pins = data.pins()
    pins["bootstrap"] = {"resamples": n_boot, "seed": seed, "confidence": confidence, "unit": "task"}
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "pins": pins,
        "status": "complete" if data.complete else "partial",
        "k": data.k,
        "ks": ks,
        "run_status": data.run.get("status"),
        "missing_samples": data.missing_samples,
        "unscored": data.unscored,
        "partly_verified": sum(t.partly_verified for t in data.tasks),
        "pending": data.pending,
        "skipped_tasks": data.skipped_tasks,  # task files the run could not read: not in any score
        "overall": _block(data.tasks, ks, **opts),
        "categories": {c: _block(ts, ks, **opts) for c, ts in sorted(cats.items())},
        "subscores": {
            # spread: how much the sub-score differs between tasks (population sd), so a report
            # can lead with the ones that tell tasks apart, not those at 0% or 100% everywhere
            name: {**mean_ci([v for v, _ in vals], [w for _, w in vals], **opts).as_dict(),
                   "spread": statistics.pstdev([v for v, _ in vals])}
            for name, vals in sorted(subscores.items())
        },
        "failure_kinds": dict(sorted(kinds.items())),
        "unscored_kinds": dict(sorted(unscored_kinds.items())),
        "cost": _cost(data.rollouts),
        "tasks": [
            {"id": t.id, "hash": t.hash, "category": t.category, "weight": t.weight, "n": t.n, "passed": t.c,
             "pass_rate": t.pass_rate, "mean_score": t.mean_reward, "unscored": dict(t.unscored),
             "pending": t.pending}
            for t in data.tasks
        ],
    }


def _scored_kind(kind: str) -> bool:
    try:
        return FailureKind(kind).scored
    except ValueError:
        return False
