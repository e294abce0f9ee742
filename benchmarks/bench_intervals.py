"""Coverage of the benchmark intervals, false 'moved' marks and false flips, and what compare costs.

    .venv/bin/python benchmarks/bench_intervals.py [TRIALS]

TRIALS (default 300) simulated benchmarks per cell. Tasks differ in difficulty (a per-task pass
chance drawn from a population); the truth is the population mean (of the difference, for
compare). Columns:

1. one run's pass@1 CI (`mean_ci`: Wilson over tasks) against the percentile bootstrap it replaced;
2. compare's CI of B - A (`paired_test`: the inverted sign-flip test with the MOVER hull) against
   the inversion alone, MOVER alone and a paired bootstrap, with how often p < 0.05 (and a check
   that the CI excludes 0 exactly then);
3. two runs of one agent over 6 categories: how often some category is marked moved, unadjusted
   and after Holm;
4. two runs of one agent over 100 tasks: how often some task is called a flip by the old rule
   (pass rate crossed 1/2) and by a per-task Fisher test with Holm;
5. seconds for a compare of 150 and 2,000 tasks.

About 6 minutes on one core at the default.
"""

from __future__ import annotations

import random
import sys
import time
from collections import Counter

from clawsdk.bench.compare import compare_runs
from clawsdk.bench.estimators import bootstrap_mean, fisher_exact, holm, mean_ci, mover_paired, paired_test
from clawsdk.bench.results import RunData, TaskSamples

POPULATIONS = {
    "uniform": lambda r: r.random(),
    "near-ceiling": lambda r: 0.97 if r.random() < 0.85 else 0.3,  # the auditor's
    "middling": lambda r: 0.4 + 0.2 * r.random(),
}


def _samples(rng: random.Random, p: float, k: int) -> float:
    return sum(rng.random() < p for _ in range(k)) / k


def one_run(trials: int) -> None:
    print("1. one run's pass@1, 95% CI: coverage (mean width)")
    print(f"   {'population':<13} {'tasks':>5} {'k':>2}  {'Wilson over tasks':>18}  {'bootstrap (before)':>18}")
    for name, draw in POPULATIONS.items():
        truth = sum(draw(random.Random(i)) for i in range(100_000)) / 100_000
        for n, k in ((5, 1), (5, 4), (10, 4), (20, 4), (50, 4)):
            rng = random.Random(hash((name, n, k)) & 0xFFFF)
            hit = {"w": 0, "b": 0}
            width = {"w": 0.0, "b": 0.0}
            for _ in range(trials):
                values = [_samples(rng, draw(rng), k) for _ in range(n)]
                for key, e in (("w", mean_ci(values)), ("b", bootstrap_mean(values, n_boot=500, seed=1))):
                    hit[key] += e.low - 1e-12 <= truth <= e.high + 1e-12
                    width[key] += e.high - e.low
            cells = [f"{hit[x] / trials:6.1%} ({width[x] / trials:.2f})" for x in ("w", "b")]
            print(f"   {name:<13} {n:>5} {k:>2}  {cells[0]:>18}  {cells[1]:>18}")


def differences(trials: int) -> None:
    print("\n2. compare's CI of B - A at 95%: coverage (mean width); p < 0.05: how often the test rejects")
    head = ["reported", "inversion", "MOVER", "bootstrap"]
    print(f"   {'population':<13} {'tasks':>5} {'k':>2} {'truth':>6}  " + "  ".join(f"{h:>15}" for h in head)
          + "  p<0.05")
    disagreements = 0
    for name, draw in POPULATIONS.items():
        for n, k in ((10, 1), (20, 1), (50, 1), (10, 4), (20, 4)):
            for effect in (0.0, 0.05, 0.15):
                rng = random.Random(hash((name, n, k, effect)) & 0xFFFF)
                truth_rng = random.Random(5)
                truth = 0.0
                for _ in range(50_000):
                    q = draw(truth_rng)
                    truth += min(1.0, q + effect) - q
                truth /= 50_000
                hit = Counter()
                width: Counter = Counter()
                rejected = 0
                for _ in range(trials):
                    a, b = [], []
                    for _ in range(n):
                        q = draw(rng)
                        a.append(_samples(rng, q, k))
                        b.append(_samples(rng, min(1.0, q + effect), k))
                    seed = rng.randrange(10**6)
                    rep = paired_test(a, b, seed=seed, n_perm=2000)
                    inv = paired_test(a, b, seed=seed, n_perm=2000, combine=False)
                    boot = bootstrap_mean([y - x for x, y in zip(a, b, strict=True)], n_boot=500, seed=seed)
                    for key, (lo, hi) in zip(head, ((rep.low, rep.high), (inv.low, inv.high), mover_paired(a, b),
                                                    (boot.low, boot.high)), strict=True):
                        hit[key] += lo - 1e-9 <= truth <= hi + 1e-9
                        width[key] += hi - lo
                    rejected += rep.p_permutation < 0.05
                    disagreements += (rep.p_permutation < 0.05) == (rep.low <= 0 <= rep.high)
                cells = [f"{hit[h] / trials:6.1%} ({width[h] / trials:.2f})" for h in head]
                print(f"   {name:<13} {n:>5} {k:>2} {truth:+6.3f}  " + "  ".join(f"{c:>15}" for c in cells)
                      + f"  {rejected / trials:6.1%}")
    print(f"   CI and p disagreed (0 inside the CI and p < 0.05, or outside and p >= 0.05): {disagreements} times")


def categories(trials: int) -> None:
    print("\n3. one agent twice, 6 categories x 25 tasks, k=1: some category marked moved (alpha 0.05)")
    rng = random.Random(0)
    raw = adjusted = 0
    for _ in range(trials):
        ps = []
        for _ in range(6):
            rates = [rng.random() for _ in range(25)]
            a = [float(rng.random() < p) for p in rates]
            b = [float(rng.random() < p) for p in rates]
            ps.append(paired_test(a, b, n_perm=2000, seed=rng.randrange(10**6)).p_permutation)
        raw += min(ps) < 0.05
        adjusted += min(p for p in holm(ps) if p is not None) < 0.05
    print(f"   unadjusted: {raw / trials:.1%}   Holm-adjusted across the 6: {adjusted / trials:.1%}")


def flips(trials: int) -> None:
    print("\n4. one agent twice, 100 tasks: some task called a flip")
    for k in (1, 4, 8):
        rng = random.Random(k)
        crossed = tested = 0
        for _ in range(trials):
            old = False
            pvals = []
            for _ in range(100):
                p = rng.random()
                ca, cb = sum(rng.random() < p for _ in range(k)), sum(rng.random() < p for _ in range(k))
                old |= (ca / k < 0.5 <= cb / k) or (cb / k < 0.5 <= ca / k)
                pv, least = fisher_exact(ca, k, cb, k)
                if least < 0.05:
                    pvals.append(pv)
            crossed += old
            tested += bool(pvals) and min(holm(pvals)) < 0.05  # type: ignore[type-var]
        print(f"   k={k}: pass rate crossed 1/2 (before) {crossed / trials:.1%}   "
              f"Fisher exact, Holm across the testable tasks {tested / trials:.1%}")


def timing() -> None:
    print("\n5. compare_runs, k=4, 6 categories")
    rng = random.Random(0)
    for n in (150, 2000):
        def run(run_id: str, rates: list[float]) -> RunData:
            tasks = []
            for i, p in enumerate(rates):
                ok = [rng.random() < p for _ in range(4)]
                tasks.append(TaskSamples(hash=f"h{i}", id=f"t{i}", category=f"c{i % 6}",
                                         rewards=[float(x) for x in ok], passed=ok))
            return RunData(run_id=run_id, run={"agent": "x"}, config={}, k=4, manifest=None, bench_status=None,
                           tasks=tasks, rollouts=[], failure_kinds=Counter(), models=[])

        rates = [rng.random() for _ in range(n)]
        a, b = run("a", rates), run("b", rates)
        t0 = time.perf_counter()
        compare_runs(a, b)
        print(f"   {n} tasks: {time.perf_counter() - t0:.2f} s")


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    one_run(trials)
    differences(trials)
    categories(trials)
    flips(trials)
    timing()


if __name__ == "__main__":
    main()
