"""An attack's own scores read as a one-run audit (audit.empirical.attack_bound)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from audit.empirical.attack_bound import attack_epsilon_bound


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


def test_no_bound_without_independent_membership_or_with_a_large_delta():
    is_member = np.repeat([True, False], 50)
    scores = is_member.astype(float)
    balanced = attack_epsilon_bound(scores, is_member, delta=1e-6, seed=0, independent=False)
    assert math.isnan(balanced.epsilon) and "independent fair coins" in balanced.note
    big = attack_epsilon_bound(scores, is_member, delta=0.01, seed=0, independent=True)
    assert math.isnan(big.epsilon) and "2 m delta = 1 >= 0.05" in big.note
