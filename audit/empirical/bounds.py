"""Empirical (eps, delta) lower bounds from hypothesis tests (pure statistics, torch-free).

Two audits share this module:

- a threshold test between two worst-case neighbouring inputs (local randomizers): Clopper-
  Pearson upper bounds on its false-positive and false-negative rates give
  ``eps_lb = max(log((1 - delta - FNR_hi) / FPR_hi), log((1 - delta - FPR_hi) / FNR_hi), 0)``;
- the one-run audit of Steinke, Nasr and Jagielski (2023, "Privacy Auditing with One (1)
  Training Run", Theorem 3 and its Algorithm 2 for approximate DP): m canaries each included
  with probability 1/2, r guesses, v of them right.

Notes:
    Both bounds hold with the stated confidence: an (eps, delta)-DP mechanism with eps below the
    returned bound would produce data this extreme with probability at most ``1 - confidence``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from attacks.uncertainty import CONFIDENCE


def _check_confidence(confidence: float) -> float:
    if not isinstance(confidence, float | int) or not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    return float(confidence)


def _check_delta(delta: float) -> float:
    if not isinstance(delta, float | int) or not 0 <= delta < 1:
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}")
    return float(delta)


def _check_count(name: str, value: int, *, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def clopper_pearson_upper(successes: int, trials: int, *, confidence: float) -> float:
    """One-sided Clopper-Pearson upper bound on a binomial proportion.

    ``P[p <= bound] >= confidence``: the ``confidence`` quantile of Beta(k + 1, n - k), and 1
    when k = n (Clopper and Pearson 1934; the same as
    ``scipy.stats.binomtest(k, n, alternative='less').proportion_ci(confidence).high``).
    """
    n = _check_count("trials", trials, low=1)
    k = _check_count("successes", successes)
    if k > n:
        raise ValueError(f"successes must not exceed trials, got {k} of {n}")
    conf = _check_confidence(confidence)
    if k == n:
        return 1.0
    return float(stats.beta.ppf(conf, k + 1, n - k))


@dataclass(frozen=True)
class ThresholdBound:
    """An (eps, delta) lower bound from one threshold test and how it was obtained.

    ``fpr_hi`` and ``fnr_hi`` are one-sided Clopper-Pearson upper bounds, each at confidence
    ``1 - (1 - confidence) / 2`` (Bonferroni), so both hold jointly with ``confidence``.
    """

    epsilon: float
    delta: float
    confidence: float
    false_positives: int
    negatives: int
    false_negatives: int
    positives: int
    fpr_hi: float
    fnr_hi: float


def epsilon_from_rates(*, fpr: float, fnr: float, delta: float) -> float:
    """``max(log((1 - delta - fnr) / fpr), log((1 - delta - fpr) / fnr), 0)``.

    Any (eps, delta)-DP test satisfies ``fpr + e^eps fnr >= 1 - delta`` and the same with the
    roles swapped (Kairouz, Oh and Viswanath 2015), so this is the smallest eps consistent
    with the two rates; a rate of 0 with the other below ``1 - delta`` gives ``inf``.
    """
    best = 0.0
    for a, b in ((fnr, fpr), (fpr, fnr)):
        num = 1.0 - delta - a
        if num <= 0:
            continue
        best = max(best, math.inf if b <= 0 else math.log(num / b))
    return best


def threshold_test_bound(
    *,
    false_positives: int,
    negatives: int,
    false_negatives: int,
    positives: int,
    delta: float = 0.0,
    confidence: float = CONFIDENCE,
) -> ThresholdBound:
    """The lower bound of a threshold test whose counts were measured on fresh draws.

    ``negatives`` draws from the first input, ``false_positives`` of them on the second's side of
    the threshold; ``positives`` and ``false_negatives`` the same for the second input. The
    threshold must not have been chosen on these draws.
    """
    conf = _check_confidence(confidence)
    delta = _check_delta(delta)
    each = 1.0 - (1.0 - conf) / 2.0
    fpr_hi = clopper_pearson_upper(false_positives, negatives, confidence=each)
    fnr_hi = clopper_pearson_upper(false_negatives, positives, confidence=each)
    return ThresholdBound(
        epsilon=epsilon_from_rates(fpr=fpr_hi, fnr=fnr_hi, delta=delta),
        delta=delta,
        confidence=conf,
        false_positives=int(false_positives),
        negatives=int(negatives),
        false_negatives=int(false_negatives),
        positives=int(positives),
        fpr_hi=fpr_hi,
        fnr_hi=fnr_hi,
    )


#: The smallest p-value the searches of :func:`smallest_rejecting_level` resolve; a smaller one is
#: reported as this (above the truth, so a comparison with any level rejects nothing extra).
P_VALUE_FLOOR = 1e-15


def smallest_rejecting_level(rejected: Callable[[float], bool], *, rtol: float = 1e-3) -> float:
    """The p-value of a test given as ``rejected(alpha)``, which must be monotone (a test that
    rejects at a level rejects at every larger one): the smallest alpha in [P_VALUE_FLOOR, 1) at
    which it rejects, by bisection on log(alpha) to relative ``rtol``, rounded up (never below
    the truth: a p-value compared with a level fails nothing the test itself would not); 1 where
    no level below 1 rejects."""
    high = 1.0 - 1e-9
    if not rejected(high):
        return 1.0
    if rejected(P_VALUE_FLOOR):
        return P_VALUE_FLOOR
    low_log, high_log = math.log(P_VALUE_FLOOR), math.log(high)
    while high_log - low_log > rtol:
        mid = (low_log + high_log) / 2
        low_log, high_log = (low_log, mid) if rejected(math.exp(mid)) else (mid, high_log)
    return math.exp(high_log)


def threshold_test_p_value(bound: ThresholdBound, epsilon: float) -> float:
    """The p-value of the claim ``(epsilon, bound.delta)`` given the counts of ``bound``: the
    smallest ``1 - confidence`` at which :func:`threshold_test_bound` on them exceeds
    ``epsilon`` (so ``p < 1 - confidence`` exactly where that bound is above the claim)."""

    def rejected(alpha: float) -> bool:
        return (
            threshold_test_bound(
                false_positives=bound.false_positives,
                negatives=bound.negatives,
                false_negatives=bound.false_negatives,
                positives=bound.positives,
                delta=bound.delta,
                confidence=1.0 - alpha,
            ).epsilon
            > epsilon
        )

    return smallest_rejecting_level(rejected)


def threshold_ceiling(
    *, draws_per_input: int, delta: float = 0.0, confidence: float = CONFIDENCE
) -> float:
    """The largest bound a threshold test can give with ``draws_per_input`` fresh draws per
    input: the one with no error at all (about ``log(n / 3.7)`` at 95 %)."""
    n = _check_count("draws_per_input", draws_per_input, low=1)
    return threshold_test_bound(
        false_positives=0,
        negatives=n,
        false_negatives=0,
        positives=n,
        delta=delta,
        confidence=confidence,
    ).epsilon


def one_run_p_value(*, m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """Steinke et al. 2023, Theorem 3: P[>= v of r guesses right] under (eps, delta)-DP.

    With q = e^eps / (1 + e^eps) and W ~ Binomial(r, q):
    ``P[W >= v] + 2 m delta * max_{i=1..v} P[v - i <= W < v] / i`` (their Algorithm 2, the
    delta term included), capped at 1. ``m`` is the number of canaries (each included with
    probability 1/2), ``r`` the guesses (abstentions excluded) and ``v`` the right ones.
    """
    m = _check_count("m", m, low=1)
    r = _check_count("r", r)
    v = _check_count("v", v)
    if not v <= r <= m:
        raise ValueError(f"need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    if not (isinstance(epsilon, float | int) and epsilon >= 0):
        raise ValueError(f"epsilon must be a number >= 0, got {epsilon!r}")
    delta = _check_delta(delta)
    q = float(special.expit(epsilon))
    tail = float(stats.binom.sf(v - 1, r, q))
    if delta == 0 or v == 0:
        return min(tail, 1.0)
    below = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)  # P[W = v-1], P[W = v-2], ...
    alpha = float(np.max(np.cumsum(below) / np.arange(1, v + 1)))
    return min(tail + 2.0 * m * delta * alpha, 1.0)


@dataclass(frozen=True)
class OneRunBound:
    """Steinke et al.'s lower bound and its inputs; ``ceiling`` is the bound had all r guesses
    been right (the most this m, r and delta can prove)."""

    epsilon: float
    ceiling: float
    m: int
    r: int
    v: int
    delta: float
    confidence: float


def _largest_rejected(m: int, r: int, v: int, delta: float, alpha: float, tol: float) -> float:
    def rejected(eps: float) -> bool:
        return one_run_p_value(m=m, r=r, v=v, epsilon=eps, delta=delta) < alpha

    if not rejected(0.0):
        return 0.0
    low, high = 0.0, 1.0
    while rejected(high):
        low, high = high, 2 * high
        if high > 1e4:
            return math.inf
    while high - low > tol:
        mid = (low + high) / 2
        low, high = (mid, high) if rejected(mid) else (low, mid)
    return low


def one_run_epsilon_bound(
    *, m: int, r: int, v: int, delta: float, confidence: float = CONFIDENCE, tol: float = 1e-6
) -> OneRunBound:
    """The largest eps (to ``tol``) whose p-value (:func:`one_run_p_value`) is below
    ``1 - confidence``: the mechanism is not (eps', delta)-DP for any eps' <= it.

    Binary search, as the paper's Algorithm 2; the p-value increases with eps. 0 when even eps = 0
    is not rejected.

    Notes:
        The theorem holds for any m and delta; whether an epsilon is rejected is decided by
        computing the p-value, never by a rule on ``2 m delta``: the delta term is ``2 m delta``
        times a probability that can be tiny (m = r = v = 200 at delta 1e-3 proves 3.566, with
        ``2 m delta = 0.4``). One limit does hold for every outcome: the maximum over i includes
        i = v, so the delta term is at least ``2 m delta P[W < v] / v >= 2 delta P[W < v]``
        (v <= m) and the p-value at least ``2 delta + (1 - 2 delta) P[W >= v] >= 2 delta``; at
        ``2 delta >= 1 - confidence`` nothing is provable (bound and ceiling 0).
    """
    conf = _check_confidence(confidence)
    one_run_p_value(m=m, r=r, v=v, epsilon=0.0, delta=delta)  # validates
    alpha = 1.0 - conf
    return OneRunBound(
        epsilon=_largest_rejected(m, r, v, delta, alpha, tol),
        ceiling=_largest_rejected(m, r, r, delta, alpha, tol),
        m=int(m),
        r=int(r),
        v=int(v),
        delta=float(delta),
        confidence=conf,
    )
