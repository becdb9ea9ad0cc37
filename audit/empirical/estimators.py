"""Estimators of epsilon over canary scores beyond Steinke et al.'s one-run bound (torch-free).

- :func:`one_run_fdp_epsilon`: the one-run f-DP bound of Mahloujifar, Melis and Chaudhuri
  (2024, "Auditing f-Differential Privacy in One Run", the capped reconstruction-game analysis,
  ``audit_rh_with_cap``) over the same guesses as Steinke et al.'s bound
  (:func:`audit.empirical.bounds.one_run_epsilon_bound`);
- :func:`clopper_pearson_epsilon`: several runs, one threshold fixed in advance (Jagielski,
  Ullman and Oprea 2020): Clopper-Pearson bounds on TPR and FPR,
  ``log((TPR_lo - delta) / FPR_hi)``;
- :func:`gdp_epsilon`: the GDP estimate of Nasr et al. 2023 ("Tight Auditing of Differentially
  Private Machine Learning"): Clopper-Pearson bounds at every threshold of the ROC frontier
  (Bonferroni over them), the largest ``mu = Phi^-1(1 - FPR_hi) - Phi^-1(FNR_hi)``, and the
  (eps, delta) of mu-GDP.

Each follows Google's jax-privacy ``auditing.CanaryScoreAuditor`` step for step (its private
``_epsilon_one_run_fdp``, ``_epsilon_clopper_pearson_all_thresholds`` with an explicit threshold
and ``epsilon_from_gdp``); ``tests/audit/empirical/test_jax_privacy_crosscheck.py`` compares the
numbers where jax-privacy is installed.

Notes:
    Scores: larger means "in". What each bound assumes:
    the one-run bound of Steinke et al. assumes only independent inclusion of the canaries;
    the f-DP bound and the GDP estimate reject "the mechanism is mu-GDP" for the mu whose
    Gaussian trade-off curve passes through (eps, delta): a lower bound on eps under the
    assumption that the mechanism's trade-off curve is Gaussian-shaped (DP-SGD's is close to one
    by the central limit theorem of Dong, Roth and Su, but not exactly); Clopper-Pearson and
    the GDP estimate treat the canary scores as independent trials (exact across training runs;
    for several canaries of one run, an approximation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np
from scipy import optimize, stats

from audit.empirical.bounds import CONFIDENCE, clopper_pearson_upper, smallest_rejecting_level
from audit.privacy.gaussian import analytic_gaussian_sigma, gaussian_epsilon_analytic

#: Root-finding tolerance on epsilon (jax-privacy's ``xtol``).
EPS_TOL = 1e-6
#: The GDP estimate's search range for epsilon (jax-privacy's: it returns 100 above).
GDP_MAX_EPSILON = 100.0


class Estimator(str, Enum):
    """Which estimator produced a bound (the ``epsilon_lower_estimator`` column)."""

    ONE_RUN = "one-run"  # Steinke, Nasr and Jagielski 2023
    ONE_RUN_FDP = "one-run-fdp"  # Mahloujifar, Melis and Chaudhuri 2024
    LOCAL_WORST_CASE = "local-worst-case"  # threshold test on worst-case inputs
    CLOPPER_PEARSON = "clopper-pearson"  # several runs, one threshold fixed in advance
    GDP = "gdp"  # Nasr et al. 2023


def _significance(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    return 1.0 - confidence


def _gaussian_tradeoff_inverse(epsilon: float, delta: float):
    """x -> Phi(Phi^-1(x) - mu) for the mu-GDP curve through (epsilon, delta), mu = 1/sigma."""
    sigma = analytic_gaussian_sigma(epsilon=epsilon, delta=delta)
    if sigma == 0:
        return lambda x: float(x == 1.0)
    return lambda x: float(stats.norm.cdf(stats.norm.ppf(x) - 1.0 / sigma))


def _fdp_gap(epsilon: float, *, m: int, r: int, v: int, alpha: float, delta: float) -> float:
    """Positive where v right of r guesses (m canaries) rejects the Gaussian curve through
    (epsilon, delta) at level alpha (Mahloujifar et al., Algorithm ``audit_rh_with_cap``)."""
    inverse = _gaussian_tradeoff_inverse(epsilon, delta)
    right, wrong = alpha * v / m, alpha * (r - v) / m
    for i in range(v - 1, -1, -1):
        wrong_new = max(wrong, inverse(right))
        if wrong_new == wrong:
            break
        right = min(right + (i / (r - i)) * (wrong_new - wrong), 1.0)
        wrong = wrong_new
    return right + wrong - r / m


def one_run_fdp_epsilon(
    *, m: int, r: int, v: int, delta: float, confidence: float = CONFIDENCE
) -> float:
    """The largest eps (to :data:`EPS_TOL`) whose Gaussian trade-off curve through (eps, delta)
    is rejected by v right of r guesses about m canaries (each included with probability 1/2);
    0 where eps = 0 is not rejected."""
    if not (0 <= v <= r <= m and m >= 1):
        raise ValueError(f"need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    alpha = _significance(confidence)

    def gap(eps: float) -> float:
        return _fdp_gap(eps, m=m, r=r, v=v, alpha=alpha, delta=delta)

    if r == 0 or gap(0.0) <= 0:
        return 0.0
    low, high = 0.0, 1.0
    while gap(high) > 0:
        low, high = high, 2 * high
    return float(optimize.brentq(gap, low, high, xtol=EPS_TOL))


def one_run_fdp_p_value(*, m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """The p-value of the Gaussian trade-off curve through ``(epsilon, delta)`` given v right of
    r guesses about m canaries: the smallest significance at which it is rejected
    (:func:`one_run_fdp_epsilon` at ``confidence = 1 - p`` reaches ``epsilon``); 1 where none
    rejects it."""
    if not (0 <= v <= r <= m and m >= 1):
        raise ValueError(f"need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    if r == 0:
        return 1.0
    return smallest_rejecting_level(
        lambda alpha: _fdp_gap(epsilon, m=m, r=r, v=v, alpha=alpha, delta=delta) > 0
    )


@dataclass(frozen=True)
class Rates:
    """Counts at one threshold (score >= threshold guesses "in") and their 95 % bounds."""

    threshold: float
    true_positives: int
    positives: int
    false_positives: int
    negatives: int
    tpr_lo: float
    fpr_hi: float


def _check_scores(in_scores, out_scores) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(in_scores, dtype=np.float64), np.asarray(out_scores, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 1 or not len(a) or not len(b):
        raise ValueError(
            f"need non-empty 1-d in and out scores, got shapes {a.shape} and {b.shape}"
        )
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("canary scores must be finite")
    return a, b


def clopper_pearson_epsilon(
    in_scores, out_scores, *, threshold: float, delta: float, confidence: float = CONFIDENCE
) -> tuple[float, Rates]:
    """``max(0, log((TPR_lo - delta) / FPR_hi))`` at ``threshold`` (fixed before these scores
    were seen), each rate bounded one-sided by Clopper-Pearson at ``1 - (1 - confidence)/2``
    (Bonferroni: both hold jointly with ``confidence``); 0 where TPR_lo <= delta."""
    a, b = _check_scores(in_scores, out_scores)
    alpha = _significance(confidence)
    tp, fp = int((a >= threshold).sum()), int((b >= threshold).sum())
    each = 1.0 - alpha / 2
    tpr_lo = 1.0 - clopper_pearson_upper(len(a) - tp, len(a), confidence=each)
    fpr_hi = clopper_pearson_upper(fp, len(b), confidence=each)
    rates = Rates(float(threshold), tp, len(a), fp, len(b), tpr_lo, fpr_hi)
    if tpr_lo <= delta:
        return 0.0, rates
    return max(0.0, math.log(tpr_lo - delta) - math.log(fpr_hi)), rates


def best_threshold(in_scores, out_scores, *, delta: float, confidence: float = CONFIDENCE) -> float:
    """The threshold of largest :func:`clopper_pearson_epsilon` on these scores (the threshold
    strategy's calibration half; the bound must then be taken on other scores)."""
    a, b = _check_scores(in_scores, out_scores)
    candidates = np.concatenate([np.union1d(a, b), [np.inf]])
    values = [
        clopper_pearson_epsilon(a, b, threshold=t, delta=delta, confidence=confidence)[0]
        for t in candidates
    ]
    return float(candidates[int(np.argmax(values))])


def roc_frontier(in_scores, out_scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(thresholds, false negatives, true negatives) at the thresholds of the ROC curve's upper
    concave frontier: every distinct score and +inf, less the points that lie on or below the
    chord of their neighbours (jax-privacy's ``_pareto_frontier``, the same points)."""
    a, b = _check_scores(in_scores, out_scores)
    thresholds = np.concatenate([np.union1d(a, b), [np.inf]])
    fn = np.searchsorted(np.sort(a), thresholds, side="left")
    tn = np.searchsorted(np.sort(b), thresholds, side="left")
    points = np.stack([fn, tn], axis=1).astype(np.float64)
    keep = np.arange(len(thresholds))
    while len(keep) > 2:
        step = np.diff(points[keep], axis=0)
        cross = step[:-1, 1] * step[1:, 0] - step[1:, 1] * step[:-1, 0]
        dominated = cross <= 0
        if not dominated.any():
            break
        keep = keep[np.r_[True, ~dominated, True]]
    return thresholds[keep], fn[keep], tn[keep]


@dataclass(frozen=True)
class GdpEstimate:
    """The GDP estimate: ``mu`` (the largest lower bound over the frontier's thresholds) and the
    epsilon of mu-GDP at ``delta``; ``thresholds``: how many were tested (Bonferroni)."""

    epsilon: float
    mu: float
    thresholds: int


def gdp_epsilon(
    in_scores, out_scores, *, delta: float, confidence: float = CONFIDENCE
) -> GdpEstimate:
    """Nasr et al. 2023's estimate: at each of the n frontier thresholds (:func:`roc_frontier`)
    Clopper-Pearson bounds FPR_hi and FNR_hi at ``(1 - confidence) / (2 n)`` each, rows whose
    larger bound reaches ``1 - delta`` dropped; ``mu = max(Phi^-1(1 - FPR_hi) - Phi^-1(FNR_hi))``
    (Dong, Roth and Su, Eq. 6), 0 if not positive; epsilon of mu-GDP at delta (their Corollary
    2.13), capped at :data:`GDP_MAX_EPSILON`."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    alpha = _significance(confidence)
    a, b = _check_scores(in_scores, out_scores)
    _, fn, tn = roc_frontier(a, b)
    n = len(fn)
    each = 1.0 - alpha / (2 * n)
    fnr_hi = np.array([clopper_pearson_upper(int(k), len(a), confidence=each) for k in fn])
    fpr_hi = np.array([clopper_pearson_upper(len(b) - int(k), len(b), confidence=each) for k in tn])
    usable = np.maximum(fnr_hi, fpr_hi) < 1 - delta
    if not usable.any():
        return GdpEstimate(0.0, 0.0, n)
    mu = float(np.max(stats.norm.isf(fpr_hi[usable]) - stats.norm.ppf(fnr_hi[usable])))
    if mu <= 0:
        return GdpEstimate(0.0, 0.0, n)
    return GdpEstimate(gdp_mu_epsilon(mu, delta), mu, n)


def gdp_mu_epsilon(mu: float, delta: float) -> float:
    """The epsilon of mu-GDP at ``delta`` (a Gaussian mechanism of sensitivity mu and noise 1),
    capped at :data:`GDP_MAX_EPSILON`."""
    if mu <= 0:
        return 0.0
    return min(gaussian_epsilon_analytic(sigma=1.0, sensitivity=mu, delta=delta), GDP_MAX_EPSILON)
