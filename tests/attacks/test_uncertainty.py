"""Chance quantiles, bootstrap intervals and TPR at a low FPR (attacks.uncertainty), each
against a naive reference (sklearn on explicit permutations / resamples, scipy's binomtest)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import average_precision_score, roc_auc_score

from attacks.uncertainty import (
    _weighted_ap_auc,
    bootstrap_intervals,
    clopper_pearson,
    mi_ap_null,
    tpr_at_fpr_interval,
)


@pytest.mark.statistical
@pytest.mark.parametrize(("members", "nonmembers"), [(10, 10), (50, 50), (30, 70)])
def test_null_quantiles_match_sklearn_on_random_scores(members, nonmembers):
    """Naive reference: sklearn's AP of 4000 blind attackers (independent seed). The tolerance
    is 4 standard errors of the reference's 95 % quantile (binomial on the order statistic,
    mapped through the null's density, estimated from the simulation's own spread)."""
    null = mi_ap_null(members, nonmembers)
    rng = np.random.default_rng(12345)
    is_member = np.r_[np.ones(members, bool), np.zeros(nonmembers, bool)]
    draws = 4000
    ref = np.array(
        [average_precision_score(is_member, rng.random(is_member.size)) for _ in range(draws)]
    )
    q95 = np.quantile(ref, 0.95)
    # standard error of the 95 % quantile: order statistics 95 +- 2 sd apart in rank
    k = math.sqrt(draws * 0.05 * 0.95)
    lo, hi = np.quantile(ref, [0.95 - 2 * k / draws, 0.95 + 2 * k / draws])
    assert abs(null.q95 - q95) <= max(hi - lo, 1e-3)
    assert abs(null.mean - ref.mean()) < 4 * ref.std() / math.sqrt(draws) + 1e-3


def test_null_quantile_at_50_plus_50_is_the_issues_coin_flip_edge():
    # the issue's figure for digits quick (50 + 50): a coin-flip band up to about 0.61-0.63
    null = mi_ap_null(50, 50)
    assert 0.59 < null.q95 < 0.63 and null.q05 < 0.5 < null.q95
    assert mi_ap_null(50, 50) is null  # cached per count pair


def test_null_refuses_bad_counts():
    with pytest.raises(ValueError, match="members must be an integer >= 1, got 0"):
        mi_ap_null(0, 5)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 40),
    seed=st.integers(0, 10_000),
    levels=st.integers(1, 6),
)
def test_weighted_metrics_equal_sklearn_on_explicit_resamples(n, seed, levels):
    """The vectorised bootstrap's AP and AUC (ties included) against sklearn on the resampled
    records themselves."""
    rng = np.random.default_rng(seed)
    is_member = np.r_[True, False, rng.random(n - 2) < 0.5]
    scores = rng.integers(0, levels, n).astype(float)  # many ties
    order = np.argsort(-scores, kind="stable")
    sorted_scores, member_sorted = scores[order], is_member[order]
    ends = np.r_[np.flatnonzero(np.diff(sorted_scores)), n - 1]
    members, others = np.flatnonzero(member_sorted), np.flatnonzero(~member_sorted)
    picks = np.r_[rng.choice(members, members.size), rng.choice(others, others.size)]
    weights = np.bincount(picks, minlength=n)[None, :].astype(float)
    ap, auc = _weighted_ap_auc(weights, member_sorted, ends)
    resampled_s, resampled_m = sorted_scores[picks], member_sorted[picks]
    assert ap[0] == pytest.approx(average_precision_score(resampled_m, resampled_s), abs=1e-12)
    assert auc[0] == pytest.approx(roc_auc_score(resampled_m, resampled_s), abs=1e-12)


def test_bootstrap_interval_holds_the_estimate_and_narrows_with_records():
    rng = np.random.default_rng(0)
    widths = []
    for n in (50, 800):
        is_member = np.repeat([True, False], n)
        scores = is_member + rng.normal(0, 1.5, 2 * n)
        b = bootstrap_intervals(scores, is_member, seed=1)
        ap = average_precision_score(is_member, scores)
        assert b.mi_ap_low < ap < b.mi_ap_high
        assert b.mi_auc_low < roc_auc_score(is_member, scores) < b.mi_auc_high
        widths.append(b.mi_ap_high - b.mi_ap_low)
    assert widths[1] < widths[0] / 2.5  # about 1/sqrt(16) = 1/4
    assert bootstrap_intervals(scores, is_member, seed=1) == b  # seeded


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (57, 200)])
def test_clopper_pearson_matches_scipy(k, n):
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    assert clopper_pearson(k, n) == pytest.approx((ci.low, ci.high), abs=1e-9)


def test_tpr_at_low_fpr_is_empty_below_one_over_fpr_non_members():
    rng = np.random.default_rng(0)
    is_member = np.repeat([True, False], 50)
    scores = is_member + rng.normal(0, 1, 100)
    t = tpr_at_fpr_interval(scores, is_member, fpr=0.01)
    assert math.isnan(t.tpr) and "50 non-members < 100" in t.reason
    is_member = np.repeat([True, False], 100)
    scores = is_member + rng.normal(0, 1, 200)
    t = tpr_at_fpr_interval(scores, is_member, fpr=0.01)
    assert not t.reason and t.low <= t.tpr <= t.high
    assert (t.low, t.high) == pytest.approx(clopper_pearson(round(t.tpr * 100), 100))
