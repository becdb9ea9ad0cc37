"""The report's figures (paper 003, Figures 3-6). Each function returns a matplotlib Figure;
:func:`save_figure` writes it. Figures are built without pyplot, so no display or global figure
state is involved, and seaborn's style is applied through context managers only.

Input frames come from :mod:`audit.report`: one row per setting (and measure), with the mean of a
metric in ``<metric>`` and its 95 % t-interval half-width in ``<metric>_hw`` (NaN: no interval);
MI AP rows may also carry ``mi_ap_low`` / ``mi_ap_high`` (the 95 % interval: one seed's bootstrap,
or mean ± half-width over seeds) and ``mi_ap_null_q95`` (the blind attacker's 95 % quantile).

Every figure stays readable from one to twenty settings and from one attack result to every
attack (``tests/audit/report/test_figure_layout.py``): panels wrap in rows of at most
:data:`MAX_PANEL_COLUMNS`, no legend holds more than :data:`MAX_LEGEND_ENTRIES` entries (attack
results are grouped by family, their variants drawn as line styles), titles wrap to the figure's
width, and a log-scaled epsilon axis always labels at least two ticks (:func:`log_axis`).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from audit import io
from audit.config import MechanismName
from audit.report.summaries import WORST_CASE

#: What the point labels of each mechanism's line are: z is the DP noise multiplier, not a latent.
POINT_LABELS = {
    "cdp": "noise multiplier z",
    "cdp-termwise": "noise multiplier z",
    "ldp": "εᵢ per pixel cell",
    "vae-ldp": "noise bound σ",
    "dp2vae": "noise multiplier z",
}
EPSILON_LABEL = "privacy budget ε (log scale)"
ACC_LABEL = "accuracy on the real test set\n(classifier trained on generated data)"
MI_AP_LABEL = "attack MI AP (average precision;\nmembers positive, 0.5 = chance)"
PHI_LABEL = "φ (privacy-utility trade-off, 0..2)"
_PRIVATE = [m.value for m in MechanismName if m is not MechanismName.NONE]
_PALETTE = dict(zip(_PRIVATE, sns.color_palette("colorblind", len(_PRIVATE)), strict=True))
BASELINE_COLOR = "black"
#: The blind attacker's band: an MI AP at or below its 95 % quantile is at chance.
CHANCE_COLOR = "#e8d9b0"
WORST_CASE_LABEL = "held-out worst case (measured on the other half of D_atk)"
#: The reconstruction attack's results carry their distance alone as measure label (mse, ssim).
RECONSTRUCTION = "reconstruction"
#: Attack families in the order legends and panels list them; colours fixed per family.
FAMILIES = (RECONSTRUCTION, "monte-carlo", "latent-search", "likelihood", "domias")
#: Dark2's teal, orange, purple, pink and brown: apart from each other and from black.
_FAMILY_PALETTE = dict(
    zip(FAMILIES, ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#a6761d"), strict=True)
)
#: (line style, marker) of a family's k-th variant, the same in every figure.
VARIANT_STYLES = (
    ("-", "o"),
    ("--", "s"),
    (":", "^"),
    ("-.", "v"),
    ((0, (6, 2, 1, 2, 1, 2)), "D"),
    ((0, (1, 1)), "P"),
    ((0, (8, 3)), "X"),
    ((0, (3, 1, 3, 4)), "*"),
)
MAX_LEGEND_ENTRIES = 8
#: Panels per row: two keep every panel wider than a third of the figure.
MAX_PANEL_COLUMNS = 2
#: Point labels per line at most (spread evenly, the first and last always labelled).
MAX_POINT_LABELS = 6
#: Settings per mechanism named in an attack-curve legend (the rest drawn in between shades).
MAX_NAMED_SETTINGS = 5
PANEL_WIDTH, PANEL_HEIGHT = 5.2, 3.6
SINGLE_WIDTH = 7.5


def mech_color(mech: str) -> tuple[float, float, float] | str:
    """A fixed colour per mechanism (the same in every figure); black for the baseline."""
    if mech == MechanismName.NONE.value:
        return BASELINE_COLOR
    return _PALETTE.get(mech, (0.5, 0.5, 0.5))


def attack_family(measure: str) -> str:
    """The attack of a measure label (``attack:distance[:variant]``, or the reconstruction
    attack's bare distance); the worst case is its own family."""
    if measure == WORST_CASE:
        return WORST_CASE
    return measure.split(":")[0] if ":" in measure else RECONSTRUCTION


def variant_name(measure: str) -> str:
    """What tells a measure apart within its family: ``pca-l2:nearest``, ``mse``."""
    return measure.split(":", 1)[1] if ":" in measure else measure


def measure_label(measure: str) -> str:
    """A measure as a legend names it: the worst case spelled out, the reconstruction attack's
    bare distance with its attack (``reconstruction:mse``)."""
    if measure == WORST_CASE:
        return WORST_CASE_LABEL
    return measure if ":" in measure else f"{RECONSTRUCTION}:{measure}"


def family_color(family: str) -> tuple[float, float, float] | str:
    if family == WORST_CASE:
        return BASELINE_COLOR
    return _FAMILY_PALETTE.get(family, (0.45, 0.45, 0.45))


def family_order(measures: Sequence[str]) -> list[str]:
    """The families of ``measures``: the worst case, then :data:`FAMILIES`' order, then others."""
    found = {attack_family(m) for m in measures}
    known = [f for f in (WORST_CASE, *FAMILIES) if f in found]
    return known + sorted(found - set(known))


def variant_styles(measures: Sequence[str]) -> dict[str, tuple[object, str]]:
    """(line style, marker) per measure: a family's variants in sorted order take
    :data:`VARIANT_STYLES` in turn, so one variant has the same style in every figure."""
    styles = {}
    for family in family_order(measures):
        mine = sorted(m for m in set(measures) if attack_family(m) == family)
        for k, measure in enumerate(mine):
            styles[measure] = VARIANT_STYLES[k % len(VARIANT_STYLES)]
    return styles


@contextmanager
def report_style() -> Iterator[None]:
    with sns.axes_style("whitegrid"), sns.plotting_context("paper", font_scale=1.1):
        yield


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


# --- text, legends and axes that fit ----------------------------------------------------------


def wrap(text: str, width_in: float, fontsize: float) -> str:
    """``text`` broken into lines that fit ``width_in`` inches at ``fontsize`` points (an
    average glyph is taken as 0.55 of the font size wide)."""
    chars = max(12, int(width_in * 72 / (0.55 * fontsize)))
    return "\n".join(
        textwrap.fill(line, chars, break_on_hyphens=False, break_long_words=False)
        for line in text.splitlines()
    )


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


def _plain(value: float, _pos: object = None) -> str:
    """A tick or label number as one writes it: 0.05, 20, 500, 2e6."""
    if not math.isfinite(value):
        return "∞" if value > 0 else "n/a"
    if value == 0:
        return "0"
    if 1e-3 <= abs(value) < 1e5:
        return f"{value:g}"
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def short_number(value: float) -> str:
    """``value`` to two significant digits, as :func:`_plain` writes it: 19, 0.5, 8.2e8, ∞."""
    return _plain(float(f"{value:.2g}")) if math.isfinite(value) else _plain(value)


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
        axis.set_major_formatter(FuncFormatter(_plain))
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


def _mi_ap_err(points: pd.DataFrame) -> np.ndarray | None:
    low, high = mi_ap_interval(points)
    if np.isnan(low).all():
        return None
    y = points["mi_ap"].to_numpy(dtype=np.float64)
    return np.nan_to_num(np.stack([y - low, high - y]), nan=0.0).clip(min=0)


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
    labels = [f"{m} (points: {POINT_LABELS[m]})" if m in POINT_LABELS else m for m in mechs]
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


# --- accuracy and MI AP against epsilon -------------------------------------------------------


def _epsilon_panel(ax: Axes, points: pd.DataFrame, metric: str, refs: Sequence[RefLine]) -> None:
    """One line per mechanism of ``metric`` over mean epsilon, with t-interval error bars."""
    for mech, group in points.groupby("mech", sort=False):
        group = group.sort_values("epsilon")
        ax.errorbar(
            group["epsilon"],
            group[metric],
            yerr=_err(group[metric], group[f"{metric}_hw"], low=0, high=1),
            xerr=_err(group["epsilon"], group["epsilon_hw"], low=0),
            color=mech_color(mech),
            marker="o",
            markersize=4,
            capsize=3,
            linewidth=1.5,
        )
        _label_points(ax, group, metric, mech_color(mech))
    epsilon_axis(ax, points["epsilon"])
    if metric == "acc":
        ax.set_ylim(0, 1.02)
    _draw_refs(ax, refs)


def accuracy_vs_epsilon(points: pd.DataFrame, refs: Sequence[RefLine], *, title: str) -> Figure:
    """Classifier accuracy over epsilon, one line per mechanism (paper 003, Figure 3a/c/e).

    ``points``: one row per private setting with mech, param_label, epsilon(_hw), acc(_hw).
    """
    with report_style():
        fig = Figure(figsize=(SINGLE_WIDTH + 0.5, 5.4), layout="constrained")
        ax = fig.subplots()
        _epsilon_panel(ax, points, "acc", refs)
        ax.set_ylabel(ACC_LABEL)
        _finish(fig, f"{title} (bars: 95 % intervals over seeds)")
        handles, labels = _mech_handles(list(dict.fromkeys(points["mech"])))
        ref_handles, ref_labels = ax.get_legend_handles_labels()
        _legend_below(fig, handles + ref_handles, labels + ref_labels)
    return fig


def measure_order(measures: Sequence[str], first: str | None = None) -> list[str]:
    """Measures sorted by name, ``first`` (the worst case) leading where present."""
    rest = sorted(m for m in measures if m != first)
    return ([first] if first in measures else []) + rest


def family_measure_order(measures: Sequence[str]) -> list[str]:
    """Measures by family (:func:`family_order`: the worst case first), by name within one."""
    families = family_order(measures)
    return sorted(set(measures), key=lambda m: (families.index(attack_family(m)), m))


def _family_title(family: str, measures: Sequence[str]) -> str:
    if family == WORST_CASE:
        return WORST_CASE_LABEL
    if len(measures) == 1:
        return (
            f"attack: {measures[0]}"
            if family != RECONSTRUCTION
            else f"reconstruction, {measures[0].upper()}"
        )
    return f"{family} ({len(measures)} variants)"


def mi_ap_vs_epsilon(
    points: pd.DataFrame,
    refs: dict[str, Sequence[RefLine]],
    *,
    title: str,
    first: str | None = None,
) -> Figure:
    """MI AP over epsilon, one panel per attack family (the worst case, ``first``, leads), one
    colour per mechanism, a family's variants as line styles named in the panel; 95 % intervals
    as error bars, the blind attacker's band shaded, the non-private value of each variant as a
    black line in its style (Figure 3b/d/f). Panels wrap in rows of :data:`MAX_PANEL_COLUMNS`.

    ``points``: one row per (private setting, measure) with mech, distance (the measure),
    param_label, epsilon(_hw), mi_ap(_hw) and, where known, mi_ap_low / mi_ap_high and
    mi_ap_null_q95; ``refs``: the reference lines of each measure (the non-private value).
    """
    measures = measure_order(list(points["distance"].unique()), first)
    families = family_order(measures)
    styles = variant_styles(measures)
    mechs = list(dict.fromkeys(points["mech"]))
    with report_style():
        fig = _figure(len(families), extra_height=1.8)
        axes = _panel_grid(fig, len(families))
        width = _panel_width(fig, len(families))
        for ax, family in zip(axes, families, strict=True):
            mine = [m for m in measures if attack_family(m) == family]
            panel = points[points["distance"].isin(mine)]
            _chance_band(ax, chance_level(panel))
            bars = _Intervals()
            for k, measure in enumerate(mine):
                linestyle, marker = styles[measure]
                for mech, group in panel[panel["distance"] == measure].groupby("mech", sort=False):
                    group = _dodge(group.sort_values("epsilon"), k, len(mine))
                    ax.plot(
                        group["epsilon"],
                        group["mi_ap"],
                        color=mech_color(mech),
                        linestyle=linestyle,
                        marker=marker,
                        markersize=4,
                        linewidth=1.4,
                    )
                    bars.add(group, mech_color(mech))
                    if family == families[0]:  # the leading panel names the settings
                        _label_points(ax, group, "mi_ap", mech_color(mech))
                for ref in refs.get(measure, ()):
                    single = len(mine) == 1
                    ax.axhline(ref.y, color=ref.color, linestyle=linestyle, linewidth=1.0)
                    if single and math.isfinite(ref.half_width):
                        ax.axhspan(
                            ref.y - ref.half_width,
                            ref.y + ref.half_width,
                            color=ref.color,
                            alpha=0.08,
                        )
            bars.draw(ax)
            if len(mine) > 1:
                handles = [
                    Line2D([], [], color="dimgray", linestyle=styles[m][0], marker=styles[m][1])
                    for m in mine
                ]
                ax.legend(
                    handles,
                    [variant_name(m) for m in mine],
                    fontsize=6.5,
                    loc="upper left",
                    framealpha=0.85,
                    handlelength=3,
                )
            epsilon_axis(ax, panel["epsilon"])
            _panel_title(ax, _family_title(family, mine), width)
        low, _ = mi_ap_interval(points)
        low = np.nanmin(np.append(low, points["mi_ap"].to_numpy(dtype=np.float64)))
        axes[0].set_ylim(max(0.0, min(0.4, float(low) - 0.02)), 1.02)  # MI AP lies in [0, 1]
        for ax in axes[::MAX_PANEL_COLUMNS]:
            ax.set_ylabel(MI_AP_LABEL)
        _finish(fig, title)
        handles, labels = _mech_handles(mechs)
        if any(refs.get(m) for m in measures):
            handles.append(Line2D([], [], color=BASELINE_COLOR, linewidth=1.0))
            labels.append("non-private (none), in the variant's style")
        chance, chance_label = _chance_handle(chance_level(points))
        _legend_below(fig, [*handles, chance], [*labels, chance_label + "; bars: 95 % intervals"])
    return fig


def mi_ap_by_attack(points: pd.DataFrame, *, title: str, worst: str) -> Figure:
    """MI AP over epsilon, one panel per private mechanism, one line per measure (attack,
    distance, variant) coloured by attack family with the family's variants as line styles, the
    ``worst`` measure (the held-out worst case: picked on one half of D_atk, measured on the
    other, so it may sit below the attacks' own values) thick and black with its 95 % interval
    shaded: which attack leads where, at a glance.

    ``points``: as :func:`mi_ap_vs_epsilon`'s.
    """
    mechs = list(dict.fromkeys(points["mech"]))
    measures = measure_order(list(points["distance"].unique()), worst)
    families = [f for f in family_order(measures) if f != WORST_CASE]
    styles = variant_styles(measures)
    attacks = points[points["distance"] != worst]
    q_attack = chance_level(attacks)
    q_worst = chance_level(points[points["distance"] == worst])
    with report_style():
        fig = _figure(len(mechs), extra_height=1.8)
        axes = _panel_grid(fig, len(mechs))
        for ax, mech in zip(axes, mechs, strict=True):
            if math.isfinite(q_worst) and q_worst > q_attack:
                ax.axhspan(0, q_worst, color="#f3ead2", alpha=0.6, zorder=0, linewidth=0)
            _chance_band(ax, q_attack)
            for measure in measures:
                group = points[(points["mech"] == mech) & (points["distance"] == measure)]
                if group.empty:
                    continue
                group = group.sort_values("epsilon")
                if measure == worst:
                    low, high = mi_ap_interval(group)
                    if np.isfinite(low).any():
                        ax.fill_between(
                            group["epsilon"], low, high, color="black", alpha=0.12, linewidth=0
                        )
                    style = {"color": "black", "linewidth": 3, "linestyle": "-", "zorder": 3}
                    marker = "o"
                else:
                    linestyle, marker = styles[measure]
                    style = {
                        "color": family_color(attack_family(measure)),
                        "linewidth": 1.3,
                        "linestyle": linestyle,
                    }
                ax.plot(
                    group["epsilon"],
                    group["mi_ap"],
                    marker=marker,
                    markersize=3.5,
                    label=measure,
                    **style,
                )
            epsilon_axis(ax, points.loc[points["mech"] == mech, "epsilon"])
            ax.set_title(mech)
        axes[0].set_ylim(0.35, 1.02)
        for ax in axes[::MAX_PANEL_COLUMNS]:
            ax.set_ylabel(MI_AP_LABEL)
        handles: list[object] = []
        labels: list[str] = []
        for family in families:
            n = sum(attack_family(m) == family for m in measures)
            handles.append(Line2D([], [], color=family_color(family), linewidth=1.5))
            labels.append(family if n == 1 else f"{family} ({n} variants)")
        if worst in measures:
            handles.append(Line2D([], [], color="black", linewidth=3))
            labels.append(WORST_CASE_LABEL + ", 95 % interval shaded")
        chance, chance_label = _chance_handle(q_attack, " (one attack)")
        handles.append(chance)
        labels.append(chance_label)
        if math.isfinite(q_worst) and q_worst > q_attack:
            handles.append(Patch(color="#f3ead2", alpha=0.6))
            labels.append(f"at chance (held-out worst case, half the records): ≤ {q_worst:.3f}")
        most = max((sum(attack_family(m) == f for m in measures) for f in families), default=0)
        if most > 1:
            ordinal = ("1st", "2nd", "3rd")
            fig.legend(
                [
                    Line2D([], [], color="dimgray", linestyle=s, marker=mk)
                    for s, mk in VARIANT_STYLES[:most]
                ],
                [ordinal[k] if k < 3 else f"{k + 1}th" for k in range(min(most, 8))],
                loc="outside right center",
                fontsize=7,
                title="variant of a\nfamily (named in\nthe MI AP vs ε\nfigure's panels)",
                title_fontsize=7,
                frameon=False,
                handlelength=3,
            )
        _legend_below(fig, handles, labels)
        _finish(fig, title)
    return fig


def phi_bars(points: pd.DataFrame, *, title: str) -> Figure:
    """phi per mechanism and setting, one bar per measure (paper 003, Figure 5): the report
    passes the held-out worst case alone where the run has one. Settings are ordered by
    decreasing epsilon (increasing noise) and labelled with their epsilon; a setting whose phi
    is empty says "n/a". Panels wrap; a mechanism with many settings gets the full width.

    ``points``: one row per (private setting, measure) with mech, param_label, distance,
    epsilon and phi(_hw).
    """
    mechs = list(dict.fromkeys(points["mech"]))
    measures = measure_order(list(points["distance"].unique()), WORST_CASE)
    by_family = len(measures) > MAX_LEGEND_ENTRIES - 2
    colors = {
        m: family_color(attack_family(m))
        if by_family
        else (BASELINE_COLOR if m == WORST_CASE else c)
        for m, c in zip(measures, sns.color_palette("deep", len(measures)), strict=True)
    }
    most = int(points.groupby("mech")["param_label"].nunique().max())
    columns = 1 if most > 8 else MAX_PANEL_COLUMNS
    width = 0.8 / len(measures)
    with report_style():
        fig = _figure(len(mechs), columns=columns, extra_height=1.8)
        axes = _panel_grid(fig, len(mechs), columns=columns)
        for ax, mech in zip(axes, mechs, strict=True):
            group = points[points["mech"] == mech].sort_values("epsilon", ascending=False)
            labels = list(dict.fromkeys(group["param_label"]))
            eps = group.drop_duplicates("param_label").set_index("param_label")["epsilon"]
            for i, measure in enumerate(measures):
                sub = group[group["distance"] == measure].set_index("param_label").reindex(labels)
                x = np.arange(len(labels)) + (i - (len(measures) - 1) / 2) * width
                ax.bar(
                    x,
                    sub["phi"],
                    width,
                    yerr=_err(sub["phi"], sub["phi_hw"], low=0, high=2),
                    capsize=2,
                    color=mech_color(mech) if len(measures) == 1 else colors[measure],
                    alpha=0.85,
                )
                for xi, value in zip(x, sub["phi"], strict=True):
                    if not math.isfinite(value) and len(measures) == 1:
                        ax.text(xi, 0.03, "n/a", ha="center", va="bottom", fontsize=6)
            ax.axhline(1.0, color=BASELINE_COLOR, linestyle=":", linewidth=1)
            ticks = [f"{p}\nε={short_number(eps[p])}" for p in labels]
            ax.set_xticks(
                np.arange(len(labels)), ticks, fontsize=7, rotation=90 if len(labels) > 5 else 0
            )
            ax.set_title(mech)
            ax.set_xlabel("setting (more noise →)")
            top = float(np.nanmax(np.append(points["phi"].to_numpy(dtype=np.float64), 2.0)))
            ax.set_ylim(0, top + 0.05)
        for ax in axes[::columns]:
            ax.set_ylabel(PHI_LABEL)
        _finish(fig, title)
        if by_family:
            names = list(dict.fromkeys(attack_family(m) for m in measures))
            handles = [Patch(color=family_color(f)) for f in names]
            names = [
                WORST_CASE_LABEL if f == WORST_CASE else f"{f} (each variant a bar)" for f in names
            ]
        else:
            handles = [
                Patch(color="dimgray" if len(measures) == 1 else colors[m]) for m in measures
            ]
            names = [WORST_CASE_LABEL if m == WORST_CASE else f"attack: {m}" for m in measures]
        handles.append(Line2D([], [], color=BASELINE_COLOR, linestyle=":"))
        names.append("φ = 1 (equal relative losses)")
        _legend_below(fig, handles, names)
    return fig


# --- attack curves ----------------------------------------------------------------------------


def _band(ax: Axes, band: CurveBand, *, label: str, color: object, linestyle: object = "-") -> None:
    ax.plot(band.x, band.y, color=color, linestyle=linestyle, linewidth=1.4, label=label)
    if band.n > 1:
        ax.fill_between(  # rates and precisions lie in [0, 1]; so does the drawn band
            band.x,
            np.clip(band.y - band.half_width, 0, 1),
            np.clip(band.y + band.half_width, 0, 1),
            color=color,
            alpha=0.15,
            linewidth=0,
        )


def _winner_styles(curves: Sequence[SettingCurves]) -> dict[str, object]:
    """A line style per winning measure of one row (by family past :data:`VARIANT_STYLES`)."""
    winners = list(dict.fromkeys(c.winner for c in curves if c.winner))
    if len(winners) > len(VARIANT_STYLES) - 2:
        families = list(dict.fromkeys(attack_family(w) for w in winners))
        return {w: VARIANT_STYLES[families.index(attack_family(w))][0] for w in winners}
    return {w: VARIANT_STYLES[k][0] for k, w in enumerate(winners)}


def attack_curves(
    rows: dict[str, list[SettingCurves]], baseline: SettingCurves | None, *, title: str
) -> Figure:
    """Precision-recall (left) and ROC (right) curves of the attack, one row per mechanism.

    Each setting is one line (mean over seeds, 95 % band), darker for less noise; at most
    :data:`MAX_NAMED_SETTINGS` of a row's settings are named (spread from least to most noise).
    Where the curves are of each setting's winning attack (``SettingCurves.winner``), the line
    style says which attack won, named in the precision-recall panel. The non-private baseline
    is repeated dashed in every row. Chance: precision 0.5 on a balanced D_atk, the ROC diagonal.
    """
    names = list(rows) or [MechanismName.NONE.value]
    with report_style():
        fig = Figure(figsize=(11, PANEL_HEIGHT * len(names) + 1.0), layout="constrained")
        axes = np.atleast_2d(fig.subplots(len(names), 2, squeeze=False))
        for (ax_pr, ax_roc), mech in zip(axes, names, strict=True):
            settings = rows.get(mech, [])
            shades = sns.light_palette(mech_color(mech), n_colors=len(settings) + 2)[2:][::-1]
            everyone = [*settings, *([baseline] if baseline is not None else [])]
            styles = _winner_styles(everyone)
            named = set(_spread(len(settings), MAX_NAMED_SETTINGS))
            for i, (setting, color) in enumerate(zip(settings, shades, strict=True)):
                label = setting.label if i in named else "_" + setting.label
                style = styles.get(setting.winner, "-")
                _band(ax_pr, setting.pr, label=label, color=color, linestyle=style)
                _band(ax_roc, setting.roc, label=label, color=color, linestyle=style)
            if baseline is not None:
                for ax, band in ((ax_pr, baseline.pr), (ax_roc, baseline.roc)):
                    style = styles.get(baseline.winner, "--") if styles else "--"
                    _band(ax, band, label=baseline.label, color=BASELINE_COLOR, linestyle=style)
            ax_pr.axhline(0.5, color="grey", linestyle=":", linewidth=1)
            ax_roc.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1, label="chance")
            ax_pr.set(
                xlabel="recall (fraction of members found)",
                ylabel="precision",
                xlim=(0, 1),
                ylim=(0, 1.02),
                title=f"{mech}: precision-recall",
            )
            ax_roc.set(
                xlabel="false positive rate (non-members flagged)",
                ylabel="true positive rate (members found)",
                xlim=(0, 1),
                ylim=(0, 1.02),
                title=f"{mech}: ROC",
            )
            thinned = len(named) < len(settings)
            ax_roc.legend(
                loc="lower right",
                fontsize=7,
                title=f"{len(named)} of {len(settings)} settings named;\ndarker = less noise"
                if thinned
                else None,
                title_fontsize=7,
            )
            if styles:
                by_family = len(set(map(str, styles.values()))) < len(styles)
                keys: dict[str, object] = {}
                for winner, style in styles.items():
                    keys.setdefault(
                        attack_family(winner) if by_family else measure_label(winner), style
                    )
                ax_pr.legend(
                    [Line2D([], [], color="dimgray", linestyle=s) for s in keys.values()],
                    list(keys),
                    loc="lower left",
                    fontsize=7,
                    title="line style: the attack that won",
                    title_fontsize=7,
                    handlelength=3,
                )
        _finish(fig, title)
    return fig


def image_grid(
    rows: Sequence[tuple[str, np.ndarray]], *, column_titles: Sequence[str], title: str
) -> Figure:
    """A grid of images, one labelled row per entry: arrays (K, C, H, W) in [0, 1] (Figure 6)."""
    n_cols = max(len(images) for _, images in rows)
    with report_style(), sns.axes_style("white"):
        fig = Figure(figsize=(1.1 * n_cols + 1.6, 1.15 * len(rows) + 0.8), layout="constrained")
        axes = np.atleast_2d(fig.subplots(len(rows), n_cols, squeeze=False))
        for r, (label, images) in enumerate(rows):
            for c in range(n_cols):
                ax = axes[r, c]
                ax.set_xticks([])
                ax.set_yticks([])
                if c < len(images):
                    _show(ax, images[c])
                else:
                    ax.set_axis_off()
                if r == 0 and c < len(column_titles):
                    ax.set_title(column_titles[c], fontsize=8)
            axes[r, 0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=8)
        fig.suptitle(title)
    return fig


#: y-range of the series panels: the data's [-1, 1] (D_train's scale) with room for the records
#: of D_test that fall slightly outside it.
SERIES_YLIM = (-1.25, 1.25)


def series_grid(
    rows: Sequence[tuple[str, np.ndarray]], *, column_titles: Sequence[str], title: str
) -> Figure:
    """A grid of sensor series, one labelled row per entry: arrays (K, T, F) scaled to about
    [-1, 1]; each panel is one record, one line per channel (the same colour in every panel),
    on a shared time axis and y-range, so that rows (noise levels) compare at a glance."""
    n_cols = max(len(series) for _, series in rows)
    n_channels = max(series.shape[2] for _, series in rows if len(series))
    colors = sns.color_palette("husl", n_channels)
    with report_style():
        fig = Figure(figsize=(2.0 * n_cols + 1.6, 1.2 * len(rows) + 1.3), layout="constrained")
        axes = fig.subplots(len(rows), n_cols, squeeze=False, sharex=True, sharey=True)
        for r, (label, series) in enumerate(rows):
            for c in range(n_cols):
                ax = axes[r, c]
                if c < len(series):
                    for f in range(series.shape[2]):
                        ax.plot(series[c][:, f], color=colors[f], linewidth=0.7)
                else:
                    ax.set_axis_off()
                ax.set_ylim(*SERIES_YLIM)
                ax.tick_params(labelsize=6)
                if r == 0 and c < len(column_titles):
                    ax.set_title(column_titles[c], fontsize=8)
            axes[r, 0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=8)
        for ax in axes[-1]:
            ax.set_xlabel("time step", fontsize=7)
        handles = [
            Line2D([], [], color=colors[f], label=f"channel {f + 1}") for f in range(n_channels)
        ]
        fig.legend(handles=handles, loc="outside lower center", ncol=min(n_channels, 6), fontsize=7)
        fig.suptitle(title)
    return fig


def _show(ax: Axes, image: np.ndarray) -> None:
    if image.shape[0] == 1:
        ax.imshow(image[0], cmap="gray", vmin=0, vmax=1)
    else:
        ax.imshow(np.clip(image.transpose(1, 2, 0), 0, 1))


def save_figure(fig: Figure, out_dir: Path, stem: str, formats: Sequence[str]) -> list[Path]:
    """Write ``fig`` as ``out_dir/stem.<format>`` for each format, atomically, with no creation
    date in the file (a rewritten report's figures are the same bytes); returns the paths."""
    paths = []
    for fmt in formats:
        path = Path(out_dir) / f"{stem}.{fmt}"
        metadata = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}.get(fmt, {})
        io.write_with(
            path,
            lambda tmp, fmt=fmt, metadata=metadata: fig.savefig(
                tmp, format=fmt, dpi=150, metadata=metadata
            ),
        )
        paths.append(path)
    return paths
