"""The estimators over canary scores and the guess rule, without jax-privacy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from audit.empirical.bounds import one_run_epsilon_bound
from audit.empirical.estimators import (
    clopper_pearson_epsilon,
    gdp_epsilon,
    gdp_mu_epsilon,
    one_run_fdp_epsilon,
)
from audit.empirical.guesses import _top_precision, design_guesses, quarter_guesses


def test_clopper_pearson_matches_scipys_intervals() -> None:
    a = np.array([3.0, 2.0, 2.5, 0.1, 4.0, 5.0])
    b = np.array([0.0, 1.0, 2.2, -1.0, 0.5])
    eps, rates = clopper_pearson_epsilon(a, b, threshold=2.0, delta=1e-3)
    tpr_lo = stats.binomtest(5, 6).proportion_ci(0.95, method="exact").low  # two-sided 95 %
    fpr_hi = stats.binomtest(1, 5).proportion_ci(0.95, method="exact").high
    assert (rates.tpr_lo, rates.fpr_hi) == pytest.approx((tpr_lo, fpr_hi), rel=1e-9)
    assert eps == max(0.0, math.log((tpr_lo - 1e-3) / fpr_hi)) == 0.0  # 6 and 5 prove nothing
    many = clopper_pearson_epsilon(
        np.full(400, 3.0), np.r_[np.full(399, 0.0), 3.0], threshold=2.0, delta=0
    )
    assert many[0] == pytest.approx(
        math.log(many[1].tpr_lo / stats.binomtest(1, 400).proportion_ci(0.95, method="exact").high)
    )


@pytest.mark.parametrize(("m", "r", "v"), [(1000, 150, 148), (10000, 170, 154), (1000, 500, 442)])
def test_fdp_bound_is_tighter_than_the_one_run_bound(m: int, r: int, v: int) -> None:
    """Mahloujifar et al.'s point: the f-DP analysis of the same guesses proves more."""
    steinke = one_run_epsilon_bound(m=m, r=r, v=v, delta=1e-5).epsilon
    assert one_run_fdp_epsilon(m=m, r=r, v=v, delta=1e-5) > steinke > 0


def test_fdp_bound_is_zero_for_chance_guesses() -> None:
    assert one_run_fdp_epsilon(m=1000, r=500, v=250, delta=1e-5) == 0.0


@pytest.mark.statistical
def test_gdp_estimate_stays_below_the_true_mu() -> None:
    """Gaussian shift mu = 1 (1.5 % of runs would exceed it at most: the bound's 5 % with
    Bonferroni over thresholds is conservative); fails if the Clopper-Pearson bounds were
    dropped (raw rates overshoot mu at extreme thresholds on about half the seeds)."""
    over = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        estimate = gdp_epsilon(rng.normal(1.0, 1, 1000), rng.normal(0, 1, 1000), delta=1e-5)
        over += estimate.mu > 1.0
    assert over <= 3  # Binomial(20, 0.05): P[> 3] = 1.6 %
    assert gdp_mu_epsilon(1.0, 1e-5) == pytest.approx(4.377178, abs=1e-5)


def test_top_precision_matches_a_simulation() -> None:
    rng = np.random.default_rng(0)
    m, mu, k = 20000, 1.0, 500
    scores = np.concatenate([rng.normal(mu, 1, m // 2), rng.normal(0, 1, m // 2)])
    top = np.argsort(-scores)[:k]
    share = float((top < m // 2).mean())
    sd = math.sqrt(share * (1 - share) / k)
    assert _top_precision(k, m, mu) == pytest.approx(share, abs=4 * sd)


def test_design_guesses_beat_the_quarter_rule_where_the_claim_is_large() -> None:
    m, claim = 1000, 10.5
    mu = 2.1  # about the GDP mu through (10.5, 1e-5)
    expected = {}
    for rule, (kp, km) in {
        "design": design_guesses(m=m, claim_epsilon=claim, delta=1e-5),
        "quarter": quarter_guesses(m),
    }.items():
        r = kp + km
        v = math.floor(r * _top_precision(float(kp), m, mu))
        expected[rule] = one_run_epsilon_bound(m=m, r=r, v=v, delta=1e-5).epsilon
    assert expected["design"] > expected["quarter"]
    with pytest.raises(ValueError, match="m must be"):
        design_guesses(m=1, claim_epsilon=1.0, delta=1e-5)
