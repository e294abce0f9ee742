"""Intervals that do not run narrow at the task counts benchmarks have, a compare whose interval agrees with
its test, per-category marks and per-task flips that survive multiplicity, and rates that never print as
100.0 when they are not (the audit of the bench estimators and compare).

Coverage and speed figures are printed by benchmarks/bench_intervals.py; these tests assert behaviour.
"""

from __future__ import annotations

import io
import itertools
import random
from collections import Counter

import pytest
from rich.console import Console

from clawsdk.bench import compare
from clawsdk.bench.compare import compare_runs
from clawsdk.bench.estimators import fisher_exact, holm, mean_ci, paired_test, permutation_test, wilson
from clawsdk.bench.results import RunData, TaskSamples


def _run(run_id: str, outcomes: dict[str, tuple[str, list[bool]]], k: int) -> RunData:
    """A run from per-task sample outcomes: {task id: (category, [passed, ...])}."""
    tasks = [TaskSamples(hash=f"h-{tid}", id=tid, category=cat, rewards=[float(x) for x in passed],
                         passed=list(passed))
             for tid, (cat, passed) in outcomes.items()]
    return RunData(run_id=run_id, run={"agent": "a"}, config={}, k=k, manifest=None, bench_status=None,
                   tasks=tasks, rollouts=[], failure_kinds=Counter(), models=["m"])


def _width(e) -> float:
    return e.high - e.low


# --- A. the interval of one run's figure --------------------------------------------------------------


def test_one_more_failure_never_makes_a_run_look_more_certain():
    """5 tasks x 4 samples: 20/20 passed read 100 [56.6, 100] (Wilson), 19/20 read 95 [85, 100] (bootstrap)."""
    full = mean_ci([1.0] * 5)
    one_fail = mean_ci([1.0] * 4 + [0.75])
    assert _width(one_fail) >= _width(full)
    assert one_fail.low <= full.low  # a worse run's interval starts no higher
    assert one_fail.method == "wilson"
    for n, k in itertools.product((3, 5, 10, 20, 40), (2, 4, 8)):
        all_pass = mean_ci([1.0] * n)
        minus_one = mean_ci([1.0] * (n - 1) + [(k - 1) / k])
        assert _width(minus_one) >= _width(all_pass), (n, k)
        assert minus_one.low <= all_pass.low, (n, k)


def test_the_interval_has_no_jump_between_pass_fail_and_fractional_values():
    """A value a hair off 0 or 1 switched the method (Wilson to bootstrap) and the interval jumped."""
    binary = mean_ci([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    nearly = mean_ci([1.0, 1e-9, 1.0, 1.0, 0.0, 1.0])
    assert nearly.low == pytest.approx(binary.low, abs=1e-6) and nearly.high == pytest.approx(binary.high, abs=1e-6)
    # the Kish effective number of tasks under weights, for fractional values as for 0/1 ones
    e = mean_ci([0.5, 1.0, 0.25], [2.0, 1.0, 1.0])
    assert (e.low, e.high) == pytest.approx(wilson(e.value, 16 / 6))
    assert mean_ci([0.5]).low is None  # one task: no interval over tasks


def test_fractional_values_keep_the_coverage_at_ten_tasks():
    """The auditor's population (85% of tasks solvable at 0.97, 15% at 0.3), 10 tasks x k=4: the percentile
    bootstrap held the truth 85% of the time."""
    rng = random.Random(3)
    truth = 0.85 * 0.97 + 0.15 * 0.3
    hits, trials = 0, 400
    for _ in range(trials):
        rates = [0.97 if rng.random() < 0.85 else 0.3 for _ in range(10)]
        values = [sum(rng.random() < p for _ in range(4)) / 4 for p in rates]
        e = mean_ci(values, n_boot=200, seed=rng.randrange(10**6))
        hits += e.low <= truth <= e.high
    assert hits / trials >= 0.93


# --- A. the interval of a difference agrees with its test ---------------------------------------------


def test_the_auditors_three_task_case_no_longer_excludes_0_with_p_025():
    """3 tasks, k=2: +83 [+50, +100] beside a permutation p of 0.25."""
    t = paired_test([0.0, 0.0, 0.5], [1.0, 1.0, 1.0])
    assert t.p_permutation == pytest.approx(0.25)
    assert t.low <= 0 <= t.high
    five = paired_test([0.0] * 5, [1.0] * 5)  # Newcombe said [+35, +100] beside p = 2/32
    assert five.p_permutation == pytest.approx(2 / 32) and five.low <= 0


def _random_pairs(rng: random.Random, n: int, k: int) -> tuple[list[float], list[float], list[float] | None]:
    effect = rng.choice([0.0, 0.1, 0.3, 0.6, -0.4])
    a, b = [], []
    for _ in range(n):
        q = rng.random()
        pb = min(1.0, max(0.0, q + effect))
        a.append(sum(rng.random() < q for _ in range(k)) / k)
        b.append(sum(rng.random() < pb for _ in range(k)) / k)
    w = [rng.choice([1.0, 2.0, 0.5]) for _ in range(n)] if rng.random() < 0.3 else None
    return a, b, w


def test_the_difference_interval_excludes_0_exactly_when_p_is_below_alpha():
    rng = random.Random(5)
    seen = Counter()
    for i in range(260):
        n = rng.choice([4, 6, 8, 10, 12]) if i < 240 else rng.choice([16, 30])  # exact, then Monte Carlo
        a, b, w = _random_pairs(rng, n, rng.choice([1, 1, 3, 4]))
        for confidence in (0.95, 0.9):
            t = paired_test(a, b, w, confidence=confidence)
            rejected = t.p_permutation < round(1 - confidence, 12)
            assert rejected == (not t.low <= 0 <= t.high), (a, b, w, confidence, t)
            assert t.low <= t.diff <= t.high
            seen[rejected] += 1
    assert seen[True] > 20 and seen[False] > 20  # both sides were tried


def test_the_inverted_test_rejects_just_outside_its_interval():
    """Without the MOVER hull the interval is exactly the shifts whose (brute-force) sign-flip p reaches alpha."""
    rng = random.Random(8)

    def brute_p(d: list[float], w: list[float], delta: float) -> float:
        x = [v - delta for v in d]
        obs = abs(sum(u * y for u, y in zip(x, w, strict=True)))
        hits = sum(abs(sum(s * u * y for s, u, y in zip(signs, x, w, strict=True))) >= obs - 1e-12
                   for signs in itertools.product((1, -1), repeat=len(d)))
        return hits / 2 ** len(d)

    checked = 0
    for _ in range(60):
        a, b, w = _random_pairs(rng, rng.choice([6, 8, 9]), rng.choice([1, 4]))
        w = w or [1.0] * len(a)
        d = [y - x for x, y in zip(a, b, strict=True)]
        t = paired_test(a, b, w, combine=False)
        assert t.p_permutation == pytest.approx(brute_p(d, w, 0.0))
        if t.low > -1:
            assert brute_p(d, w, t.low + 1e-7) >= 0.05 > brute_p(d, w, t.low - 1e-6)
            checked += 1
        if t.high < 1:
            assert brute_p(d, w, t.high - 1e-7) >= 0.05 > brute_p(d, w, t.high + 1e-6)
    assert checked > 10


def test_pairs_that_all_tie_still_get_an_interval():
    """Two runs alike on every task: the bootstrap (and the inverted test alone) said [0, 0]."""
    a = [1.0, 0.75, 0.5, 1.0, 0.25, 0.75, 1.0, 0.5, 1.0, 0.75, 1.0, 0.5, 0.75, 1.0, 0.25]
    t = paired_test(a, list(a))
    assert t.p_permutation == 1.0 and t.low < -0.02 and t.high > 0.02
    near_ceiling = [1.0] * 18 + [0.0] * 2
    t = paired_test(near_ceiling, list(near_ceiling))
    assert t.low < -0.05 and t.high > 0.05


def test_permutation_p_values_are_the_exact_ones():
    assert permutation_test([1.0] * 5) == (pytest.approx(2 / 32), True)
    assert permutation_test([0.0] * 6)[0] == 1.0
    # two +1 differences and two ties: the two keep their sign together in half of the 16 patterns
    assert permutation_test([1.0, 1.0, 0.0, 0.0])[0] == pytest.approx(0.5)


# --- B. multiplicity ----------------------------------------------------------------------------------


def test_holm_adjustment():
    assert holm([0.01, 0.04, 0.03, 0.005, None]) == pytest.approx([0.03, 0.06, 0.06, 0.02, None])
    assert holm([]) == [] and holm([0.2]) == [0.2]


def _category_runs(k: int = 1) -> tuple[RunData, RunData]:
    """Six categories of 10 tasks. In c0 B wins 7 and ties 3 (exact p = 2/128 = 0.016; Holm, second smallest
    of 6: x5 = 0.078); in c1 B wins all 10 (p = 2/1024, Holm x6 = 0.012); in the others the runs agree."""
    a, b = {}, {}
    for c in range(6):
        for i in range(10):
            tid = f"c{c}-t{i}"
            if c == 0:
                wa, wb = (False, True) if i < 7 else (True, True)
            elif c == 1:
                wa, wb = False, True
            else:
                wa = wb = i % 2 == 0
            a[tid] = (f"c{c}", [wa] * k)
            b[tid] = (f"c{c}", [wb] * k)
    return _run("A", a, k), _run("B", b, k)


def test_a_category_is_marked_moved_only_after_holm_across_the_categories():
    a, b = _category_runs()
    c = compare_runs(a, b, n_boot=100)
    c0, c1 = c["categories"]["c0"], c["categories"]["c1"]
    assert c0["pass@1"]["p_permutation"] == pytest.approx(2 / 128)
    assert c0["moved"] is None  # unadjusted, p = 0.016 marked it
    assert c1["moved"] == "up"
    assert c0["pass@1"]["p_holm"] == pytest.approx(5 * 2 / 128)
    assert c1["pass@1"]["p_holm"] == pytest.approx(6 * 2 / 1024)
    assert c["category_test"]["family"] == 6
    buf = io.StringIO()
    compare.terminal(c, Console(file=buf, width=160))
    assert "Holm-adjusted across 6 categories" in buf.getvalue()
    md = compare.markdown(c)
    assert "Holm-adjusted across 6 categories" in md and "p (Holm)" in md
    assert "| c0 |" in md and "| c1 ▲ |" in md


def test_a_single_sample_disagreement_is_not_called_a_flip():
    """At k=1 every per-task disagreement was listed as improved or regressed."""
    a, b = _category_runs(k=1)
    c = compare_runs(a, b, n_boot=100)
    assert c["flipped"]["improved"] == [] and c["flipped"]["regressed"] == []
    assert len(c["flipped"]["changed"]) == 17 and c["flip_test"]["family"] == 0
    buf = io.StringIO()
    compare.terminal(c, Console(file=buf, width=160))
    out = buf.getvalue()
    assert "no task flipped" in out and "changed (17)" in out and "untested at k=1" in out
    md = compare.markdown(c)
    assert "## Improved (0)" in md and "## Changed (17): untested at k=1" in md


def test_a_flip_needs_a_per_task_test_behind_it():
    """k=8: 0/8 -> 8/8 is a change (Fisher p = 1.6e-4, Holm across the testable tasks); 3/8 -> 5/8 crossed 1/2
    too but is not."""
    out_a = {"big": ("x", [False] * 8), "small": ("x", [True] * 3 + [False] * 5),
             "same": ("x", [True] * 4 + [False] * 4), "down": ("y", [True] * 8)}
    out_b = {"big": ("x", [True] * 8), "small": ("x", [True] * 5 + [False] * 3),
             "same": ("x", [True] * 4 + [False] * 4), "down": ("y", [False] * 8)}
    c = compare_runs(_run("A", out_a, 8), _run("B", out_b, 8), n_boot=100)
    assert [f["id"] for f in c["flipped"]["improved"]] == ["big"]
    assert [f["id"] for f in c["flipped"]["regressed"]] == ["down"]
    assert [f["id"] for f in c["flipped"]["changed"]] == ["small"]
    assert c["flip_test"]["family"] == 4  # every task's margins could reach p < 0.05 at 8 samples a side
    assert fisher_exact(0, 8, 8, 8)[0] == pytest.approx(2 / 12870)
    assert c["flipped"]["improved"][0]["p_holm"] == pytest.approx(min(1, 4 * 2 / 12870))
    md = compare.markdown(c)
    assert "## Improved (1)" in md and "## Regressed (1)" in md and "## Changed (1): no per-task support" in md


def test_fisher_exact_matches_known_values():
    assert fisher_exact(1, 10, 11, 14)[0] == pytest.approx(0.002759, abs=1e-6)  # R: fisher.test
    assert fisher_exact(3, 4, 1, 4)[0] == pytest.approx(0.4857, abs=1e-4)
    assert fisher_exact(0, 1, 1, 1) == (1.0, 1.0)  # k=1: no outcome could show a per-task change
    assert fisher_exact(0, 4, 4, 4)[1] == pytest.approx(2 / 70)


# --- C. rounding --------------------------------------------------------------------------------------


def test_compare_never_prints_100_or_0_for_a_rate_that_is_not():
    assert compare._pp(1999 / 2000) == ">99.9" and compare._pp(1.0) == "100.0"
    assert compare._pp(0.99996, True) == "+>99.9" and compare._pp(-0.99996, True) == "->99.9"
    assert compare._pp(0.0004, True) == "+<0.1" and compare._pp(0.0, True) == "+0.0"
    res = {"pass@1": {"mean_a": 0.99996, "mean_b": 1.0, "diff": 0.99996, "low": -0.99996, "high": 0.9999,
                      "p_permutation": 0.5, "p_holm": 1.0, "p_sign": 1.0, "wins": 1, "losses": 0, "ties": 1},
           "score": {"diff": 0.0004, "p_permutation": 1.0, "p_holm": 1.0}}
    short = compare._short_cells(res, 2)
    assert "100.0" not in short[1].split("→")[0] and "+100" not in short[2] and "-100" not in short[2]
    full = compare._metric_cells(res, 2)
    assert full[1] == ">99.9" and full[4] == "[->99.9, +>99.9]"
    # 1,999 of 2,000 by weight (two tasks weighing 1999 and 1): A's pass@1 read 100.0
    a = _run("A", {"t0": ("c", [True]), "t1": ("c", [False])}, 1)
    b = _run("B", {"t0": ("c", [True]), "t1": ("c", [True])}, 1)
    for run in (a, b):
        run.tasks[0].weight = 1999.0
    row = next(line for line in compare.markdown(compare_runs(a, b, n_boot=100)).splitlines()
               if line.startswith("| all"))
    assert row.split("|")[3].strip() == ">99.9" and row.split("|")[4].strip() == "100.0"
