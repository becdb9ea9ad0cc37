"""The pure statistics: Clopper-Pearson, the threshold-test bound, Steinke et al.'s bound."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from audit.empirical.bounds import (
    clopper_pearson_upper,
    epsilon_from_rates,
    one_run_epsilon_bound,
    one_run_p_value,
    threshold_ceiling,
    threshold_test_bound,
)


@pytest.mark.parametrize(("k", "n"), [(0, 1), (0, 50), (3, 50), (49, 50), (500, 10_000)])
def test_clopper_pearson_matches_binomtest(k: int, n: int) -> None:
    # scipy's exact (Clopper-Pearson) one-sided interval is the reference
    ref = stats.binomtest(k, n, alternative="less").proportion_ci(0.975).high
    assert clopper_pearson_upper(k, n, confidence=0.975) == pytest.approx(ref, rel=1e-9)


def test_clopper_pearson_all_successes_is_one() -> None:
    assert clopper_pearson_upper(7, 7, confidence=0.95) == 1.0


def test_clopper_pearson_zero_successes_closed_form() -> None:
    # k = 0: the bound solves (1 - p)^n = 1 - confidence
    n = 1000
    assert clopper_pearson_upper(0, n, confidence=0.975) == pytest.approx(1 - 0.025 ** (1 / n))


def test_epsilon_from_rates_exact_laplace_pair() -> None:
    # a test with FPR = e^-1 / 2 and FNR = 1/2 is exactly the eps = 1 Laplace trade-off
    assert epsilon_from_rates(fpr=0.5 * math.exp(-1), fnr=0.5, delta=0.0) == pytest.approx(1.0)
    assert epsilon_from_rates(fpr=0.5, fnr=0.5 * math.exp(-1), delta=0.0) == pytest.approx(1.0)
    assert epsilon_from_rates(fpr=0.6, fnr=0.6, delta=0.0) == 0.0
    assert epsilon_from_rates(fpr=0.0, fnr=0.2, delta=0.0) == math.inf


def test_threshold_bound_uses_bonferroni_split() -> None:
    b = threshold_test_bound(
        false_positives=10, negatives=1000, false_negatives=20, positives=1000, delta=1e-3
    )
    fpr = stats.beta.ppf(0.975, 11, 990)
    fnr = stats.beta.ppf(0.975, 21, 980)
    expected = max(math.log((1 - 1e-3 - fnr) / fpr), math.log((1 - 1e-3 - fpr) / fnr))
    assert b.epsilon == pytest.approx(expected)
    assert (b.fpr_hi, b.fnr_hi) == pytest.approx((fpr, fnr))


def test_threshold_ceiling_grows_like_log_n() -> None:
    c = [threshold_ceiling(draws_per_input=n) for n in (10**3, 10**4, 10**5)]
    assert c[0] < c[1] < c[2]
    # no errors: FPR_hi = 1 - 0.025^(1/n) ~ 3.69 / n
    assert c[2] == pytest.approx(math.log((1 - (1 - 0.025**1e-5)) / (1 - 0.025**1e-5)))


def _naive_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """Steinke et al. 2023 Algorithm 2, written as literally as possible with math.comb."""
    q = math.exp(eps) / (1 + math.exp(eps))

    def pmf(j: int) -> float:
        return math.comb(r, j) * q**j * (1 - q) ** (r - j)

    tail = sum(pmf(j) for j in range(v, r + 1))
    alpha, running = 0.0, 0.0
    for i in range(1, v + 1):
        running += pmf(v - i)
        alpha = max(alpha, running / i)
    return min(tail + 2 * m * delta * alpha, 1.0)


@pytest.mark.parametrize(
    ("m", "r", "v", "eps", "delta"),
    [
        (100, 20, 15, 0.5, 0.0),
        (100, 20, 15, 0.5, 1e-3),
        (1000, 60, 58, 2.0, 1e-5),
        (50, 10, 0, 1, 0.1),
    ],
)
def test_p_value_matches_brute_force(m, r, v, eps, delta) -> None:
    assert one_run_p_value(m=m, r=r, v=v, epsilon=eps, delta=delta) == pytest.approx(
        _naive_p_value(m, r, v, eps, delta), rel=1e-9, abs=1e-15
    )


@pytest.mark.parametrize("r", [10, 100, 1000])
def test_all_right_delta_zero_closed_form(r: int) -> None:
    # delta = 0, v = r: P[W >= r] = q^r = 0.05, so q = 0.05^(1/r) and eps = logit(q)
    q = 0.05 ** (1 / r)
    bound = one_run_epsilon_bound(m=r, r=r, v=r, delta=0.0)
    assert bound.epsilon == pytest.approx(math.log(q / (1 - q)), abs=1e-5)
    assert bound.ceiling == pytest.approx(bound.epsilon, abs=1e-9)


def test_ceiling_grows_with_m() -> None:
    ceilings = [one_run_epsilon_bound(m=m, r=m, v=m, delta=1e-5).ceiling for m in (10, 100, 1000)]
    assert ceilings[0] < ceilings[1] < ceilings[2]


def test_delta_term_lowers_the_bound() -> None:
    without = one_run_epsilon_bound(m=1000, r=100, v=95, delta=0.0).epsilon
    with_delta = one_run_epsilon_bound(m=1000, r=100, v=95, delta=1e-4).epsilon
    assert 0 < with_delta < without


def test_bound_monotone_in_v() -> None:
    bounds = [
        one_run_epsilon_bound(m=200, r=100, v=v, delta=1e-5).epsilon for v in range(40, 101, 5)
    ]
    assert bounds[0] == 0.0  # 40 of 100 right is no evidence
    assert all(a <= b for a, b in zip(bounds, bounds[1:], strict=False))
    assert bounds[-1] > bounds[-2]


def test_bound_is_where_p_value_crosses() -> None:
    b = one_run_epsilon_bound(m=500, r=200, v=170, delta=1e-5)
    p_at = one_run_p_value(m=500, r=200, v=170, epsilon=b.epsilon, delta=1e-5)
    p_above = one_run_p_value(m=500, r=200, v=170, epsilon=b.epsilon + 1e-4, delta=1e-5)
    assert p_at < 0.05 <= p_above


@pytest.mark.parametrize(
    "kwargs",
    [
        {"m": 10, "r": 11, "v": 3},
        {"m": 10, "r": 5, "v": 6},
        {"m": 0, "r": 0, "v": 0},
        {"m": 10, "r": 5, "v": -1},
    ],
)
def test_bad_counts_raise(kwargs) -> None:
    with pytest.raises(ValueError, match="must|need"):
        one_run_epsilon_bound(**kwargs, delta=0.0)


def test_bad_delta_and_confidence_raise() -> None:
    with pytest.raises(ValueError, match="delta"):
        one_run_epsilon_bound(m=10, r=5, v=5, delta=1.0)
    with pytest.raises(ValueError, match="confidence"):
        threshold_test_bound(
            false_positives=0, negatives=5, false_negatives=0, positives=5, confidence=1.0
        )
    assert np.isfinite(one_run_epsilon_bound(m=10, r=5, v=5, delta=0.0).epsilon)


@pytest.mark.parametrize(
    ("m", "r", "v", "delta"), [(1000, 500, 450, 1e-4), (200, 100, 97, 1e-5), (100, 50, 50, 1e-3)]
)
def test_p_value_increases_with_eps(m, r, v, delta) -> None:
    # the binary search relies on it (and keeps a rejected eps either way)
    ps = [one_run_p_value(m=m, r=r, v=v, epsilon=e, delta=delta) for e in np.linspace(0, 10, 101)]
    assert all(a <= b + 1e-15 for a, b in zip(ps, ps[1:], strict=False))


def test_a_large_two_m_delta_still_proves_what_the_p_value_allows() -> None:
    """No rule on 2 m delta: the computation decides. 2 m delta = 0.4 and 200 of 200 right prove
    3.566 (jax-privacy's ``_epsilon_one_run`` gives the same, test_jax_privacy_crosscheck.py);
    at 2 m delta = 2 (m = 50, delta 1/50, lfw-subset quick) the p-value at eps = 0 of 20 of 20
    right is above 0.05 and the bound is 0, as computed."""
    assert one_run_epsilon_bound(m=200, r=200, v=200, delta=1e-3).epsilon == pytest.approx(
        3.566, abs=1e-3
    )
    assert one_run_epsilon_bound(m=1000, r=1000, v=1000, delta=1 / 926).epsilon > 3
    assert one_run_p_value(m=50, r=20, v=20, epsilon=0.0, delta=0.02) > 0.05
    assert one_run_epsilon_bound(m=50, r=20, v=20, delta=0.02).ceiling == 0.0


@pytest.mark.parametrize("delta", [0.0, 1e-5, 0.01, 0.025, 0.3])
def test_the_p_value_is_at_least_two_delta_for_every_outcome(delta) -> None:
    """The one limit that holds for every outcome (one_run_epsilon_bound's notes): p >= min(2
    delta, 1), exactly for v = r = m at eps = 0 as m grows; so at 2 delta >= 0.05 the ceiling is
    0. Every (r, v) of m = 40 and of m = 400 (a coarser grid) at eps 0 and 3."""
    for m, step in ((40, 1), (400, 37)):
        for r in range(0, m + 1, step):
            for v in range(0, r + 1, max(1, step // 2)):
                for eps in (0.0, 3.0):
                    p = one_run_p_value(m=m, r=r, v=v, epsilon=eps, delta=delta)
                    assert p >= min(2 * delta, 1.0) - 1e-12, (m, r, v, eps)
    if 2 * delta >= 0.05:
        assert one_run_epsilon_bound(m=400, r=400, v=400, delta=delta).ceiling == 0.0


@pytest.mark.parametrize("confidence", [0.95, 0.999])
@pytest.mark.parametrize(
    ("m", "r", "v", "delta"),
    [(1000, 170, 157, 1e-5), (100, 100, 100, 0.02), (200, 60, 50, 1e-5)],
)
def test_a_p_value_is_below_a_level_exactly_where_its_bound_is_above_the_claim(
    m, r, v, delta, confidence
) -> None:
    """What the gate's correction relies on (audit.check.checking.bound_violations): for
    Steinke et al.'s bound, the f-DP bound and the threshold test, p(claim) < 1 - confidence
    if and only if the bound at that confidence exceeds the claim (claims within the searches'
    tolerance of the bound excepted)."""
    from audit.empirical.bounds import threshold_test_bound, threshold_test_p_value
    from audit.empirical.estimators import one_run_fdp_epsilon, one_run_fdp_p_value

    alpha = 1 - confidence
    steinke = one_run_epsilon_bound(m=m, r=r, v=v, delta=delta, confidence=confidence).epsilon
    fdp = one_run_fdp_epsilon(m=m, r=r, v=v, delta=delta, confidence=confidence)
    counts = dict(false_positives=r - v, negatives=m, false_negatives=m - v, positives=m)
    test = threshold_test_bound(**counts, delta=delta, confidence=confidence)
    checked = 0
    for claim in np.linspace(0.1, 8, 20):
        for bound, p in (
            (steinke, one_run_p_value(m=m, r=r, v=v, epsilon=claim, delta=delta)),
            (fdp, one_run_fdp_p_value(m=m, r=r, v=v, epsilon=claim, delta=delta)),
            (test.epsilon, threshold_test_p_value(test, claim)),
        ):
            if abs(bound - claim) > 2e-3:
                assert (p < alpha) == (bound > claim), (bound, claim, p)
                checked += 1
    assert checked > 50


def test_the_smallest_rejecting_level_is_rounded_up_and_floored() -> None:
    from audit.empirical.bounds import P_VALUE_FLOOR, smallest_rejecting_level

    p = smallest_rejecting_level(lambda alpha: alpha > 0.0123)
    assert 0.0123 < p <= 0.0123 * 1.0011  # above the truth by at most rtol
    assert smallest_rejecting_level(lambda alpha: True) == P_VALUE_FLOOR
    assert smallest_rejecting_level(lambda alpha: False) == 1.0
