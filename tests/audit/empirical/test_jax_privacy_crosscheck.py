"""Every estimator against Google's jax-privacy (``auditing.CanaryScoreAuditor``, the optional
extra ``jaxaudit``) on the same score arrays: the same numbers to 1e-6.

Where they differ, and why: jax-privacy 2.0.0's ``epsilon_from_gdp`` (the newest release on PyPI)
takes the largest |mu| over thresholds, so a threshold whose bounds point the wrong way (mu < 0:
no evidence) can set it; its source since google-deepmind/jax_privacy aab3e1c (2026-07-27, on
the way to 2.3.0: "Negative values are no evidence, so clamp to 0") takes the largest mu, clamped
at 0, as :func:`gdp_epsilon` does. The GDP comparison therefore uses scores where the largest mu
is also the largest |mu|, and a second case, on scores where they part, checks whichever rule
the installed version follows (:func:`_takes_abs_mu` asks it).
"""

from __future__ import annotations

import numpy as np
import pytest

from audit.empirical.bounds import one_run_epsilon_bound
from audit.empirical.estimators import (
    best_threshold,
    clopper_pearson_epsilon,
    gdp_epsilon,
    one_run_fdp_epsilon,
    roc_frontier,
)
from audit.privacy.gaussian import analytic_gaussian_sigma

auditing = pytest.importorskip("jax_privacy.auditing", reason="jax-privacy not installed")
dp_accounting = pytest.importorskip("dp_accounting", reason="dp_accounting not installed")

ALPHA = 0.05
#: (m, r, v, delta): guesses of the lfw-subset audits in docs/audits.md and edge cases.
GUESSES = [
    (1000, 500, 442, 1e-5),
    (1000, 150, 148, 1e-5),
    (10000, 170, 154, 1e-5),
    (10000, 1084, 1073, 1e-5),
    (200, 50, 40, 1e-3),
    (100, 10, 5, 1e-5),
]


def _scores(mu: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(mu, 1, n), rng.normal(0, 1, n)


@pytest.mark.parametrize(("m", "r", "v", "delta"), GUESSES)
def test_one_run_bounds_match(m: int, r: int, v: int, delta: float) -> None:
    ours = one_run_epsilon_bound(m=m, r=r, v=v, delta=delta, tol=1e-8).epsilon
    assert ours == pytest.approx(auditing._epsilon_one_run(0, m, r, v, ALPHA, delta), abs=1e-6)
    fdp = one_run_fdp_epsilon(m=m, r=r, v=v, delta=delta)
    assert fdp == pytest.approx(auditing._epsilon_one_run_fdp(0, m, r, v, ALPHA, delta), abs=1e-6)


@pytest.mark.parametrize("mu", [0.5, 2.0])
def test_public_one_run_api_with_an_explicit_threshold(mu: float) -> None:
    """jax-privacy's one-run methods are one-sided: guesses "in" for scores >= threshold."""
    a, b = _scores(mu, 300, 1)
    auditor = auditing.CanaryScoreAuditor(a, b)
    t = float(np.quantile(np.concatenate([a, b]), 0.8))
    m, r, v = len(a) + len(b), int((a >= t).sum() + (b >= t).sum()), int((a >= t).sum())
    explicit = auditing.Explicit(t)
    steinke = auditor.epsilon_one_run(ALPHA, 1e-5, threshold_strategy=explicit)
    fdp = auditor.epsilon_one_run_fdp(ALPHA, 1e-5, threshold_strategy=explicit)
    assert one_run_epsilon_bound(m=m, r=r, v=v, delta=1e-5, tol=1e-8).epsilon == pytest.approx(
        steinke, abs=1e-6
    )
    assert one_run_fdp_epsilon(m=m, r=r, v=v, delta=1e-5) == pytest.approx(fdp, abs=1e-6)
    assert fdp > 0


@pytest.mark.parametrize("mu", [0.5, 1.5, 3.0])
def test_clopper_pearson_at_a_threshold_from_other_scores(mu: float) -> None:
    a, b = _scores(mu, 2000, 2)
    t = best_threshold(a[:1000], b[:1000], delta=1e-5)
    ours, _ = clopper_pearson_epsilon(a[1000:], b[1000:], threshold=t, delta=1e-5)
    theirs = auditing.CanaryScoreAuditor(a[1000:], b[1000:]).epsilon_clopper_pearson(
        ALPHA, 1e-5, threshold_strategy=auditing.Explicit(t)
    )
    assert ours == pytest.approx(theirs, abs=1e-6)


def test_roc_frontier_is_jax_privacys() -> None:
    a, b = _scores(1.0, 500, 3)
    thresholds, fn, tn = roc_frontier(a, b)
    t_ref, tn_ref, fn_ref = auditing._get_tn_fn_counts(a, b)
    np.testing.assert_array_equal(thresholds, t_ref)
    np.testing.assert_array_equal(fn, fn_ref)
    np.testing.assert_array_equal(tn, tn_ref)


@pytest.mark.parametrize("mu", [1.5, 3.0])
def test_gdp_estimate_matches(mu: float) -> None:
    a, b = _scores(mu, 2000, 0)
    ours = gdp_epsilon(a, b, delta=1e-5)
    theirs = auditing.CanaryScoreAuditor(a, b).epsilon_from_gdp(ALPHA, 1e-5)
    assert ours.epsilon == pytest.approx(theirs, abs=1e-6)


def _takes_abs_mu() -> bool:
    """Whether the installed jax-privacy's ``epsilon_from_gdp`` takes the largest |mu| (2.0.0)
    rather than the largest mu clamped at 0 (its source since aab3e1c). Asked of it, not read
    from its version number (a 2.3.0.dev0 build may predate the change): in- and out-canary
    scores of one distribution (n = 2000) are no evidence under the clamp, while 2.0.0 reads
    epsilon 2.6 off a threshold at the scores' edge, where mu < 0."""
    a, b = _scores(0.0, 2000, 0)
    assert gdp_epsilon(a, b, delta=1e-5).epsilon == 0.0  # ours: no evidence
    return auditing.CanaryScoreAuditor(a, b).epsilon_from_gdp(ALPHA, 1e-5) > 0


def test_gdp_differs_only_by_the_sign_of_mu() -> None:
    """mu = 0.5, n = 2000: a threshold with mu < 0 has the largest |mu|. jax-privacy 2.0.0 takes
    it, above our estimate and the reversed rule's; the clamping source takes ours."""
    a, b = _scores(0.5, 2000, 0)
    ours = gdp_epsilon(a, b, delta=1e-5)
    theirs = auditing.CanaryScoreAuditor(a, b).epsilon_from_gdp(ALPHA, 1e-5)
    if _takes_abs_mu():
        flipped = gdp_epsilon(-a, -b, delta=1e-5)  # the reversed rule: in = low scores
        assert ours.epsilon < theirs
        assert max(ours.epsilon, flipped.epsilon) <= theirs + 1e-6
    else:
        assert ours.epsilon > 0
        assert ours.epsilon == pytest.approx(theirs, abs=1e-6)


@pytest.mark.parametrize(("eps", "delta"), [(0.5, 1e-5), (4.0, 1e-5), (10.0, 1e-3)])
def test_gaussian_sigma_is_dp_accountings(eps: float, delta: float) -> None:
    ours = analytic_gaussian_sigma(epsilon=eps, delta=delta)
    assert ours == pytest.approx(dp_accounting.get_sigma_gaussian(eps, delta), rel=1e-10)
