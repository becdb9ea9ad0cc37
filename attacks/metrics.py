"""Membership-inference metrics from attack scores: MI AP, ROC AUC, TPR at low FPR, and the curves.

Scores follow one convention everywhere: higher = more likely a member; members are the positive
class (the trade-off paper, Section 4: "MI AP" is the average precision of the attack).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from sklearn import metrics as skm

FPR_1PCT = 0.01
FPR_01PCT = 0.001


def _validated(scores: np.ndarray, is_member: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scores float64 (n,), is_member bool (n,)), or a ValueError that says what is wrong."""
    scores = np.asarray(scores)
    is_member = np.asarray(is_member)
    if scores.ndim != 1 or is_member.ndim != 1:
        raise ValueError(
            f"scores and is_member must be 1-D, got shapes {scores.shape} and {is_member.shape}"
        )
    if scores.shape != is_member.shape:
        raise ValueError(
            f"scores and is_member must have the same length, got {scores.size} and "
            f"{is_member.size}"
        )
    if is_member.dtype != np.bool_:
        raise ValueError(f"is_member must be a boolean array, got dtype {is_member.dtype}")
    scores = scores.astype(np.float64)
    n_bad = int(np.count_nonzero(~np.isfinite(scores)))
    if n_bad:
        raise ValueError(f"scores must be finite, got {n_bad} NaN or infinite of {scores.size}")
    n_members = int(is_member.sum())
    if n_members in (0, is_member.size):
        raise ValueError(
            "metrics need both members and non-members, got "
            f"{n_members} members and {is_member.size - n_members} non-members"
        )
    return scores, is_member


@dataclass(frozen=True)
class RocCurve:
    """ROC curve (all thresholds kept): fpr, tpr increasing, thresholds decreasing, each (P,)."""

    fpr: np.ndarray
    tpr: np.ndarray
    thresholds: np.ndarray


@dataclass(frozen=True)
class PrecisionRecallCurve:
    """Precision-recall curve with members positive: precision, recall (P,), thresholds (P-1,)."""

    precision: np.ndarray
    recall: np.ndarray
    thresholds: np.ndarray


def roc_curve(scores: np.ndarray, is_member: np.ndarray) -> RocCurve:
    """ROC curve of the attack, members positive, keeping every threshold (for TPR at FPR)."""
    scores, is_member = _validated(scores, is_member)
    fpr, tpr, thresholds = skm.roc_curve(is_member, scores, drop_intermediate=False)
    return RocCurve(fpr=fpr, tpr=tpr, thresholds=thresholds)


def precision_recall_curve(scores: np.ndarray, is_member: np.ndarray) -> PrecisionRecallCurve:
    """Precision-recall curve of the attack, members positive."""
    scores, is_member = _validated(scores, is_member)
    precision, recall, thresholds = skm.precision_recall_curve(is_member, scores)
    return PrecisionRecallCurve(precision=precision, recall=recall, thresholds=thresholds)


def tpr_at_fpr(curve: RocCurve, *, max_fpr: float) -> float:
    """Largest TPR among the ROC points whose FPR is at most ``max_fpr`` (in [0, 1])."""
    if not 0.0 <= max_fpr <= 1.0:
        raise ValueError(f"max_fpr must lie in [0, 1], got {max_fpr!r}")
    return float(curve.tpr[curve.fpr <= max_fpr].max())


@dataclass(frozen=True)
class AttackMetrics:
    """Summary of one attack's scores (each in [0, 1]).

    Attributes:
        mi_ap: average precision, members positive (sklearn ``average_precision_score``);
            0.5 is chance level for balanced sets.
        mi_auc: ROC AUC (0.5 = chance).
        tpr_at_fpr_1pct: largest TPR with FPR <= 1 %.
        tpr_at_fpr_01pct: largest TPR with FPR <= 0.1 %; with fewer than 1000 non-members only
            thresholds above every non-member's score qualify.
    """

    mi_ap: float
    mi_auc: float
    tpr_at_fpr_1pct: float
    tpr_at_fpr_01pct: float

    @classmethod
    def from_scores(cls, scores: np.ndarray, is_member: np.ndarray) -> AttackMetrics:
        """Compute all metrics from scores (n,) (higher = member) and a boolean is_member (n,)."""
        scores, is_member = _validated(scores, is_member)
        roc = roc_curve(scores, is_member)
        return cls(
            mi_ap=float(skm.average_precision_score(is_member, scores)),
            mi_auc=float(skm.roc_auc_score(is_member, scores)),
            tpr_at_fpr_1pct=tpr_at_fpr(roc, max_fpr=FPR_1PCT),
            tpr_at_fpr_01pct=tpr_at_fpr(roc, max_fpr=FPR_01PCT),
        )

    def to_dict(self) -> dict[str, float]:
        """The metrics as a flat dict keyed by field name (for result rows)."""
        return asdict(self)
