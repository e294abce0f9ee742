"""Estimators for benchmark scores, in plain Python so `import clawsdk` stays light.

- pass@k: the unbiased estimator of Chen et al. (2021, "Evaluating Large Language Models
  Trained on Code"): the chance that at least one of k samples drawn without replacement
  from the n scored samples of a task passes, 1 - C(n-c, k) / C(n, k).
- pass^k: the chance that all k drawn samples pass, C(c, k) / C(n, k) (tau-bench's
  reliability measure).
- Confidence intervals are over tasks (the unit that varies between benchmarks). Where every
  task's value is 0 or 1 (one sample a task, pass or fail) the Wilson score interval, with
  Kish's effective number of tasks under weights; otherwise a percentile bootstrap with a
  fixed seed, so a report is reproducible. The percentile bootstrap of 0/1 values gives
  [100, 100] for 3 tasks that all passed and covers a 90% rate about half the time with
  5 tasks; Wilson keeps its coverage at any n.
- Paired tests for comparing two runs on the same tasks: the difference with Newcombe's
  interval for paired 0/1 values (his method 10, from the two Wilson intervals) or a paired
  bootstrap otherwise, an exact or Monte Carlo sign-flip permutation test, and the exact sign
  test.
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
    return sum(v * w for v, w in zip(values, weights)) / total


@dataclass
class Estimate:
    """A value with a confidence interval and the number of tasks behind it."""

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0
    method: str | None = None  # how the interval was made: wilson, bootstrap, newcombe

    def as_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n, "method": self.method}


def _z(confidence: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(p: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion `p` observed over `n` (possibly effective) trials."""
    z = _z(confidence)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (0.0 if p <= 0 else max(0.0, centre - half)), (1.0 if p >= 1 else min(1.0, centre + half))


def _binary(values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)


def _effective_n(weights: Sequence[float]) -> float:
    """Kish's effective sample size, (sum w)^2 / sum w^2: n when the weights are equal."""
    return sum(weights) ** 2 / sum(w * w for w in weights)


def mean_ci(values: Sequence[float], weights: Sequence[float] | None = None, *,
            n_boot: int = DEFAULT_BOOTSTRAP, confidence: float = 0.95, seed: int = DEFAULT_SEED) -> Estimate:
    """The (weighted) mean of per-task values in [0, 1] with a CI over tasks: Wilson where every value
    is 0 or 1, else the percentile bootstrap (`bootstrap_mean`)."""
    values = list(values)
    w = list(weights) if weights is not None else [1.0] * len(values)
    if not values or not _binary(values) or sum(w) <= 0:
        return bootstrap_mean(values, w, n_boot=n_boot, confidence=confidence, seed=seed)
    if len(w) != len(values):
        raise ValueError("values and weights differ in length")
    mean = weighted_mean(values, w)
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
    pairs = list(zip(values, weights))
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
    method: str | None = None  # how the interval was made: newcombe (paired 0/1 values) or bootstrap

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


def permutation_test(diffs: Sequence[float], weights: Sequence[float] | None = None, *,
                     n_perm: int = 10_000, seed: int = DEFAULT_SEED, exact_limit: int = 12) -> tuple[float, bool]:
    """Two-sided sign-flip test of 'the mean difference is zero'; exact up to `exact_limit` pairs.

    Under the null each pair's difference is as likely negative as positive, so flipping
    signs at random gives the null distribution of the (weighted) mean difference.
    """
    d = list(diffs)
    w = list(weights) if weights is not None else [1.0] * len(d)
    n = len(d)
    if n == 0:
        return 1.0, True
    total = sum(w)
    observed = abs(sum(x * y for x, y in zip(d, w)) / total)
    eps = 1e-12
    if n <= exact_limit:
        hits = count = 0
        for signs in itertools.product((1, -1), repeat=n):
            count += 1
            if abs(sum(s * x * y for s, x, y in zip(signs, d, w)) / total) >= observed - eps:
                hits += 1
        return hits / count, True
    rng = random.Random(seed)
    hits = 0
    for _ in range(n_perm):
        stat = abs(sum((x if rng.random() < 0.5 else -x) * y for x, y in zip(d, w)) / total)
        if stat >= observed - eps:
            hits += 1
    return (hits + 1) / (n_perm + 1), False


def paired_test(a: Sequence[float], b: Sequence[float], weights: Sequence[float] | None = None, *,
                n_boot: int = DEFAULT_BOOTSTRAP, confidence: float = 0.95, seed: int = DEFAULT_SEED,
                tie_tolerance: float = 1e-9) -> PairedTest:
    """Compare per-task values of two runs on the same tasks (B - A)."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError("paired samples differ in length")
    n = len(a)
    w = list(weights) if weights is not None else [1.0] * n
    if n == 0:
        return PairedTest(0, None, None, None, None, None, None, None, None)
    diffs = [y - x for x, y in zip(a, b)]
    if _binary(a) and _binary(b) and all(x == w[0] for x in w):
        est = Estimate(weighted_mean(diffs, w), *newcombe_paired(a, b, confidence), n, "newcombe")
    else:
        est = bootstrap_mean(diffs, w, n_boot=n_boot, confidence=confidence, seed=seed)
    p_perm, exact = permutation_test(diffs, w, seed=seed)
    wins = sum(1 for x in diffs if x > tie_tolerance)
    losses = sum(1 for x in diffs if x < -tie_tolerance)
    return PairedTest(
        n=n, mean_a=weighted_mean(a, w), mean_b=weighted_mean(b, w), diff=est.value, low=est.low,
        high=est.high, p_permutation=p_perm, p_sign=sign_test(wins, losses),
        wins=wins, losses=losses, ties=n - wins - losses, exact=exact, method=est.method,
    )


def newcombe_paired(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The CI of p_b - p_a for paired 0/1 outcomes: Newcombe (1998, "Improved confidence intervals
    for the difference between binomial proportions based on paired data", method 10)."""
    n = len(a)
    both = sum(1 for x, y in zip(a, b) if x and y)
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    neither = n - both - only_a - only_b
    pa, pb = (both + only_a) / n, (both + only_b) / n
    la, ua = wilson(pa, n, confidence)
    lb, ub = wilson(pb, n, confidence)
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = (both * neither - only_a * only_b) / math.sqrt(margins) if margins else 0.0
    down = math.sqrt(max(0.0, (pb - lb) ** 2 - 2 * phi * (pb - lb) * (ua - pa) + (ua - pa) ** 2))
    up = math.sqrt(max(0.0, (ub - pb) ** 2 - 2 * phi * (ub - pb) * (pa - la) + (pa - la) ** 2))
    return max(-1.0, pb - pa - down), min(1.0, pb - pa + up)
