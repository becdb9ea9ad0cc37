"""The report's attack curves: precision-recall and ROC per distance from the cells'
``scores.npz``, on a common grid, averaged over seeds with a 95 % band."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attacks import precision_recall_curve, roc_curve
from audit import results
from audit.config import MechanismName
from audit.report.plots import CurveBand, SettingCurves, attack_curves
from audit.report.skips import skip
from audit.report.stats import column_intervals
from audit.report.summaries import SETTING, ordered

CURVE_GRID = np.linspace(0.0, 1.0, 201)
#: The attack whose per-record scores the curves draw (``results.load_scores``).
RECONSTRUCTION = "reconstruction"


def roc_on_grid(scores: np.ndarray, is_member: np.ndarray) -> np.ndarray:
    """TPR at each FPR of :data:`CURVE_GRID` (linear interpolation of the ROC curve)."""
    roc = roc_curve(scores, is_member)
    return np.interp(CURVE_GRID, roc.fpr, roc.tpr)


def pr_on_grid(scores: np.ndarray, is_member: np.ndarray) -> np.ndarray:
    """Interpolated precision (the best precision at recall >= r) at each recall r of the grid."""
    pr = precision_recall_curve(scores, is_member)
    recall, precision = pr.recall[::-1], pr.precision[::-1]  # recall ascending
    envelope = np.maximum.accumulate(precision[::-1])[::-1]
    idx = np.minimum(np.searchsorted(recall, CURVE_GRID, side="left"), len(recall) - 1)
    return envelope[idx]


def _band(curves: list[np.ndarray]) -> CurveBand:
    mean, half_width = column_intervals(np.stack(curves))
    return CurveBand(CURVE_GRID, mean, half_width, len(curves))


def _cell_scores(run_dir: Path, hashes: Sequence[str], skipped: list[str], name: str) -> dict:
    found = {}
    for h in hashes:
        path = results.cell_path(run_dir, h) / results.SCORES_FILE
        if not path.is_file():
            continue
        try:
            found[h] = results.load_scores(path)
        except (ValueError, OSError) as exc:
            skip(skipped, f"{name}: unreadable scores in cell {h}: {exc}")
    missing = len(set(hashes)) - len(found)
    if found and missing:
        skip(
            skipped,
            f"{name}: {missing} of {len(set(hashes))} cell(s) have no readable "
            "scores.npz; their attack curves are left out",
        )
    return found


def curve_figures(
    run_dir: Path, frame: pd.DataFrame, *, name: str, skipped: list[str]
) -> list[tuple[str, Figure]]:
    """Precision-recall and ROC curves per distance of the reconstruction attack (the scores
    ``scores.npz`` keeps per record for it), averaged over the seeds' cells; cells that did not
    run it (a decoder-only release) are left out, and ``skipped`` says how many."""
    if "attack" in frame.columns:
        without = set(frame["config_hash"]) - set(
            frame.loc[frame["attack"] == RECONSTRUCTION, "config_hash"]
        )
        if without:
            configs = results.cell_configs(run_dir)
            listed = sum(
                RECONSTRUCTION in configs.get(h, {}).get("attacks", [RECONSTRUCTION])
                for h in without
            )
            unlisted = len(without) - listed
            reasons = [
                f"{unlisted} did not list it (--attack)" if unlisted else "",
                f"{listed} release(s) lack the encoder" if listed else "",
            ]
            skip(
                skipped,
                f"{name}: attack curves show the reconstruction attack; {len(without)} cell(s) "
                f"have no reconstruction rows ({', '.join(r for r in reasons if r)}) and are "
                "left out",
            )
        frame = frame[frame["attack"] == RECONSTRUCTION]
    found = _cell_scores(run_dir, list(frame["config_hash"].unique()), skipped, name)
    if not found:
        skip(skipped, f"{name}: no cell holds scores.npz; attack curves skipped")
        return []
    figures = []
    for distance in sorted(frame["distance"].unique()):
        rows: dict[str, list[SettingCurves]] = {}
        baseline = None
        settings = ordered(frame[frame["distance"] == distance])
        for _, group in settings.groupby(list(SETTING), dropna=False, sort=False):
            pairs = [found[h] for h in group["config_hash"] if h in found]
            pairs = [(m, s[distance]) for m, s in pairs if distance in s]
            if not pairs:
                continue
            mech, label = group["mech"].iloc[0], group["param_label"].iloc[0]
            private = mech != MechanismName.NONE.value
            curves = SettingCurves(
                label=f"{mech} {label}" if private else "non-private (none)",
                mech=mech,
                pr=_band([pr_on_grid(s, m) for m, s in pairs]),
                roc=_band([roc_on_grid(s, m) for m, s in pairs]),
            )
            if mech == MechanismName.NONE.value:
                baseline = curves
            else:
                rows.setdefault(mech, []).append(curves)
        if rows or baseline is not None:
            seeds = frame["seed"].nunique()
            how = (
                "mean over seeds, 95 % band"
                if seeds > 1
                else "one seed: no band; each MI AP's 95 % interval is in the per-attack table"
            )
            title = f"{name}: attack curves, distance {distance.upper()} ({how})"
            figures.append(
                (f"attack_curves_{distance}", attack_curves(rows, baseline, title=title))
            )
    return figures
