"""The report's summary figure: the privacy-utility frontier, from which a data scientist should
be able to choose a setting alone.

x: accuracy on real D_test of the classifier trained on D_gen, with its Clopper-Pearson 95 %
interval; y: the held-out worst-case MI AP over the attacks the release allows, with its 95 %
interval (:mod:`audit.report.sweet_spots`). One colour per mechanism, each point labelled by its
parameter and epsilon; the non-private point in black; accuracy at or below chance (the majority
rate) shaded as "no utility"; the blind attacker's band (MI AP at or below its 95 % quantile:
indistinguishable from chance) shaded; each MI AP limit as a dotted line, and the setting the
report recommends under it ringed. Up and to the left is worse: more attackable, less useful.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from audit.config import MechanismName
from audit.report.plots import CHANCE_COLOR as CHANCE_BAND_COLOR
from audit.report.plots import mech_color, report_style
from audit.report.stats import format_epsilon
from audit.report.sweet_spots import Evidence, SweetSpot, recommendation

NONE = MechanismName.NONE.value
NO_UTILITY_COLOR = "#d9d9d9"


def _label(e: Evidence) -> str:
    if e.mech == NONE:
        return "non-private"
    return f"{e.param_label}, ε={format_epsilon(e.epsilon)}"


def _errors(values: np.ndarray, lows: np.ndarray, highs: np.ndarray) -> np.ndarray:
    lower = np.nan_to_num(values - lows, nan=0.0).clip(min=0)
    upper = np.nan_to_num(highs - values, nan=0.0).clip(min=0)
    return np.stack([lower, upper])


def frontier_figure(
    evidence: Sequence[Evidence], spots: Sequence[SweetSpot], *, title: str
) -> Figure | None:
    """The frontier of one report section; None where no setting has both an accuracy and a
    worst-case MI AP (an audited release without a test set)."""
    points = [e for e in evidence if math.isfinite(e.acc) and math.isfinite(e.worst_mi_ap)]
    if not points:
        return None
    chance = max(e.chance for e in points)
    floor = max((e.floor for e in points if math.isfinite(e.floor)), default=math.nan)
    with report_style():
        fig = Figure(figsize=(8.5, 5.6), layout="constrained")
        ax = fig.add_subplot()
        ax.axvspan(0, chance, color=NO_UTILITY_COLOR, alpha=0.6, zorder=0, linewidth=0)
        ax.text(
            chance / 2,
            0.985,
            f"no utility\n(≤ chance {chance:.3f})",
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="top",
            fontsize=7,
            color="dimgray",
        )
        if math.isfinite(floor):
            ax.axhspan(0, floor, color=CHANCE_BAND_COLOR, alpha=0.55, zorder=0, linewidth=0)
            ax.text(
                0.99,
                0.01,
                f"shaded: MI AP at chance (≤ the blind attacker's 95 % quantile {floor:.3f})",
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                fontsize=7,
                color="#7a6a3a",
            )
        chosen = recommendation(spots)
        ringed: dict[tuple[str, str], list[float]] = {}
        for limit, spot in chosen:
            if spot is not None:
                ringed.setdefault((spot.mech, spot.setting), []).append(limit)
        handles: list[object] = []
        for mech in dict.fromkeys(e.mech for e in points):
            mine = sorted((e for e in points if e.mech == mech), key=lambda e: -e.epsilon)
            x = np.array([e.acc for e in mine])
            y = np.array([e.worst_mi_ap for e in mine])
            xerr = _errors(
                x, np.array([e.acc_low for e in mine]), np.array([e.acc_high for e in mine])
            )
            yerr = _errors(
                y,
                np.array([e.worst_mi_ap_low for e in mine]),
                np.array([e.worst_mi_ap_high for e in mine]),
            )
            color = mech_color(mech)
            private = mech != NONE
            ax.errorbar(
                x,
                y,
                xerr=xerr,
                yerr=yerr,
                color=color,
                marker="o" if private else "*",
                markersize=6 if private else 13,
                linestyle="-" if private and len(mine) > 1 else "none",
                linewidth=1.0,
                elinewidth=0.8,
                capsize=2,
                alpha=0.9,
                zorder=3,
            )
            handles.append(
                Line2D(
                    [],
                    [],
                    color=color,
                    marker="o" if private else "*",
                    markersize=6 if private else 11,
                    linestyle="-" if private else "none",
                    label=mech if private else "non-private (none)",
                )
            )
            for i, e in enumerate(mine):
                up = i % 2 == 0
                under = ringed.get((e.mech, e.param_label))
                text = _label(e)
                if under:
                    text += "\nrecommended for L = " + ", ".join(f"{x:g}" for x in under)
                ax.annotate(
                    text,
                    (e.acc, e.worst_mi_ap),
                    xytext=(10, 7 if up else -9),  # clear of the ring of a recommended point
                    textcoords="offset points",
                    ha="left",
                    va="bottom" if up else "top",
                    fontsize=6.5,
                    color=color,
                    zorder=4,
                )
        limits = sorted(dict.fromkeys(limit for limit, _ in chosen))
        for limit in limits:
            ax.axhline(limit, color="dimgray", linestyle=":", linewidth=0.9, zorder=1)
            ax.text(
                0.005,
                limit,
                f"L = {limit:g}",
                transform=ax.get_yaxis_transform(),
                ha="left",
                va="bottom",
                fontsize=7,
                color="dimgray",
            )
        for mech, setting in ringed:
            e = next(p for p in points if p.mech == mech and p.param_label == setting)
            ax.scatter(
                [e.acc],
                [e.worst_mi_ap],
                s=260,
                facecolors="none",
                edgecolors="crimson",
                linewidths=1.8,
                zorder=5,
            )
        if ringed:
            handles.append(
                Line2D(
                    [],
                    [],
                    marker="o",
                    markersize=11,
                    markerfacecolor="none",
                    markeredgecolor="crimson",
                    linestyle="none",
                    label="recommended (per limit L)",
                )
            )
        handles.append(Patch(color=CHANCE_BAND_COLOR, alpha=0.55, label="MI AP at chance"))
        xs = [v for e in points for v in (e.acc_low, e.acc_high, e.acc) if math.isfinite(v)]
        ys = [
            v for e in points for v in (e.worst_mi_ap_low, e.worst_mi_ap_high) if math.isfinite(v)
        ]
        ax.set_xlim(0, min(1.0, max([*xs, chance]) * 1.08 + 0.05))
        ax.set_ylim(min(0.35, min(ys, default=0.5) - 0.02), max(1.0, max(ys, default=1.0)) + 0.02)
        ax.set_xlabel("utility: accuracy on real D_test of a classifier trained on D_gen (95 % CI)")
        ax.set_ylabel(
            "privacy risk: held-out worst-case MI AP\nover the attacks the release allows (95 % CI)"
        )
        ax.set_title(
            f"{title}\nbetter: down (harder to attack) and right (more useful)", fontsize=10
        )
        ax.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize=7.5,
            frameon=False,
        )
    return fig
