"""The report's figures against epsilon, from the setting summaries: classifier accuracy, attack
MI AP and phi, with the baseline, real-data and chance levels as reference lines."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from audit.mechanisms import BASELINE
from audit.report.figure_parts import RefLine
from audit.report.plots import accuracy_vs_epsilon, mi_ap_by_attack, mi_ap_vs_epsilon, phi_bars
from audit.report.skips import skip
from audit.report.summaries import WORST_CASE
from audit.rows.tradeoff import chance_accuracy

#: The per-mechanism attack figure is drawn when a run has more measures than the reconstruction
#: attack's two (MSE, SSIM) and the worst case: when attacks beyond reconstruction ran.
MIN_MEASURES_BY_ATTACK = 3


def _acc_refs(settings: pd.DataFrame) -> list[RefLine]:
    base = settings[settings["mech"] == BASELINE]
    refs = []
    if not base.empty:
        b = base.iloc[0]
        refs.append(RefLine(b["acc"], "non-private (none)", half_width=b["acc_hw"]))
    refs.append(
        RefLine(settings["acc_real"].mean(), "classifier trained on real data", "-.", "dimgray")
    )
    refs.append(RefLine(*chance_line(settings), ":", "grey"))
    return refs


def chance_line(settings: pd.DataFrame) -> tuple[float, str]:
    """(level, legend label) of the settings' chance accuracy
    (:func:`audit.rows.tradeoff.chance_accuracy` of their mean 1/#classes and largest majority
    share)."""
    uniform = float(settings["acc_base"].mean())
    majority = float(settings["acc_majority"].max()) if "acc_majority" in settings else math.nan
    level = chance_accuracy(uniform, majority)
    if level != uniform:
        return level, "chance (D_test's majority-class share)"
    return level, "chance (1 / #classes)"


def _mi_refs(distances: pd.DataFrame) -> dict[str, list[RefLine]]:
    """The non-private value of each measure (with its half-width over seeds); the MI AP figures
    shade the blind attacker's band themselves (``mi_ap_null_q95``)."""
    refs: dict[str, list[RefLine]] = {}
    for distance, group in distances.groupby("distance"):
        base = group[group["mech"] == BASELINE]
        if not base.empty:
            b = base.iloc[0]
            refs[str(distance)] = [
                RefLine(b["mi_ap"], "non-private (none)", half_width=b["mi_ap_hw"])
            ]
    return refs


def phi_points(distances: pd.DataFrame) -> pd.DataFrame:
    """The rows the phi figure draws: the private settings' held-out worst case where the run
    has one (the phi a reader compares settings by), else each measure's phi (a run from before
    the worst case: the reconstruction attack's distances)."""
    private = distances[(distances["mech"] != BASELINE) & distances["phi"].notna()]
    worst = private[private["distance"] == WORST_CASE]
    return worst if not worst.empty else private


def _plottable(points: pd.DataFrame, what: str, skipped: list[str]) -> pd.DataFrame:
    private = points[points["mech"] != BASELINE]
    finite = private[np.isfinite(private["epsilon"].astype(float))]
    if len(finite) < len(private):
        skip(
            skipped,
            f"{what}: {len(private) - len(finite)} private setting(s) without a finite "
            "epsilon are left out",
        )
    return finite


def summary_figures(
    settings: pd.DataFrame,
    distances: pd.DataFrame,
    *,
    name: str,
    skipped: list[str],
    no_utility: str | None = None,
) -> list[tuple[str, Figure]]:
    """Accuracy vs epsilon, MI AP vs epsilon and phi of one dataset and profile; ``no_utility``
    (:func:`utility_note`) says why there is no phi figure."""
    figures: list[tuple[str, Figure]] = []
    acc_points = _plottable(settings, "accuracy vs epsilon", skipped)
    mi_points = _plottable(distances, "MI AP vs epsilon", skipped)
    if acc_points.empty:
        skip(
            skipped,
            f"{name}: no private run with a finite epsilon; the epsilon and phi "
            "figures are skipped",
        )
        return figures
    figures.append(
        (
            "accuracy_vs_epsilon",
            accuracy_vs_epsilon(
                acc_points, _acc_refs(settings), title=f"{name}: classifier accuracy vs ε"
            ),
        )
    )
    figures.append(
        (
            "mi_ap_vs_epsilon",
            mi_ap_vs_epsilon(
                mi_points,
                _mi_refs(distances),
                title=f"{name}: MI AP vs ε, one panel per attack family",
                first=WORST_CASE,
            ),
        )
    )
    if mi_points["distance"].nunique() > MIN_MEASURES_BY_ATTACK:
        figures.append(
            (
                "mi_ap_by_attack",
                mi_ap_by_attack(
                    mi_points,
                    title=f"{name}: MI AP vs ε per mechanism, one line per attack result, "
                    "coloured by attack family",
                    worst=WORST_CASE,
                ),
            )
        )
    phi = phi_points(distances)
    if no_utility is not None:
        skip(skipped, f"{name}: phi figure skipped: {no_utility}")
    elif phi.empty:
        skip(
            skipped,
            f"{name}: phi is undefined for every private run (no baseline?); phi figure skipped",
        )
    else:
        what = (
            "of the held-out worst case"
            if (phi["distance"] == WORST_CASE).all()
            else "per attack distance"
        )
        figures.append(("phi", phi_bars(phi, title=f"{name}: privacy-accuracy trade-off φ {what}")))
    return figures
