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
from matplotlib.transforms import Bbox

from audit.mechanisms import BASELINE
from audit.report.evidence import Evidence
from audit.report.figure_style import CHANCE_COLOR as CHANCE_BAND_COLOR
from audit.report.figure_style import mech_color, report_style
from audit.report.stats import format_epsilon
from audit.report.sweet_spots import SweetSpot, recommendation

NO_UTILITY_COLOR = "#d9d9d9"
#: One marker shape per private mechanism (in the report's mechanism order), so that colour is
#: not the only cue.
MARKERS = ("o", "s", "D", "^", "v", "P", "X")


def _label(e: Evidence) -> str:
    if e.mech == BASELINE:
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
    worst-case MI AP (an attacked release without a test set)."""
    points = [e for e in evidence if math.isfinite(e.acc) and math.isfinite(e.worst_mi_ap)]
    if not points:
        return None
    chance = max(e.chance for e in points)
    floor = max((e.floor for e in points if math.isfinite(e.floor)), default=math.nan)
    with report_style():
        crowded = len(points) > 12  # room for the labels of a full sweep
        fig = Figure(figsize=(11.5, 7.8) if crowded else (8.5, 5.6), layout="constrained")
        ax = fig.add_subplot()
        ax.axvspan(0, chance, color=NO_UTILITY_COLOR, alpha=0.6, zorder=0, linewidth=0)
        ax.text(
            0.005,
            0.985,
            f"no utility\n(≤ chance {chance:.3f})",
            transform=ax.transAxes,
            ha="left",
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
        labels: list[tuple[float, float, str, object]] = []
        for k, mech in enumerate(dict.fromkeys(e.mech for e in points)):
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
            private = mech != BASELINE
            marker = MARKERS[k % len(MARKERS)] if private else "*"
            container = ax.errorbar(
                x,
                y,
                xerr=xerr,
                yerr=yerr,
                color=color,
                marker=marker,
                markersize=6 if private else 13,
                linestyle="none",
                elinewidth=0.7,
                capsize=1.5,
                zorder=3,
            )
            for bars in container[2]:  # the intervals lighter than the points
                bars.set_alpha(0.4)
            handles.append(
                Line2D(
                    [],
                    [],
                    color=color,
                    marker=marker,
                    markersize=6 if private else 11,
                    linestyle="none",
                    label=mech if private else "non-private (none)",
                )
            )
            for e in mine:
                under = ringed.get((e.mech, e.param_label))
                text = _label(e)
                if under:
                    text += "\nrecommended for L = " + ", ".join(f"{x:g}" for x in under)
                labels.append((e.acc, e.worst_mi_ap, text, color))
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
        left = max(0.0, min([*xs, chance]) - 0.08)
        ax.set_xlim(left, min(1.0, max([*xs, chance]) * 1.08 + 0.05))
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
        place_labels(fig, ax, labels)
    return fig


#: Offsets (points) a label may take from its point, nearest first: beside the point, then
#: further out with a leader line.
_RADII = (9, 20, 34, 50, 70)
_DIRECTIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1), (0, 1), (0, -1), (1, 0), (-1, 0))


def place_labels(
    fig: Figure, ax, labels: Sequence[tuple[float, float, str, object]], *, fontsize=6.5
) -> None:
    """Annotate each (x, y, text, colour) of ``labels`` where its text overlaps no label placed
    before it, no point and stays inside ``ax``: the nearest free offset of :data:`_RADII` x
    :data:`_DIRECTIONS`, with a leader line beyond the first radius; a label that fits nowhere
    takes its nearest offset. Greedy, in the order of the points' height (top first)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not labels:
        return
    FigureCanvasAgg(fig)
    fig.draw_without_rendering()  # lay the figure out: the axes' final place
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    points = [ax.transData.transform((x, y)) for x, y, _, _ in labels]
    pad = 4.0 * fig.dpi / 72
    taken = [Bbox.from_extents(px - pad, py - pad, px + pad, py + pad) for px, py in points]
    order = sorted(range(len(labels)), key=lambda i: -labels[i][1])
    for i in order:
        x, y, text, color = labels[i]
        best = None
        for radius in _RADII:
            for dx, dy in _DIRECTIONS:
                ann = ax.annotate(
                    text,
                    (x, y),
                    xytext=(dx * radius, dy * radius * 0.7),
                    textcoords="offset points",
                    ha="left" if dx > 0 else "right" if dx < 0 else "center",
                    va="bottom" if dy > 0 else "top" if dy < 0 else "center",
                    fontsize=fontsize,
                    color=color,
                    zorder=4,
                    arrowprops=None
                    if radius == _RADII[0]
                    else {"arrowstyle": "-", "color": color, "lw": 0.5, "alpha": 0.7},
                )
                box = ann.get_window_extent(renderer)
                inside = (
                    box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0
                    and box.y1 <= frame.y1
                )  # fmt: skip
                if inside and not any(box.overlaps(t) for t in taken):
                    best = (ann, box)
                    break
                ann.remove()
            if best is not None:
                break
        if best is None:  # nowhere free: beside the point, on the side with room
            side = 1 if points[i][0] < (frame.x0 + frame.x1) / 2 else -1
            ann = ax.annotate(
                text,
                (x, y),
                xytext=(side * _RADII[0], _RADII[0] * 0.7),
                textcoords="offset points",
                ha="left" if side > 0 else "right",
                va="bottom",
                fontsize=fontsize,
                color=color,
                zorder=4,
            )
            best = (ann, ann.get_window_extent(renderer))
        taken.append(best[1])
