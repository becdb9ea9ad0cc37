"""An attack's own scores read as a one-run audit (audit.empirical.attack_bound)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from audit.empirical.attack_bound import attack_epsilon_bound
from audit.empirical.bounds import one_run_epsilon_bound


@pytest.mark.statistical
def test_a_blind_attack_rarely_proves_anything():
    """Scores independent of membership (independent coins) are an eps = 0 mechanism: a valid
    95 % bound exceeds 0 in at most 5 % of runs. 100 seeded runs; failing above 12 has chance
    P[Binomial(100, 0.05) > 12] = 0.002 for a valid bound."""
    rng = np.random.default_rng(7)
    positive = 0
    for trial in range(100):
        is_member = rng.random(200) < 0.5
        bound = attack_epsilon_bound(
            rng.normal(size=200), is_member, delta=1e-5, seed=trial, independent=True
        )
        positive += bound.epsilon > 0
    assert stats.binom.sf(12, 100, 0.05) < 0.003
    assert positive <= 12


def test_a_perfect_attack_proves_a_large_epsilon_held_out():
    is_member = np.random.default_rng(0).random(1000) < 0.5
    scores = is_member.astype(float) + np.random.default_rng(1).normal(0, 0.01, 1000)
    bound = attack_epsilon_bound(scores, is_member, delta=1e-6, seed=0, independent=True)
    assert bound.v == bound.r > 0 and bound.epsilon == pytest.approx(bound.ceiling, abs=1e-3)
    assert bound.epsilon > 2.5 and bound.m == 500


def test_no_bound_without_independent_membership():
    is_member = np.repeat([True, False], 50)
    scores = is_member.astype(float)
    balanced = attack_epsilon_bound(scores, is_member, delta=1e-6, seed=0, independent=False)
    assert math.isnan(balanced.epsilon) and "independent fair coins" in balanced.note


def test_a_perfect_attack_proves_its_bound_whatever_2_m_delta():
    """m = 200 evaluated records at delta 1e-3 (2 m delta = 0.4): the former rule "2 m delta >=
    0.05 proves nothing" gave NaN; every guess right proves Steinke et al.'s bound for r = v =
    200, 3.566 (:func:`one_run_epsilon_bound`, itself equal to jax-privacy's in
    test_jax_privacy_crosscheck.py)."""
    is_member = np.random.default_rng(0).random(400) < 0.5
    bound = attack_epsilon_bound(
        is_member.astype(float), is_member, delta=1e-3, seed=0, independent=True
    )
    assert (bound.m, bound.r, bound.v) == (200, 200, 200)
    expected = one_run_epsilon_bound(m=200, r=200, v=200, delta=1e-3).epsilon
    assert expected == pytest.approx(3.566, abs=1e-3)
    assert bound.epsilon == pytest.approx(expected, abs=1e-3)  # the search's tolerance
    assert bound.epsilon == pytest.approx(bound.ceiling, abs=1e-3)


def test_at_two_delta_above_the_significance_nothing_is_provable_and_the_note_says_so():
    """The p-value is at least 2 delta for every outcome, so at delta = 0.03 (2 delta = 0.06 >=
    0.05) even a perfect attack proves 0, computed (not NaN); at 0.01 it proves more than 0."""
    is_member = np.random.default_rng(0).random(400) < 0.5
    scores = is_member.astype(float)
    big = attack_epsilon_bound(scores, is_member, delta=0.03, seed=0, independent=True)
    assert (big.epsilon, big.ceiling) == (0.0, 0.0) and "would prove nothing" in big.note
    assert attack_epsilon_bound(scores, is_member, delta=0.01, seed=0, independent=True).epsilon > 0


def test_the_bound_carries_the_p_value_of_the_claim():
    """The gate corrects over its checks with these p-values: the perfect attack's 3.565 at 95 %
    means p < 0.05 for a claim of 3 and p > 0.05 for 4; no claim (NaN or inf) gives NaN."""
    is_member = np.random.default_rng(0).random(400) < 0.5
    scores = is_member.astype(float)

    def p(claim: float) -> float:
        return attack_epsilon_bound(
            scores, is_member, delta=1e-3, seed=0, independent=True, claim_epsilon=claim
        ).p_value

    assert p(3.0) < 0.05 < p(4.0) <= 1
    assert math.isnan(p(math.nan)) and math.isnan(p(math.inf))
    columns = attack_epsilon_bound(
        scores, is_member, delta=1e-3, seed=0, independent=True, claim_epsilon=3.0
    ).columns()
    assert columns["epsilon_lower_attack_p"] == p(3.0)
