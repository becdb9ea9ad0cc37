"""Attack metrics against hand-computed values, and their input validation."""

from __future__ import annotations

import numpy as np
import pytest

from attacks.metrics import (
    AttackMetrics,
    precision_recall_curve,
    roc_curve,
    tpr_at_fpr,
)


def test_hand_computed_example() -> None:
    # Ranked: member 0.9, non-member 0.8, member 0.7, non-member 0.6.
    # AP = mean precision at each member = (1/1 + 2/3) / 2 = 5/6.
    # AUC = member-above-non-member pairs / all pairs = 3/4 (only 0.7 < 0.8 is misordered).
    # TPR at FPR <= 1 %: thresholds admitting no non-member reach 1 of 2 members.
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    is_member = np.array([True, False, True, False])
    metrics = AttackMetrics.from_scores(scores, is_member)
    assert metrics.mi_ap == pytest.approx(5 / 6)
    assert metrics.mi_auc == pytest.approx(3 / 4)
    assert metrics.tpr_at_fpr_1pct == pytest.approx(1 / 2)
    assert metrics.tpr_at_fpr_01pct == pytest.approx(1 / 2)


def test_perfect_separation() -> None:
    metrics = AttackMetrics.from_scores(np.array([3.0, 2.0, 1.0, 0.0]), np.array([1, 1, 0, 0]) > 0)
    assert metrics == AttackMetrics(1.0, 1.0, 1.0, 1.0)


def test_all_scores_tied_is_chance() -> None:
    # One threshold: everything flagged, precision 1/2 at recall 1; ROC only (0,0) and (1,1).
    metrics = AttackMetrics.from_scores(np.zeros(4), np.array([True, False, True, False]))
    assert metrics == AttackMetrics(
        mi_ap=0.5, mi_auc=0.5, tpr_at_fpr_1pct=0.0, tpr_at_fpr_01pct=0.0
    )


def test_tpr_at_fpr_includes_the_boundary() -> None:
    # 1000 non-members scored 0..999; members at 2000, 998.5 and 500.
    # Threshold 998.5 flags 2 members and 1 non-member: FPR = 1/1000 exactly (<= 0.1 %), TPR 2/3.
    # Lower thresholds add non-members; the member at 500 needs FPR 0.5.
    non_members = np.arange(1000, dtype=float)
    members = np.array([2000.0, 998.5, 500.0])
    scores = np.concatenate([members, non_members])
    is_member = np.arange(scores.size) < members.size
    metrics = AttackMetrics.from_scores(scores, is_member)
    assert metrics.tpr_at_fpr_01pct == pytest.approx(2 / 3)
    assert metrics.tpr_at_fpr_1pct == pytest.approx(2 / 3)
    assert tpr_at_fpr(roc_curve(scores, is_member), max_fpr=0.5) == pytest.approx(1.0)
    assert tpr_at_fpr(roc_curve(scores, is_member), max_fpr=0.0) == pytest.approx(1 / 3)


def test_curves_span_the_unit_square() -> None:
    rng = np.random.default_rng(0)
    scores = rng.normal(size=50)
    is_member = rng.random(50) < 0.5
    is_member[:2] = [True, False]
    roc = roc_curve(scores, is_member)
    assert (roc.fpr[0], roc.tpr[0], roc.fpr[-1], roc.tpr[-1]) == (0.0, 0.0, 1.0, 1.0)
    assert np.all(np.diff(roc.fpr) >= 0) and np.all(np.diff(roc.tpr) >= 0)
    pr = precision_recall_curve(scores, is_member)
    assert pr.recall[0] == 1.0 and pr.recall[-1] == 0.0
    assert pr.precision.shape == pr.recall.shape == (pr.thresholds.size + 1,)


def test_to_dict_has_the_row_keys() -> None:
    metrics = AttackMetrics(mi_ap=0.6, mi_auc=0.55, tpr_at_fpr_1pct=0.02, tpr_at_fpr_01pct=0.0)
    assert metrics.to_dict() == {
        "mi_ap": 0.6,
        "mi_auc": 0.55,
        "tpr_at_fpr_1pct": 0.02,
        "tpr_at_fpr_01pct": 0.0,
    }


@pytest.mark.parametrize(
    ("scores", "is_member", "message"),
    [
        ([0.1, 0.2, 0.3], [True, False], "same length, got 3 and 2"),
        ([0.1, 0.2], [True, True], "both members and non-members, got 2 members and 0"),
        ([0.1, 0.2], [False, False], "got 0 members and 2 non-members"),
        ([0.1, np.nan], [True, False], "finite, got 1 NaN or infinite of 2"),
        ([0.1, np.inf], [True, False], "finite"),
        ([0.1, 0.2], [1, 0], "boolean array, got dtype int"),
        ([[0.1, 0.2]], [[True, False]], "1-D"),
    ],
)
def test_bad_inputs_say_what_is_wrong(scores, is_member, message) -> None:
    with pytest.raises(ValueError, match=message):
        AttackMetrics.from_scores(np.array(scores), np.array(is_member))


def test_tpr_at_fpr_refuses_fpr_outside_unit_interval() -> None:
    roc = roc_curve(np.array([1.0, 0.0]), np.array([True, False]))
    with pytest.raises(ValueError, match="max_fpr must lie in"):
        tpr_at_fpr(roc, max_fpr=1.5)
