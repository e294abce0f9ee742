"""The estimators against values known in closed form, on synthetic pass-rate data."""

from __future__ import annotations

import math
import random

import pytest

from clawsdk.bench.estimators import (
    bootstrap_mean,
    mean_ci,
    newcombe_paired,
    paired_test,
    pass_at_k,
    pass_hat_k,
    permutation_test,
    sign_test,
    weighted_mean,
)


def test_pass_at_k_matches_the_closed_form_of_chen_et_al():
    # 10 samples, 3 passed, k = 5: 1 - C(7,5)/C(10,5) = 1 - 21/252
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 5, 3) == 1.0
    assert pass_at_k(10, 8, 3) == 1.0  # fewer than k failures: some draw always passes
    for n in range(1, 13):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)


def test_pass_hat_k_is_the_chance_that_all_k_draws_pass():
    assert pass_hat_k(10, 3, 2) == pytest.approx(3 * 2 / (10 * 9))
    assert pass_hat_k(4, 1, 2) == 0.0
    assert pass_hat_k(4, 4, 4) == 1.0
    for n in range(1, 12):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_hat_k(n, c, k) == pytest.approx(math.comb(c, k) / math.comb(n, k), abs=1e-12)


@pytest.mark.parametrize("p,n,k", [(0.3, 10, 3), (0.05, 20, 10), (0.7, 8, 8)])
def test_both_estimators_are_unbiased(p, n, k):
    """Averaged over every outcome of n Bernoulli(p) samples they give 1-(1-p)^k and p^k exactly."""
    prob = [math.comb(n, c) * p**c * (1 - p) ** (n - c) for c in range(n + 1)]
    assert sum(w * pass_at_k(n, c, k) for c, w in enumerate(prob)) == pytest.approx(1 - (1 - p) ** k)
    assert sum(w * pass_hat_k(n, c, k) for c, w in enumerate(prob)) == pytest.approx(p**k)


def test_estimators_refuse_impossible_counts():
    with pytest.raises(ValueError, match=r"k=4 must lie in 1..n=3"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="passed samples"):
        pass_hat_k(3, 4, 1)


def test_bootstrap_interval_is_reproducible_and_about_as_wide_as_theory():
    rng = random.Random(7)
    values = [float(rng.random() < 0.4) for _ in range(400)]
    a = bootstrap_mean(values, seed=3)
    b = bootstrap_mean(values, seed=3)
    assert (a.low, a.high) == (b.low, b.high)
    assert a.low < a.value < a.high
    p = a.value
    theory = 2 * 1.96 * math.sqrt(p * (1 - p) / len(values))
    assert (a.high - a.low) == pytest.approx(theory, rel=0.15)
    const = bootstrap_mean([0.5] * 20)
    assert (const.low, const.value, const.high) == (0.5, 0.5, 0.5)
    assert bootstrap_mean([]).value is None


def test_weights_count():
    assert weighted_mean([1.0, 0.0], [3.0, 1.0]) == pytest.approx(0.75)
    est = bootstrap_mean([1.0, 0.0, 1.0, 0.0], [3.0, 1.0, 3.0, 1.0])
    assert est.value == pytest.approx(0.75)


def test_sign_and_permutation_tests_give_exact_values():
    # five wins out of five: two-sided 2 * (1/2)^5
    assert sign_test(5, 0) == pytest.approx(2 / 32)
    assert sign_test(0, 0) == 1.0
    assert sign_test(3, 3) == 1.0
    p, exact = permutation_test([1.0] * 5)
    assert exact and p == pytest.approx(2 / 32)
    p, exact = permutation_test([0.0] * 6)
    assert p == 1.0


def test_paired_test_finds_a_real_difference_and_not_a_fake_one():
    rng = random.Random(1)
    base = [rng.random() for _ in range(60)]
    better = [min(1.0, x + 0.15 + rng.uniform(-0.05, 0.05)) for x in base]
    res = paired_test(base, better)
    assert res.diff > 0.1 and res.low > 0
    assert res.p_permutation < 0.001 and res.p_sign < 0.001 and res.method == "sign-flip inversion + mover"
    assert not res.exact  # 60 pairs: Monte Carlo
    noise = [min(1.0, max(0.0, x + rng.choice([-0.1, 0.1]))) for x in base]
    res = paired_test(base, noise)
    assert res.p_permutation > 0.05
    assert res.low < 0 < res.high


def _coverage(draw, interval, truth, trials=2000, seed=11):
    rng = random.Random(seed)
    hits = 0
    for _ in range(trials):
        low, high = interval(draw(rng))
        hits += low <= truth <= high
    return hits / trials


@pytest.mark.parametrize("n, p", [(3, 0.9), (5, 0.9), (10, 0.9), (8, 0.5)])
def test_pass_fail_intervals_hold_the_truth_about_95_percent_of_the_time_with_few_tasks(n, p):
    """The percentile bootstrap said [100, 100] for 3 tasks that all passed, and held a 90% rate
    43% of the time with 5 tasks; Wilson's interval keeps its coverage at any n."""
    def draw(rng):
        return [float(rng.random() < p) for _ in range(n)]

    def interval(values):
        e = mean_ci(values)
        return e.low, e.high

    assert _coverage(draw, interval, p) >= 0.9
    e = mean_ci([1.0, 1.0, 1.0])
    assert e.method == "wilson" and e.high == 1.0 and e.low == pytest.approx(0.4385, abs=1e-4)
    weighted = mean_ci([1.0, 0.0, 1.0], [2.0, 1.0, 1.0])
    assert weighted.value == pytest.approx(0.75) and weighted.low < 0.75 < weighted.high
    assert mean_ci([0.5, 1.0, 0.25]).method == "wilson"  # fractional values in [0, 1]: Wilson too
    assert mean_ci([0.5, 2.0, 0.25]).method == "bootstrap"  # values outside [0, 1]
    one = mean_ci([0.5])
    assert one.value == 0.5 and one.low is None and one.high is None  # one task: no interval


@pytest.mark.parametrize("n, pa, pb", [(6, 0.1, 0.8), (12, 0.3, 0.6), (40, 0.5, 0.6)])
def test_paired_pass_fail_difference_interval_keeps_its_coverage(n, pa, pb):
    """Five wins out of five gave [+100, +100] (and a bootstrap p of 0); Newcombe's interval is honest, and
    the interval compare reports holds it (its hull with the inverted permutation test)."""
    def draw(rng):
        a, b = [], []
        for _ in range(n):
            u = rng.random()  # correlated pairs
            a.append(float(u < pa))
            b.append(float(u < pb) if rng.random() < 0.5 else float(rng.random() < pb))
        return a, b

    assert _coverage(draw, lambda ab: newcombe_paired(*ab), pb - pa) >= 0.9
    def reported(ab):
        t = paired_test(*ab, n_perm=500)
        return t.low, t.high

    assert _coverage(draw, reported, pb - pa, trials=300) >= 0.9
    res = paired_test([0.0] * 5, [1.0] * 5)
    # Newcombe said [+35, +100] beside p = 2/32: with 5 pairs no sign pattern can reject, nor can the interval
    assert res.diff == 1.0 and res.low <= 0 and res.high == 1.0
    assert res.p_permutation == pytest.approx(2 / 32) and not hasattr(res, "p_bootstrap")
    two_wins = paired_test([0.0] * 64, [0.0] * 62 + [1.0, 1.0])
    assert two_wins.low < 0 < two_wins.high  # 2 wins in 64 is no evidence, and the interval says so
