"""Estimators for benchmark scores, in plain Python so `import clawsdk` stays light.

- pass@k: the unbiased estimator of Chen et al. (2021, "Evaluating Large Language Models
  Trained on Code"): the chance that at least one of k samples drawn without replacement
  from the n scored samples of a task passes, 1 - C(n-c, k) / C(n, k).
- pass^k: the chance that all k drawn samples pass, C(c, k) / C(n, k) (tau-bench's
  reliability measure).
- Confidence intervals are over tasks (the unit that varies between benchmarks). For per-task
  values in [0, 1] (pass rates, pass@k, pass^k, scores) the Wilson score interval of the mean
  over tasks, with Kish's effective number of tasks under weights. It is exact in form for 0/1
  values and conservative for fractional ones (a value in [0, 1] with mean mu has variance at
  most mu(1 - mu)), and it is continuous in the mean: 19 of 20 samples passed never gets a
  narrower interval than 20 of 20. (A percentile bootstrap, the method before, said [100, 100]
  for 3 tasks that all passed and held the truth 85% of the time at 10 tasks with k = 4.) Values
  outside [0, 1] fall back to a percentile bootstrap with a fixed seed.
- Paired tests for comparing two runs on the same tasks: a sign-flip permutation test of the
  (weighted) mean difference, exact up to 12 pairs and Monte Carlo beyond, and the exact sign
  test. The interval of the difference agrees with the permutation test: it excludes 0 exactly
  when p < 1 - confidence (the percentile bootstrap it replaced said +83 [+50, +100] for 3 tasks
  where p was 0.25). It is the hull of two intervals: (1) the test inverted, every shift delta
  that the sign-flip test of "the differences are symmetric about delta" does not reject, from
  the same sign patterns as p; (2) for values in [0, 1], MOVER (Zou and Donner 2008) from the two
  runs' Wilson intervals over tasks and their correlation, which is Newcombe's method 10 for 0/1
  values. (2) keeps the interval from collapsing where nearly every pair ties (the inversion
  alone says [0, 0] when every pair ties, and held a 3% difference half the time with 10 tasks
  near the ceiling); on the side of 0 it counts only where it does not contradict the test. With
  5 pairs or fewer no sign pattern can reject (the least p is 2/32), and the interval is the
  whole range, [-1, 1] for values in [0, 1]. benchmarks/bench_intervals.py prints the coverage.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_BOOTSTRAP = 2000
DEFAULT_SEED = 0


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with n scored samples of which c passed (needs n >= k)."""
    _check(n, c, k)
    if n - c < k:
        return 1.0
    # 1 - C(n-c, k)/C(n, k) as a product, stable for large n (Chen et al., Figure 3)
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k for one task: the chance that k samples drawn without replacement all pass."""
    _check(n, c, k)
    if c < k:
        return 0.0
    prod = 1.0
    for i in range(k):
        prod *= (c - i) / (n - i)
    return prod


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n):
        raise ValueError(f"passed samples c={c} must lie in 0..n={n}")
    if not (1 <= k <= n):
        raise ValueError(f"k={k} must lie in 1..n={n} (a task needs at least k scored samples)")


def weighted_mean(values: Sequence[float], weights: Sequence[float] | None = None) -> float | None:
    if not values:
        return None
    if weights is None:
        return sum(values) / len(values)
    total = sum(weights)
    if total <= 0:
        return None
    return sum(v * w for v, w in zip(values, weights, strict=True)) / total


@dataclass
class Estimate:
    """A value with a confidence interval and the number of tasks behind it."""

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0
    method: str | None = None  # how the interval was made: wilson, bootstrap

    def as_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n, "method": self.method}


def _z(confidence: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(p: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion `p` observed over `n` (possibly effective) trials."""
    z = _z(confidence)
    p = min(1.0, max(0.0, p))  # a weighted mean of values in [0, 1] can round a hair past either end
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (0.0 if p <= 0 else max(0.0, centre - half)), (1.0 if p >= 1 else min(1.0, centre + half))


def _unit(values: Sequence[float]) -> bool:
    """Every value lies in [0, 1] (a pass rate, pass@k, pass^k, a score)."""
    return all(0.0 <= v <= 1.0 for v in values)


def _effective_n(weights: Sequence[float]) -> float:
    """Kish's effective sample size, (sum w)^2 / sum w^2: n when the weights are equal."""
    return sum(weights) ** 2 / sum(w * w for w in weights)


def mean_ci(values: Sequence[float], weights: Sequence[float] | None = None, *,
            n_boot: int = DEFAULT_BOOTSTRAP, confidence: float = 0.95, seed: int = DEFAULT_SEED) -> Estimate:
    """The (weighted) mean of per-task values with a CI over tasks. Values in [0, 1]: the Wilson score
    interval over Kish's effective number of tasks, exact in form for 0/1 values and conservative for
    fractional ones (Var <= mu(1 - mu) in [0, 1]); a fractional value no longer switches to a bootstrap
    that ran far narrower (19/20 passed read [85, 100] where 20/20 read [57, 100]). Values outside
    [0, 1]: the percentile bootstrap (`bootstrap_mean`). One task has no interval over tasks."""
    values = list(values)
    w = list(weights) if weights is not None else [1.0] * len(values)
    if len(w) != len(values):
        raise ValueError("values and weights differ in length")
    if not values or not _unit(values) or sum(w) <= 0:
        return bootstrap_mean(values, w, n_boot=n_boot, confidence=confidence, seed=seed)
    mean = weighted_mean(values, w)
    if len(values) == 1:
        return Estimate(mean, None, None, 1)
    low, high = wilson(mean, _effective_n(w), confidence)  # type: ignore[arg-type]
    return Estimate(mean, low, high, len(values), "wilson")


def _percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    if not sorted_values:
        raise ValueError("no values")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_mean(values: Sequence[float], weights: Sequence[float] | None = None, *,
                   n_boot: int = DEFAULT_BOOTSTRAP, confidence: float = 0.95,
                   seed: int = DEFAULT_SEED) -> Estimate:
    """The (weighted) mean of per-task values with a percentile bootstrap CI over tasks."""
    values = list(values)
    w = list(weights) if weights is not None else [1.0] * len(values)
    if len(w) != len(values):
        raise ValueError("values and weights differ in length")
    mean = weighted_mean(values, w)
    if mean is None:
        return Estimate(None, n=0)
    n = len(values)
    if n == 1:
        return Estimate(mean, None, None, 1)  # one task: no interval over tasks
    means = sorted(_resampled_means(values, w, n_boot, seed))
    alpha = (1 - confidence) / 2
    return Estimate(mean, _percentile(means, alpha), _percentile(means, 1 - alpha), n, "bootstrap")


def _resampled_means(values: list[float], weights: list[float], n_boot: int, seed: int) -> list[float]:
    """Means of `n_boot` resamples of the tasks, drawn with replacement (same seed, same draws)."""
    rng = random.Random(seed)
    n = len(values)
    out: list[float] = []
    if all(x == weights[0] for x in weights):
        for _ in range(n_boot):
            out.append(sum(rng.choices(values, k=n)) / n)
        return out
    pairs = list(zip(values, weights, strict=True))
    for _ in range(n_boot):
        draw = rng.choices(pairs, k=n)
        tw = sum(x[1] for x in draw)
        if tw > 0:
            out.append(sum(x[0] * x[1] for x in draw) / tw)
    return out


@dataclass
class PairedTest:
    """A paired comparison: mean difference (B - A) with its CI and p-values."""

    n: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    low: float | None
    high: float | None
    p_permutation: float | None  # sign-flip permutation test on the mean difference
    p_sign: float | None  # exact sign test on the non-zero differences
    wins: int = 0  # tasks where B > A
    losses: int = 0
    ties: int = 0
    exact: bool = True  # permutation p computed exactly (all sign flips) or by Monte Carlo
    method: str | None = None  # how the interval was made: sign-flip inversion [+ mover]

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided binomial (p = 1/2) test on the number of wins among non-ties."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


_TIE = 1e-9  # shifts this close to a pattern's boundary count as ties (float sums of equal statistics)


@dataclass
class _SignFlips:
    """For every sign pattern s (all 2^n, or the observed one and `n_perm` random ones), the shifts delta at
    which the flipped statistic |sum s_i w_i (d_i - delta)| reaches the observed |sum w_i (d_i - delta)|.

    Both sides are linear in delta, so the set is the closed interval between (m - a)/(1 - b) and
    (m + a)/(1 + b), where m is the observed mean, a = sum s w d / W and b = sum s w / W; it always holds m.
    A pattern with all signs alike (|b| = 1) ties with the observed one at every delta. The p-value of the
    shift delta is (the patterns whose interval holds delta) / `total`."""

    mean: float
    always: int  # patterns that count at every shift (the observed one; all signs alike)
    lows: list[float]
    highs: list[float]
    total: int
    exact: bool

    def count(self, delta: float) -> int:
        return self.always + sum(1 for lo, hi in zip(self.lows, self.highs, strict=True) if lo <= delta <= hi)

    def p(self, delta: float = 0.0) -> float:
        return self.count(delta) / self.total

    def interval(self, alpha: float, bounds: tuple[float, float] = (-math.inf, math.inf)) -> tuple[float, float]:
        """Every shift whose p is at least `alpha`: the count falls monotonically away from the mean, since
        every pattern's interval holds it, so these shifts form one closed interval."""
        need = max(0, math.floor(alpha * self.total) - 1)
        while need / self.total < alpha:  # the least count whose p (as a float) reaches alpha
            need += 1
        r = need - self.always
        if r <= 0:
            return bounds
        low = sorted(self.lows)[r - 1]
        high = sorted(self.highs, reverse=True)[r - 1]
        # report the ends without the tie margin, and 0 where the margin alone let it in
        low = 0.0 if low <= 0 < low + _TIE else low + _TIE
        high = 0.0 if high >= 0 > high - _TIE else high - _TIE
        return max(bounds[0], low), min(bounds[1], high)


def _sign_flips(diffs: Sequence[float], weights: Sequence[float] | None = None, *, n_perm: int = 10_000,
                seed: int = DEFAULT_SEED, exact_limit: int = 12) -> _SignFlips:
    d = list(diffs)
    w = list(weights) if weights is not None else [1.0] * len(d)
    if len(w) != len(d):
        raise ValueError("differences and weights differ in length")
    total_w = sum(w)
    wd = [x * y for x, y in zip(d, w, strict=True)]
    sum_wd = sum(wd)
    m = sum_wd / total_w
    out = _SignFlips(m, 0, [], [], 0, len(d) <= exact_limit)

    def add(plus: list[bool]) -> None:
        # a = (sum over + of w d - sum over - of w d) / W, b likewise with w
        pos_wd = sum(itertools.compress(wd, plus))
        pos_w = sum(itertools.compress(w, plus))
        a = (2 * pos_wd - sum_wd) / total_w
        b = (2 * pos_w - total_w) / total_w
        if all(plus) or not any(plus) or abs(b) >= 1.0:
            out.always += 1
            return
        ends = ((m - a) / (1 - b), (m + a) / (1 + b), m)
        out.lows.append(min(ends) - _TIE)
        out.highs.append(max(ends) + _TIE)

    if out.exact:
        for signs in itertools.product((True, False), repeat=len(d)):
            add(list(signs))
        out.total = 2 ** len(d)
        return out
    rng = random.Random(seed)  # the same draws as before: each sign + when random() < 0.5
    out.always = 1  # the observed pattern
    for _ in range(n_perm):
        add([rng.random() < 0.5 for _ in d])
    out.total = n_perm + 1
    return out


def permutation_test(diffs: Sequence[float], weights: Sequence[float] | None = None, *,
                     n_perm: int = 10_000, seed: int = DEFAULT_SEED, exact_limit: int = 12) -> tuple[float, bool]:
    """Two-sided sign-flip test of 'the mean difference is zero'; exact up to `exact_limit` pairs.

    Under the null each pair's difference is as likely negative as positive, so flipping
    signs at random gives the null distribution of the (weighted) mean difference.
    """
    if not list(diffs):
        return 1.0, True
    flips = _sign_flips(diffs, weights, n_perm=n_perm, seed=seed, exact_limit=exact_limit)
    return flips.p(0.0), flips.exact


def paired_test(a: Sequence[float], b: Sequence[float], weights: Sequence[float] | None = None, *,
                n_boot: int = DEFAULT_BOOTSTRAP, confidence: float = 0.95, seed: int = DEFAULT_SEED,
                tie_tolerance: float = 1e-9, combine: bool = True, n_perm: int = 10_000) -> PairedTest:
    """Compare per-task values of two runs on the same tasks (B - A).

    The interval excludes 0 exactly when `p_permutation` is below 1 - confidence: it is the set of shifts the
    sign-flip test does not reject (`_SignFlips.interval`, from the same sign patterns as the p-value), and for
    values in [0, 1] (`combine`) its hull with `mover_paired`, taken on the side of 0 only where that does
    not contradict the test. Values in [0, 1] bound it to [-1, 1]; others may leave it infinite where too
    few pairs can reject any shift. `n_boot` is kept for callers and unused.
    """
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError("paired samples differ in length")
    n = len(a)
    w = list(weights) if weights is not None else [1.0] * n
    if n == 0:
        return PairedTest(0, None, None, None, None, None, None, None)
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    flips = _sign_flips(diffs, w, n_perm=n_perm, seed=seed)
    unit = _unit(a) and _unit(b)
    alpha = round(1 - confidence, 12)  # 1 - 0.95 is 0.05000000000000004 in floats
    low, high = flips.interval(alpha, (-1.0, 1.0) if unit else (-math.inf, math.inf))
    p_perm = flips.p(0.0)
    method = "sign-flip inversion"
    if unit and combine:
        # the hull with MOVER (Newcombe's method 10 for 0/1 values), whose variance bound does not collapse
        # when nearly every pair ties; on the side of 0, only where it does not contradict the test
        m_low, m_high = mover_paired(a, b, w, confidence)
        rejected = p_perm < alpha
        if not (rejected and flips.mean > 0 and m_low <= 0):
            low = min(low, m_low)
        if not (rejected and flips.mean < 0 and m_high >= 0):
            high = max(high, m_high)
        method = "sign-flip inversion + mover"
    wins = sum(1 for x in diffs if x > tie_tolerance)
    losses = sum(1 for x in diffs if x < -tie_tolerance)
    return PairedTest(
        n=n, mean_a=weighted_mean(a, w), mean_b=weighted_mean(b, w), diff=weighted_mean(diffs, w), low=low,
        high=high, p_permutation=p_perm, p_sign=sign_test(wins, losses),
        wins=wins, losses=losses, ties=n - wins - losses, exact=flips.exact, method=method,
    )


def newcombe_paired(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The CI of p_b - p_a for paired 0/1 outcomes: Newcombe (1998, "Improved confidence intervals
    for the difference between binomial proportions based on paired data", method 10)."""
    n = len(a)
    both = sum(1 for x, y in zip(a, b, strict=True) if x and y)
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    neither = n - both - only_a - only_b
    pa, pb = (both + only_a) / n, (both + only_b) / n
    la, ua = wilson(pa, n, confidence)
    lb, ub = wilson(pb, n, confidence)
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = (both * neither - only_a * only_b) / math.sqrt(margins) if margins else 0.0
    down = math.sqrt(max(0.0, (pb - lb) ** 2 - 2 * phi * (pb - lb) * (ua - pa) + (ua - pa) ** 2))
    up = math.sqrt(max(0.0, (ub - pb) ** 2 - 2 * phi * (ub - pb) * (pa - la) + (pa - la) ** 2))
    return max(-1.0, pb - pa - down), min(1.0, pb - pa + up)


def mover_paired(a: Sequence[float], b: Sequence[float], weights: Sequence[float] | None = None,
                 confidence: float = 0.95) -> tuple[float, float]:
    """The CI of mean(b) - mean(a) for paired per-task values in [0, 1] by MOVER (Zou and Donner, 2008): each
    mean's Wilson interval over tasks (Kish's effective n under weights), recovered into an interval of the
    difference with the Pearson correlation of the pairs. For equally weighted 0/1 values the correlation is
    phi and this is Newcombe's method 10 (`newcombe_paired`)."""
    a, b = list(a), list(b)
    w = list(weights) if weights is not None else [1.0] * len(a)
    total = sum(w)
    pa, pb = sum(x * y for x, y in zip(a, w, strict=True)) / total, sum(x * y for x, y in zip(b, w, strict=True)) / total
    n_eff = _effective_n(w)
    la, ua = wilson(pa, n_eff, confidence)
    lb, ub = wilson(pb, n_eff, confidence)
    va = sum(y * (x - pa) ** 2 for x, y in zip(a, w, strict=True))
    vb = sum(y * (x - pb) ** 2 for x, y in zip(b, w, strict=True))
    cov = sum(z * (x - pa) * (y - pb) for x, y, z in zip(a, b, w, strict=True))
    r = max(-1.0, min(1.0, cov / math.sqrt(va * vb))) if va > 0 and vb > 0 else 0.0
    down = math.sqrt(max(0.0, (pb - lb) ** 2 - 2 * r * (pb - lb) * (ua - pa) + (ua - pa) ** 2))
    up = math.sqrt(max(0.0, (ub - pb) ** 2 - 2 * r * (ub - pb) * (pa - la) + (pa - la) ** 2))
    return max(-1.0, pb - pa - down), min(1.0, pb - pa + up)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment (1979) of a family of p-values: the i-th smallest becomes the largest of
    (m - j + 1) p_(j) over j <= i, capped at 1. It controls the chance of any false 'moved' across the family
    at alpha under any dependence. None (no test) stays None and is not counted in the family."""
    ranked = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(ranked)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for j, (p, i) in enumerate(ranked):
        running = max(running, min(1.0, (m - j) * p))
        out[i] = running
    return out


def _hypergeometric(n_a: int, n_b: int, total: int) -> tuple[int, list[float]]:
    """The chances of x passes in A, given n_a and n_b samples and `total` passes in all (logs, so large
    sample counts stay finite): the first x and the probabilities from it."""
    lo, hi = max(0, total - n_b), min(total, n_a)
    lg = math.lgamma
    base = lg(n_a + 1) + lg(n_b + 1) + lg(total + 1) + lg(n_a + n_b - total + 1) - lg(n_a + n_b + 1)
    probs = [math.exp(base - lg(x + 1) - lg(n_a - x + 1) - lg(total - x + 1) - lg(n_b - total + x + 1))
             for x in range(lo, hi + 1)]
    return lo, probs


def fisher_exact(c_a: int, n_a: int, c_b: int, n_b: int) -> tuple[float, float]:
    """Two-sided Fisher exact test that one task's pass chance is the same in A (c_a of n_a samples
    passed) and B: the p-value, and the least p-value any outcome with the same margins could give (1 at
    one sample each: no single task's change is testable at k = 1; 2/70 at 4 samples each)."""
    lo, probs = _hypergeometric(n_a, n_b, c_a + c_b)
    tol = 1 + 1e-7  # tables as likely as the observed one, up to float error, count (as in R and scipy)

    def p_of(prob: float) -> float:
        return min(1.0, sum(q for q in probs if q <= prob * tol))

    least = min(probs[0], probs[-1])  # the hypergeometric is unimodal: its least likely table is an end
    return p_of(probs[c_a - lo]), p_of(least)
