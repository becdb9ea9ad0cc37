"""The chance band of MI AP: its permutation distribution when scores ignore membership."""

from __future__ import annotations

import numpy as np

N_PERMUTATIONS = 4000
COVERAGE = 0.998
"""Two-sided: the band is the 0.1 % and 99.9 % quantiles of the permutation AP. With a dozen
seeded null checks in the suite, a 95 % band would fail one of them about half the time."""


def average_precision_many(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """sklearn's average precision of ``scores`` (n,) for each row of ``labels`` (P, n) bool.

    Tied scores form one threshold, as in ``sklearn.metrics.average_precision_score``:
    AP = sum over distinct thresholds of (R_k - R_{k-1}) P_k.
    """
    order = np.argsort(-scores, kind="stable")
    sorted_scores = scores[order]
    ends = np.r_[np.flatnonzero(np.diff(sorted_scores)), scores.size - 1]
    tp = np.cumsum(labels[:, order], axis=1)[:, ends]
    precision = tp / (ends + 1)
    recall_steps = np.diff(tp, axis=1, prepend=0) / labels.sum(axis=1, keepdims=True)
    return (recall_steps * precision).sum(axis=1)


def ap_null_band(
    scores: np.ndarray,
    is_member: np.ndarray,
    *,
    n_permutations: int = N_PERMUTATIONS,
    seed: int = 0,
    coverage: float = COVERAGE,
) -> tuple[float, float]:
    """(low, high) quantiles of AP over random relabelings that keep the number of members."""
    rng = np.random.default_rng(seed)
    labels = rng.permuted(np.tile(is_member, (n_permutations, 1)), axis=1)
    null = average_precision_many(np.asarray(scores, dtype=np.float64), labels)
    tail = (1.0 - coverage) / 2
    low, high = np.quantile(null, [tail, 1.0 - tail])
    return float(low), float(high)


def inside_band(scores: np.ndarray, is_member: np.ndarray, **kwargs: object) -> bool:
    """Whether the AP of ``scores`` lies inside the permutation band at the same n."""
    low, high = ap_null_band(scores, is_member, **kwargs)
    ap = float(average_precision_many(scores, is_member[None, :])[0])
    return low <= ap <= high
