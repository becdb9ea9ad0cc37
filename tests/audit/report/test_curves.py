"""The report's attack curves on a common grid."""

from __future__ import annotations

import numpy as np

from audit.report.curves import CURVE_GRID, pr_on_grid, roc_on_grid


def test_curves_on_the_grid_match_sklearn_at_their_knots():
    """ROC interpolation passes through sklearn's points; interpolated precision is the best
    precision at any recall >= r (the naive definition, evaluated point by point)."""
    from sklearn.metrics import precision_recall_curve, roc_curve

    rng = np.random.default_rng(1)
    is_member = np.repeat([True, False], 25)
    scores = rng.normal(size=50) + is_member
    fpr, tpr, _ = roc_curve(is_member, scores)
    grid_tpr = roc_on_grid(scores, is_member)
    for f, t in zip(fpr, tpr, strict=True):
        hits = np.isclose(CURVE_GRID, f)
        assert not hits.any() or t <= grid_tpr[hits][0] + 1e-12
    precision, recall, _ = precision_recall_curve(is_member, scores)
    naive = [precision[recall >= r].max() for r in CURVE_GRID]
    np.testing.assert_allclose(pr_on_grid(scores, is_member), naive)


def test_cells_without_the_reconstruction_attack_are_left_out_with_a_reason(tmp_path):
    """A decoder-only cell (dp2vae) has no reconstruction scores: the curves leave it out and
    say why, instead of calling its scores.npz unreadable (no file is read for it here)."""
    import pandas as pd

    from audit.report.curves import curve_figures

    frame = pd.DataFrame(
        {
            "config_hash": ["D", "D"],
            "attack": ["latent-search", "monte-carlo"],
            "distance": ["mse", "pixel-l2"],
        }
    )
    skipped: list[str] = []
    assert curve_figures(tmp_path, frame, name="run", skipped=skipped) == []
    # no config says the cell listed reconstruction out: its release lacked the encoder
    assert any("1 cell(s) have no reconstruction rows (1 release(s) lack" in s for s in skipped)
    assert not any("unreadable" in s for s in skipped)
