"""The report's attack curves: precision-recall and ROC from the cells' ``scores.npz``, on a
common grid, averaged over seeds with a 95 % band: of the attack that won each setting's held-out
worst case, and per distance of the reconstruction attack."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attacks import precision_recall_curve, roc_curve
from audit import results
from audit.mechanisms import BASELINE
from audit.report.figure_parts import CurveBand, SettingCurves
from audit.report.figure_style import short_number
from audit.report.record_figures import attack_curves
from audit.report.skips import skip
from audit.report.stats import column_intervals
from audit.report.summaries import SETTING, WORST_CASE, ordered
from audit.rows.row import PAPER_ATTACK, PLAIN_VARIANT

CURVE_GRID = np.linspace(0.0, 1.0, 201)


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


Scores = tuple[np.ndarray, dict[tuple[str, str, str], np.ndarray]]


def _cell_scores(
    run_dir: Path, hashes: Sequence[str], skipped: list[str], name: str, cache: dict
) -> dict[str, Scores]:
    """Every attack result's scores of each cell in ``hashes`` that keeps a readable
    ``scores.npz`` (read once per cell: ``cache`` holds them, None for an unreadable file)."""
    found = {}
    for h in dict.fromkeys(hashes):
        if h not in cache:
            path = results.cell_path(run_dir, h) / results.SCORES_FILE
            cache[h] = None
            if path.is_file():
                try:
                    cache[h] = results.load_attack_scores(path)
                except (ValueError, OSError) as exc:
                    skip(skipped, f"{name}: unreadable scores in cell {h}: {exc}")
        if cache[h] is not None:
            found[h] = cache[h]
    return found


def _how(frame: pd.DataFrame) -> str:
    if frame["seed"].nunique() > 1:
        return "mean over seeds, 95 % band"
    return "one seed: no band; each MI AP's 95 % interval is in the per-attack table"


def _label(group: pd.DataFrame) -> tuple[str, str]:
    mech, label = group["mech"].iloc[0], group["param_label"].iloc[0]
    if mech == BASELINE:
        return mech, "non-private (none)"
    if label == BASELINE:  # no parameter: a release attacked as it is
        label = f"the {mech} release"
    epsilon = float(group["epsilon"].astype(float).mean())
    return mech, f"{label} (ε={short_number(epsilon)})" if np.isfinite(epsilon) else label


def _winners(frame: pd.DataFrame) -> dict[str, tuple[str, tuple[str, str, str]]]:
    """Per cell, the attack result its held-out worst case picked: (measure label, scores key
    (attack, distance, variant)); empty where the rows do not say (``worst_case``)."""
    if not {"worst_case", "attack", "variant"} <= set(frame.columns):
        return {}
    chosen = frame[(frame["distance"] != WORST_CASE) & (frame["worst_case"].astype(str) == "True")]
    out = {}
    for h, measure, attack, variant in zip(
        chosen["config_hash"], chosen["distance"], chosen["attack"], chosen["variant"], strict=True
    ):
        distance = measure.split(":")[1] if ":" in measure else measure
        out[h] = (measure, (str(attack), distance, str(variant)))
    return out


def winner_figure(
    run_dir: Path, frame: pd.DataFrame, *, name: str, skipped: list[str], cache: dict | None = None
) -> list[tuple[str, Figure]]:
    """Precision-recall and ROC curves of the attack that won each setting's held-out worst
    case (each seed's own winner, over all of D_atk; the line style names the winner), from the
    cells' ``scores.npz``; ``skipped`` says how many cells lack their winner's scores."""
    winners = _winners(frame)
    if not winners:
        return []
    cache = {} if cache is None else cache
    found = _cell_scores(run_dir, list(winners), skipped, name, cache)
    rows: dict[str, list[SettingCurves]] = {}
    baseline, missing = None, 0
    chosen = ordered(frame[frame["config_hash"].isin(list(winners))])
    for _, group in chosen.groupby(list(SETTING), dropna=False, sort=False):
        cells = [h for h in dict.fromkeys(group["config_hash"])]
        pairs = []
        for h in cells:
            key = winners[h][1]
            if h in found and key in found[h][1]:
                pairs.append((found[h][0], found[h][1][key]))
            else:
                missing += 1
        if not pairs:
            continue
        names = pd.Series([winners[h][0] for h in cells]).value_counts()
        winner = str(names.index[0])
        mech, label = _label(group)
        if names.iloc[0] < len(cells):
            label += f" ({winner}: {names.iloc[0]} of {len(cells)} seeds)"
        curves = SettingCurves(
            label=label,
            mech=mech,
            pr=_band([pr_on_grid(s, m) for m, s in pairs]),
            roc=_band([roc_on_grid(s, m) for m, s in pairs]),
            winner=winner,
        )
        if mech == BASELINE:
            baseline = curves
        else:
            rows.setdefault(mech, []).append(curves)
    if missing:
        skip(
            skipped,
            f"{name}: {missing} of {len(winners)} cell(s) keep no scores of the attack that won "
            "their worst case; their curves are left out",
        )
    if not rows and baseline is None:
        return []
    title = (
        f"{name}: attack curves of the attack that won each setting's held-out worst case "
        f"(curves over all of D_atk; {_how(frame)})"
    )
    return [("attack_curves_worst_case", attack_curves(rows, baseline, title=title))]


def curve_figures(
    run_dir: Path, frame: pd.DataFrame, *, name: str, skipped: list[str]
) -> list[tuple[str, Figure]]:
    """The attack curves: of the attack that won each setting's held-out worst case
    (:func:`winner_figure`, where the rows say which won), then precision-recall and ROC curves
    per distance of the reconstruction attack, averaged over the seeds' cells; cells that did
    not run it (a decoder-only release) are left out, and ``skipped`` says how many."""
    cache: dict = {}
    figures = winner_figure(run_dir, frame, name=name, skipped=skipped, cache=cache)
    if "attack" in frame.columns:
        without = set(frame["config_hash"]) - set(
            frame.loc[frame["attack"] == PAPER_ATTACK, "config_hash"]
        )
        if without:
            configs = results.cell_configs(run_dir)
            listed = sum(
                PAPER_ATTACK in configs.get(h, {}).get("attacks", [PAPER_ATTACK]) for h in without
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
        frame = frame[frame["attack"] == PAPER_ATTACK]
    hashes = list(frame["config_hash"].unique())
    paper = (PAPER_ATTACK, PLAIN_VARIANT)
    found = {
        h: (m, {d: v for (a, d, var), v in keyed.items() if (a, var) == paper})
        for h, (m, keyed) in _cell_scores(run_dir, hashes, skipped, name, cache).items()
    }
    found = {h: pair for h, pair in found.items() if pair[1]}
    if not found:
        skip(skipped, f"{name}: no cell holds scores.npz; attack curves skipped")
        return figures
    missing = len(set(hashes)) - len(found)
    if missing:
        skip(
            skipped,
            f"{name}: {missing} of {len(set(hashes))} cell(s) have no readable "
            "scores.npz; their attack curves are left out",
        )
    for distance in sorted(frame["distance"].unique()):
        rows: dict[str, list[SettingCurves]] = {}
        baseline = None
        settings = ordered(frame[frame["distance"] == distance])
        for _, group in settings.groupby(list(SETTING), dropna=False, sort=False):
            pairs = [found[h] for h in group["config_hash"] if h in found]
            pairs = [(m, s[distance]) for m, s in pairs if distance in s]
            if not pairs:
                continue
            mech, label = _label(group)
            curves = SettingCurves(
                label=label,
                mech=mech,
                pr=_band([pr_on_grid(s, m) for m, s in pairs]),
                roc=_band([roc_on_grid(s, m) for m, s in pairs]),
            )
            if mech == BASELINE:
                baseline = curves
            else:
                rows.setdefault(mech, []).append(curves)
        if rows or baseline is not None:
            title = (
                f"{name}: attack curves, reconstruction attack, distance {distance.upper()} "
                f"({_how(frame)})"
            )
            figures.append(
                (f"attack_curves_{distance}", attack_curves(rows, baseline, title=title))
            )
    return figures
