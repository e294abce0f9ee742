"""The estimators against values known in closed form, on synthetic pass-rate data."""

from __future__ import annotations

import math
import random

import pytest

from clawsdk.bench.estimators import (
    bootstrap_mean,
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
    with pytest.raises(ValueError, match="k=4 must lie in 1..n=3"):
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
    assert res.p_permutation < 0.001 and res.p_sign < 0.001 and res.p_bootstrap < 0.01
    assert not res.exact  # 60 pairs: Monte Carlo
    noise = [min(1.0, max(0.0, x + rng.choice([-0.1, 0.1]))) for x in base]
    res = paired_test(base, noise)
    assert res.p_permutation > 0.05
    assert res.low < 0 < res.high
