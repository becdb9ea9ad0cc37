"""How sure an attack's metrics are: chance quantiles, bootstrap intervals, TPR at a low FPR.

Every function takes raw scores (n,) (higher = member) and a boolean ``is_member`` (n,), so a
sweep's rows and a user's own release (``benchmark.py attack``) share them.

- :func:`mi_ap_null`: quantiles of a blind attacker's MI AP (scores independent of membership,
  no ties) for the row's member and non-member counts, by seeded simulation, cached per pair;
- :func:`bootstrap_intervals`: percentile intervals of MI AP and ROC AUC, resampling members
  and non-members separately (so the counts, and the null, stay the row's);
- :func:`tpr_at_fpr_interval`: TPR at an FPR only where the non-members number at least 1/FPR
  (below that, "TPR at 1 % FPR" is TPR at zero false positives), with a Clopper-Pearson interval.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from attacks.metrics import _validated, roc_curve, tpr_at_fpr

#: Confidence of every interval and bound the suite reports (the design's 95 %): MI AP and
#: accuracy intervals, the chance band, the empirical lower bounds on epsilon.
CONFIDENCE = 0.95
NULL_DRAWS = 20_000
"""Simulated blind attackers per count pair: the 95 % quantile's Monte-Carlo standard error is
about sqrt(0.05 * 0.95 / 20000) / f(q95) < 0.002 in AP at 50 + 50 records."""
BOOTSTRAP_DRAWS = 1000
_CHUNK = 2_000_000  # matrix entries per vectorised block (memory: about 16 MB of float64)


@dataclass(frozen=True)
class NullQuantiles:
    """Quantiles of MI AP for an attacker whose scores ignore membership, at ``members`` +
    ``nonmembers`` records; ``mean`` is its expectation (about the member share)."""

    members: int
    nonmembers: int
    q05: float
    q50: float
    q95: float
    q99: float
    mean: float
    draws: int


def _ap_of_orders(labels: np.ndarray) -> np.ndarray:
    """AP of each row of ``labels`` (B, n) bool, read as members' positions in a ranking from
    the highest score down, without ties: sum over members of precision at their rank / P."""
    tp = np.cumsum(labels, axis=1)
    precision = tp / np.arange(1, labels.shape[1] + 1)
    return (precision * labels).sum(axis=1) / labels.sum(axis=1)


@functools.lru_cache(maxsize=256)
def mi_ap_null(members: int, nonmembers: int, *, draws: int = NULL_DRAWS) -> NullQuantiles:
    """Quantiles of a blind attacker's MI AP at these counts (seeded by the counts, cached).

    A blind attacker's ranking is a uniformly random order of the records (continuous scores
    independent of membership), so its AP's law depends on the two counts alone.
    """
    for name, value in (("members", members), ("nonmembers", nonmembers), ("draws", draws)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    rng = np.random.default_rng([members, nonmembers, draws, 0x4E554C4C])
    n = members + nonmembers
    per_block = max(1, _CHUNK // n)
    values = []
    for start in range(0, draws, per_block):
        rows = min(per_block, draws - start)
        order = rng.random((rows, n)).argsort(axis=1)
        values.append(_ap_of_orders(order < members))
    null = np.concatenate(values)
    q05, q50, q95, q99 = np.quantile(null, [0.05, 0.5, 0.95, 0.99])
    return NullQuantiles(
        members,
        nonmembers,
        float(q05),
        float(q50),
        float(q95),
        float(q99),
        float(null.mean()),
        draws,
    )


def _weighted_ap_auc(
    weights: np.ndarray, member_sorted: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """AP and AUC of the records sorted by score (highest first) with multiplicities
    ``weights`` (B, n); ``ends``: the last position of each group of tied scores.

    Ties count as sklearn counts them: one threshold per distinct score for AP, half a pair
    for AUC. With all weights 1 these are ``average_precision_score`` and ``roc_auc_score``.
    """
    w_member = weights * member_sorted
    w_other = weights * ~member_sorted
    tp = np.cumsum(w_member, axis=1)[:, ends]
    fp = np.cumsum(w_other, axis=1)[:, ends]
    positives, negatives = tp[:, -1:], fp[:, -1:]
    precision = tp / np.maximum(tp + fp, 1e-300)
    recall_steps = np.diff(tp, axis=1, prepend=0) / positives
    ap = (recall_steps * precision).sum(axis=1)
    group_tp = np.diff(tp, axis=1, prepend=0)
    group_fp = np.diff(fp, axis=1, prepend=0)
    above = tp - group_tp  # member weight strictly above each group
    auc = ((above + 0.5 * group_tp) * group_fp).sum(axis=1) / (positives * negatives)[:, 0]
    return ap, auc


@dataclass(frozen=True)
class Intervals:
    """Bootstrap percentile intervals (``confidence``, two-sided) of MI AP and ROC AUC."""

    mi_ap_low: float
    mi_ap_high: float
    mi_auc_low: float
    mi_auc_high: float
    draws: int
    confidence: float


def bootstrap_intervals(
    scores: np.ndarray,
    is_member: np.ndarray,
    *,
    seed: int,
    draws: int = BOOTSTRAP_DRAWS,
    confidence: float = CONFIDENCE,
) -> Intervals:
    """Stratified bootstrap: members and non-members each resampled with replacement at their
    own counts; the metrics of each resample computed exactly (ties as sklearn)."""
    scores, is_member = _validated(scores, is_member)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    order = np.argsort(-scores, kind="stable")
    sorted_scores, member_sorted = scores[order], is_member[order]
    ends = np.r_[np.flatnonzero(np.diff(sorted_scores)), scores.size - 1]
    rng = np.random.default_rng(seed)
    members = np.flatnonzero(member_sorted)
    others = np.flatnonzero(~member_sorted)
    n = scores.size
    per_block = max(1, _CHUNK // n)
    aps, aucs = [], []
    for start in range(0, draws, per_block):
        rows = min(per_block, draws - start)
        weights = np.zeros((rows, n))
        for group in (members, others):
            picks = group[rng.integers(0, group.size, size=(rows, group.size))]
            np.add.at(weights, (np.arange(rows)[:, None], picks), 1.0)
        ap, auc = _weighted_ap_auc(weights, member_sorted, ends)
        aps.append(ap)
        aucs.append(auc)
    tail = (1 - confidence) / 2
    ap_lo, ap_hi = np.quantile(np.concatenate(aps), [tail, 1 - tail])
    auc_lo, auc_hi = np.quantile(np.concatenate(aucs), [tail, 1 - tail])
    return Intervals(float(ap_lo), float(ap_hi), float(auc_lo), float(auc_hi), draws, confidence)


def clopper_pearson(successes: int, trials: int, *, confidence: float = CONFIDENCE) -> tuple:
    """Two-sided Clopper-Pearson interval (low, high) of a binomial proportion
    (``scipy.stats.binomtest(k, n).proportion_ci(confidence, 'exact')``)."""
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, trials >= 1; got {successes}/{trials}")
    alpha = 1 - confidence
    low = 0.0 if successes == 0 else stats.beta.ppf(alpha / 2, successes, trials - successes + 1)
    high = (
        1.0
        if successes == trials
        else stats.beta.ppf(1 - alpha / 2, successes + 1, trials - successes)
    )
    return float(low), float(high)


@dataclass(frozen=True)
class TprAtFpr:
    """TPR at FPR <= ``fpr`` with its Clopper-Pearson interval over the members; NaN with
    ``reason`` where the non-members are too few to measure an FPR that small."""

    fpr: float
    tpr: float
    low: float
    high: float
    reason: str = ""


def min_nonmembers(fpr: float) -> int:
    """Non-members needed before an FPR of ``fpr`` means anything but zero false positives."""
    return math.ceil(1 / fpr - 1e-9)


def tpr_at_fpr_interval(
    scores: np.ndarray, is_member: np.ndarray, *, fpr: float, confidence: float = CONFIDENCE
) -> TprAtFpr:
    """TPR at FPR <= ``fpr``, only where non-members >= 1/fpr (else NaN and why)."""
    scores, is_member = _validated(scores, is_member)
    nonmembers, members = int((~is_member).sum()), int(is_member.sum())
    need = min_nonmembers(fpr)
    if nonmembers < need:
        reason = f"{nonmembers} non-members < {need} = 1/FPR: it would be TPR at zero FP"
        return TprAtFpr(fpr, math.nan, math.nan, math.nan, reason)
    tpr = tpr_at_fpr(roc_curve(scores, is_member), max_fpr=fpr)
    low, high = clopper_pearson(round(tpr * members), members, confidence=confidence)
    return TprAtFpr(fpr, tpr, low, high)
