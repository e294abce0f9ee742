"""A benchmark report of one run: the numbers, as a plain dict that every renderer reads.

Per-task values first (each task's pass rate, mean score, pass@k and pass^k from its own
scored samples), then weighted means over tasks with CIs over tasks (Wilson over tasks, with Kish's
effective n when tasks are weighted: `estimators.mean_ci`). A task with
fewer scored samples than k has no pass@k and is counted, not guessed. One task has no interval.

Attempts that ended unscored and were tried again are in no score: the report counts them
(`attempts`, `discarded_attempts`) and gives the pass@1 that would follow were each one a failed
sample (`pass@1_worst_case`), a bound for when failing and infrastructure trouble go together.
A run that was one of its benchmark's build runs chose the tasks it is scored on:
`selection_biased`.
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


def _estimate(values: list[float], weights: list[float], *, n_boot: int, seed: int, confidence: float) -> dict:
    """`mean_ci` as a dict; one task has no interval over tasks, whatever its value (a Wilson interval of
    one 0/1 task said [20.7, 100] in the JSON and the HTML plot, while the tables and the docs gave none)."""
    e = mean_ci(values, weights, n_boot=n_boot, confidence=confidence, seed=seed).as_dict()
    if e["n"] <= 1:
        e.update(low=None, high=None, method=None)
    return e


def _block(tasks: list[TaskSamples], ks: list[int], *, n_boot: int, seed: int, confidence: float) -> dict:
    scored = [t for t in tasks if t.n]

    def est(values: list[float], weights: list[float]) -> dict:
        return _estimate(values, weights, n_boot=n_boot, seed=seed, confidence=confidence)

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
    """Cost per finished rollout, every column over every attempt it took (retries included): what the run
    cost. Tokens are summed from the model responses of every attempt; turns, tool calls and time add the
    earlier attempts' (from their events) to the last attempt's row."""
    def stats(key: str, last_only: str | None = None) -> dict:
        # rows made without the all-attempt sums (by hand, in tests) give their last attempt's values
        vals = [float((r.get(key) if key in r else r.get(last_only)) or 0) for r in rows]
        if not vals:
            return {"mean": None, "median": None, "total": 0}
        return {"mean": sum(vals) / len(vals), "median": statistics.median(vals), "total": sum(vals)}

    return {
        "rollouts": len(rows),
        "attempts": sum(int(r.get("attempts") or 1) for r in rows),
        "over": "all attempts",  # every column sums every attempt of a rollout, retries included
        "model_calls": stats("all_model_calls", "n_model_calls"),  # turns
        "tool_calls": stats("all_tool_calls", "n_tool_calls"),
        "prompt_tokens": stats("prompt_tokens"),
        "completion_tokens": stats("completion_tokens"),
        "duration_s": stats("all_duration_s", "duration_s"),
    }


def _worst_case(data: RunData, overall: dict, *, n_boot: int, seed: int, confidence: float) -> dict:
    """pass@1 had each discarded attempt of a scored sample been a failed sample of its own: c / (n + d) per
    task. Retrying infrastructure failures keeps a sample's last attempt only; where failing trajectories are
    the ones that meet the errors (long contexts, timeouts), retrying selects for success, and this bounds it."""
    if not any(t.discarded_scored for t in data.tasks):
        return dict(overall["pass@1"])
    scored = [t for t in data.tasks if t.n]
    return _estimate([t.c / (t.n + t.discarded_scored) for t in scored], [t.weight for t in scored],
                     n_boot=n_boot, seed=seed, confidence=confidence)


def build_report(data: RunData, *, ks: list[int] | None = None, n_boot: int = DEFAULT_BOOTSTRAP,
                 seed: int = DEFAULT_SEED, confidence: float = 0.95) -> dict[str, Any]:
    ks = sorted(set(ks or default_ks(data.k)))
    opts: dict[str, Any] = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
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
    overall = _block(data.tasks, ks, **opts)
    discarded = data.discarded_attempts
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
        # every attempt of the report's samples, and those before each sample's kept one (tried again)
        "attempts": data.attempts,
        "discarded_attempts": dict(sorted(discarded.items())),
        "pass@1_worst_case": _worst_case(data, overall, **opts),
        # the run is one of the benchmark's build runs: it chose the tasks it is scored on
        "selection_biased": bool(data.selection_runs),
        "selection_biased_by": data.selection_runs,  # which build list names it: runs, reference_runs
        "overall": overall,
        "categories": {c: _block(ts, ks, **opts) for c, ts in sorted(cats.items())},
        "subscores": {
            # spread: how much the sub-score differs between tasks (population sd), so a report
            # can lead with the ones that tell tasks apart, not those at 0% or 100% everywhere
            name: {**_estimate([v for v, _ in vals], [w for _, w in vals], **opts),
                   "spread": statistics.pstdev([v for v, _ in vals])}
            for name, vals in sorted(subscores.items())
        },
        "failure_kinds": dict(sorted(kinds.items())),
        "unscored_kinds": dict(sorted(unscored_kinds.items())),
        "cost": _cost(data.rollouts),
        "tasks": [
            {"id": t.id, "hash": t.hash, "category": t.category, "weight": t.weight, "n": t.n, "passed": t.c,
             "pass_rate": t.pass_rate, "mean_score": t.mean_reward, "unscored": dict(t.unscored),
             "pending": t.pending, "attempts": t.attempts, "discarded_attempts": dict(sorted(t.discarded.items()))}
            for t in data.tasks
        ],
    }


def _scored_kind(kind: str) -> bool:
    try:
        return FailureKind(kind).scored
    except ValueError:
        return False
