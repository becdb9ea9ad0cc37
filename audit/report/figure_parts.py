"""Parts the report's figures share: reference lines and bands, epsilon axes, MI AP intervals
and chance bands, point labels, legends and panel grids."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from audit.report.figure_style import (
    BASELINE_COLOR,
    CHANCE_COLOR,
    EPSILON_LABEL,
    MAX_PANEL_COLUMNS,
    MAX_POINT_LABELS,
    PANEL_HEIGHT,
    PANEL_WIDTH,
    SINGLE_WIDTH,
    mech_color,
    plain_number,
    point_label,
    wrap,
)


@dataclass(frozen=True)
class RefLine:
    """A horizontal reference: ``y`` with an optional 95 % half-width drawn as a band, and its
    value written on the line unless ``show_value`` is False (when the label says it)."""

    y: float
    label: str
    linestyle: object = "--"
    color: str = BASELINE_COLOR
    half_width: float = math.nan
    show_value: bool = True


@dataclass(frozen=True)
class CurveBand:
    """A curve averaged over seeds: x grid (G,), mean y (G,), 95 % half-width (G,), n seeds."""

    x: np.ndarray
    y: np.ndarray
    half_width: np.ndarray
    n: int


@dataclass(frozen=True)
class SettingCurves:
    """The attack curves of one setting: label, mechanism, one band per curve kind, and which
    attack result they are of (``winner``: the measure that won the held-out worst case; empty
    where the figure draws one attack)."""

    label: str
    mech: str
    pr: CurveBand
    roc: CurveBand
    winner: str = ""


def _finish(fig: Figure, title: str, fontsize: float = 11) -> None:
    """The figure's title, wrapped to its width; and its data artists (lines, bands, bars:
    clipped to their axes anyway) left out of the layout, which then only measures text and
    frames (many error bars otherwise make it slow)."""
    fig.suptitle(wrap(title, fig.get_figwidth() * 0.95, fontsize), fontsize=fontsize)
    for ax in fig.axes:
        for artist in (*ax.lines, *ax.collections, *ax.patches):
            artist.set_in_layout(False)


def _panel_title(ax: Axes, title: str, width_in: float, fontsize: float = 9) -> None:
    ax.set_title(wrap(title, width_in * 0.95, fontsize), fontsize=fontsize)


def _legend_below(
    fig: Figure,
    handles: Sequence[object],
    labels: Sequence[str],
    *,
    fontsize: float = 8,
    title: str | None = None,
) -> None:
    """A figure legend under the panels, in as many columns as its widest entry allows."""
    if not handles:
        return
    ncol = _legend_columns(labels, fig.get_figwidth() * 0.95 * 72, fontsize)
    fig.legend(
        list(handles),
        list(labels),
        loc="outside lower center",
        ncol=ncol,
        frameon=False,
        fontsize=fontsize,
        title=title,
        title_fontsize=fontsize,
    )


def _legend_columns(labels: Sequence[str], width_pt: float, fontsize: float) -> int:
    """The most columns (filled top to bottom, as matplotlib does) whose widths add up to at
    most ``width_pt``: an entry is its handle and text (glyphs taken as 0.6 em wide)."""
    widths = [len(s) * 0.6 * fontsize + 4.5 * fontsize for s in labels]
    for ncol in range(len(labels), 1, -1):
        rows = math.ceil(len(labels) / ncol)
        columns = [max(widths[i : i + rows]) for i in range(0, len(labels), rows)]
        if sum(columns) <= width_pt:
            return ncol
    return 1


def log_axis(ax: Axes, values: Sequence[float] | pd.Series, *, which: str = "x") -> bool:
    """Log-scale one axis of ``ax`` around ``values`` (finite, positive ones) with readable ticks:
    a fifth of a decade of room each side (at least 0.8 decade in all), labelled powers of ten
    where two or more fit, else labelled 1-2-5 steps, so that the axis always shows
    at least two labelled ticks, never crowded ones. False (nothing set) without such values."""
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[np.isfinite(arr) & (arr > 0)]
    if arr.size == 0:
        return False
    lo, hi = math.log10(arr.min()) - 0.2, math.log10(arr.max()) + 0.2
    if hi - lo < 0.8:
        mid = (lo + hi) / 2
        lo, hi = mid - 0.4, mid + 0.4
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    (ax.set_xlim if which == "x" else ax.set_ylim)(10**lo, 10**hi)
    if math.floor(hi) - math.ceil(lo) + 1 >= 2:  # two powers of ten or more inside
        axis.set_major_locator(LogLocator(base=10, numticks=6))
    else:
        # 1-2-5 steps lie at most 0.4 decade apart: two or more inside the 0.8 decade or more
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=50))
        axis.set_major_formatter(FuncFormatter(plain_number))
    axis.set_minor_locator(NullLocator())  # unlabelled minor ticks: cost, no information
    return True


def epsilon_axis(ax: Axes, epsilon: Sequence[float] | pd.Series) -> None:
    """The x axis of an epsilon figure: :func:`log_axis`, labelled as log scale only if it is."""
    if log_axis(ax, epsilon):
        ax.set_xlabel(EPSILON_LABEL)
    else:
        ax.set_xlabel("privacy budget ε (none finite)")


def _spread(n: int, k: int) -> list[int]:
    """``min(n, k)`` indices of ``range(n)`` spread evenly, the first and the last included."""
    if n <= k:
        return list(range(n))
    return sorted({int(round(i)) for i in np.linspace(0, n - 1, k)})


def _err(
    values: pd.Series, half_widths: pd.Series, *, low: float = -np.inf, high: float = np.inf
) -> np.ndarray | None:
    """Error bars (2, N) for matplotlib: the 95 % half-widths, cut at the metric's range
    [low, high]; None when no value has an interval (a single seed)."""
    hw = half_widths.to_numpy(dtype=np.float64)
    if np.isnan(hw).all():
        return None
    y, hw = values.to_numpy(dtype=np.float64), np.nan_to_num(hw, nan=0.0)
    return np.stack([y - np.maximum(y - hw, low), np.minimum(y + hw, high) - y])


def mi_ap_interval(points: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of each row's MI AP: ``mi_ap_low`` / ``mi_ap_high`` where given, else the mean
    ± ``mi_ap_hw``; NaN where neither is known. Cut to [0, 1]."""
    y = points["mi_ap"].to_numpy(dtype=np.float64)
    hw = points.get("mi_ap_hw", pd.Series(np.nan, index=points.index)).to_numpy(np.float64)
    low, high = y - hw, y + hw
    if "mi_ap_low" in points and "mi_ap_high" in points:
        given_low = points["mi_ap_low"].to_numpy(dtype=np.float64)
        given_high = points["mi_ap_high"].to_numpy(dtype=np.float64)
        known = np.isfinite(given_low) & np.isfinite(given_high)
        low, high = np.where(known, given_low, low), np.where(known, given_high, high)
    return np.clip(low, 0, 1), np.clip(high, 0, 1)


#: How far apart (in decades of epsilon) the variants of one panel are drawn, so that their
#: intervals at the same setting do not hide each other.
DODGE_DECADES = 0.02


def _dodge(group: pd.DataFrame, k: int, n: int) -> pd.DataFrame:
    """``group`` with its epsilon moved by the k-th of n small steps (a fraction of a decade)."""
    if n < 2:
        return group
    factor = 10 ** (DODGE_DECADES * (k - (n - 1) / 2))
    return group.assign(epsilon=group["epsilon"].astype(float) * factor)


class _Intervals:
    """The 95 % intervals of many lines of one panel, drawn as one collection of vertical bars
    (MI AP) and one of horizontal bars (epsilon over seeds): dozens of ``errorbar`` calls make a
    figure of every attack slow to lay out and draw."""

    def __init__(self) -> None:
        self.vertical: list[tuple[float, float, float, object]] = []
        self.horizontal: list[tuple[float, float, float, object]] = []

    def add(self, group: pd.DataFrame, color: object) -> None:
        low, high = mi_ap_interval(group)
        eps = group["epsilon"].to_numpy(dtype=np.float64)
        for x, lo, hi in zip(eps, low, high, strict=True):
            if np.isfinite(lo) and np.isfinite(hi):
                self.vertical.append((x, lo, hi, color))
        if "epsilon_hw" in group:
            hw = group["epsilon_hw"].to_numpy(dtype=np.float64)
            for x, y, h in zip(eps, group["mi_ap"].to_numpy(dtype=np.float64), hw, strict=True):
                if np.isfinite(h) and h > 0:
                    self.horizontal.append((y, max(x - h, x * 1e-3), x + h, color))

    def draw(self, ax: Axes) -> None:
        for bars, draw in ((self.vertical, ax.vlines), (self.horizontal, ax.hlines)):
            if bars:
                at, lo, hi, colors = zip(*bars, strict=True)
                draw(at, lo, hi, colors=list(colors), linewidth=1.2, alpha=0.8)


def chance_level(points: pd.DataFrame) -> float:
    """The largest blind-attacker 95 % quantile among ``points`` (NaN where none is known)."""
    if "mi_ap_null_q95" not in points:
        return math.nan
    q95 = points["mi_ap_null_q95"].astype(float)
    return float(q95.max()) if q95.notna().any() else math.nan


def _chance_band(ax: Axes, q95: float, *, color: str = CHANCE_COLOR, hatch=None) -> None:
    """Shade MI AP up to the blind attacker's 95 % quantile (a value there is at chance); the
    level 0.5 dotted where the quantile is unknown."""
    if math.isfinite(q95):
        ax.axhspan(0, q95, color=color, alpha=0.55, zorder=0, linewidth=0, hatch=hatch)
    else:
        ax.axhline(0.5, color="grey", linestyle=":", linewidth=1, zorder=0)


def _chance_handle(q95: float, what: str = "") -> tuple[Patch | Line2D, str]:
    if math.isfinite(q95):
        label = f"at chance{what}: ≤ the blind attacker's 95 % quantile ({q95:.3f})"
        return Patch(color=CHANCE_COLOR, alpha=0.55), label
    return Line2D([], [], color="grey", linestyle=":"), "chance (0.5)"


def _draw_refs(ax: Axes, refs: Sequence[RefLine]) -> None:
    """Horizontal lines, each with its value written at the panel's right end; values of lines
    close together (within 4 % of the y range) go alternately above and below their line, so
    that they do not print over each other."""
    low, high = ax.get_ylim()
    last_y, below = -math.inf, False
    for ref in sorted(refs, key=lambda r: r.y if math.isfinite(r.y) else math.inf):
        if not math.isfinite(ref.y):
            continue
        ax.axhline(ref.y, linestyle=ref.linestyle, color=ref.color, linewidth=1.2, label=ref.label)
        text = f"{ref.y:.3f}"
        if math.isfinite(ref.half_width):
            ax.axhspan(ref.y - ref.half_width, ref.y + ref.half_width, color=ref.color, alpha=0.08)
            text += f" ± {ref.half_width:.3f}"
        if ref.show_value:
            below = not below if ref.y - last_y < 0.04 * (high - low) else False
            last_y = ref.y
            ax.annotate(
                text,
                xy=(0.99, ref.y),
                xycoords=("axes fraction", "data"),
                xytext=(0, -2 if below else 2),
                textcoords="offset points",
                ha="right",
                va="top" if below else "bottom",
                fontsize=7,
                color=ref.color,
            )


def _label_points(ax: Axes, group: pd.DataFrame, metric: str, color: object) -> None:
    """Parameter labels beside at most :data:`MAX_POINT_LABELS` points of a line (spread along
    it), alternately above and below, and left of the point for the largest epsilon, so that
    neighbours and the frame do not collide."""
    group = group.reset_index(drop=True)
    largest = group["epsilon"].max()
    for n, i in enumerate(_spread(len(group), MAX_POINT_LABELS)):
        row = group.iloc[i]
        y = row[metric]
        if not (math.isfinite(row["epsilon"]) and math.isfinite(y)):
            continue
        left = row["epsilon"] == largest and len(group) > 1
        up = n % 2 == 0
        ax.annotate(
            row["param_label"],
            (row["epsilon"], y),
            fontsize=7,
            xytext=(-6 if left else 6, 6 if up else -6),
            textcoords="offset points",
            ha="right" if left else "left",
            va="bottom" if up else "top",
            color=color,
        )


def _mech_handles(mechs: Sequence[str]) -> tuple[list[Line2D], list[str]]:
    handles = [Line2D([], [], color=mech_color(m), marker="o", markersize=4) for m in mechs]
    labels = [f"{m} (points: {point_label(m)})" if point_label(m) else m for m in mechs]
    return handles, labels


def _grid(n: int, *, columns: int = MAX_PANEL_COLUMNS) -> tuple[int, int]:
    cols = max(1, min(n, columns))
    return cols, math.ceil(n / cols)


def _figure(n: int, *, columns: int = MAX_PANEL_COLUMNS, extra_height: float = 1.6) -> Figure:
    """A constrained-layout figure for ``n`` panels in rows of ``columns``."""
    cols, rows = _grid(n, columns=columns)
    width = SINGLE_WIDTH if cols == 1 else PANEL_WIDTH * cols + 0.6
    return Figure(figsize=(width, PANEL_HEIGHT * rows + extra_height), layout="constrained")


def _panel_grid(
    fig: Figure, n: int, *, columns: int = MAX_PANEL_COLUMNS, sharey: bool = True
) -> np.ndarray:
    """``n`` axes in rows of at most ``columns``, y shared; the grid's unused axes are hidden."""
    cols, rows = _grid(n, columns=columns)
    axes = np.atleast_1d(fig.subplots(rows, cols, sharey=sharey)).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return axes[:n]


def _panel_width(fig: Figure, n: int, columns: int = MAX_PANEL_COLUMNS) -> float:
    return fig.get_figwidth() / _grid(n, columns=columns)[0]
