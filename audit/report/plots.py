"""The report's figures (paper 003, Figures 3-6). Each function returns a matplotlib Figure;
:func:`save_figure` writes it. Figures are built without pyplot, so no display or global figure
state is involved, and seaborn's style is applied through context managers only.

Input frames come from :mod:`audit.report`: one row per setting (and distance), with the mean of a
metric in ``<metric>`` and its 95 % t-interval half-width in ``<metric>_hw`` (NaN: no interval).
"""

from __future__ import annotations

import math
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

from audit import io
from audit.config import MechanismName

#: What the point labels of each mechanism's line are: z is the DP noise multiplier, not a latent.
POINT_LABELS = {
    "cdp": "noise multiplier z",
    "cdp-termwise": "noise multiplier z",
    "ldp": "εᵢ per pixel cell",
    "vae-ldp": "noise bound σ",
}
EPSILON_LABEL = "privacy budget ε (log scale)"
ACC_LABEL = "accuracy on the real test set (fraction)\nclassifier trained on generated data"
MI_AP_LABEL = "attack MI AP (average precision;\nmembers positive, 0.5 = chance)"
PHI_LABEL = "φ (paper 003, Eq. 2; 0..2)"
_PRIVATE = [m.value for m in MechanismName if m is not MechanismName.NONE]
_PALETTE = dict(zip(_PRIVATE, sns.color_palette("colorblind", len(_PRIVATE)), strict=True))
BASELINE_COLOR = "black"


def mech_color(mech: str) -> tuple[float, float, float] | str:
    """A fixed colour per mechanism (the same in every figure); black for the baseline."""
    if mech == MechanismName.NONE.value:
        return BASELINE_COLOR
    return _PALETTE.get(mech, (0.5, 0.5, 0.5))


@contextmanager
def _style() -> Iterator[None]:
    with sns.axes_style("whitegrid"), sns.plotting_context("paper", font_scale=1.1):
        yield


@dataclass(frozen=True)
class RefLine:
    """A horizontal reference: ``y`` with an optional 95 % half-width drawn as a band, and its
    value written on the line unless ``show_value`` is False (when the label says it)."""

    y: float
    label: str
    linestyle: str = "--"
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
    """The attack curves of one setting: label, mechanism, and one band per curve kind."""

    label: str
    mech: str
    pr: CurveBand
    roc: CurveBand


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
            label=f"{mech} (labels: {POINT_LABELS[mech]})" if mech in POINT_LABELS else mech,
        )
        _label_points(ax, group, metric, mech_color(mech))
    ax.set_xscale("log")
    _pad_log_x(ax, points["epsilon"])
    if metric == "acc":
        ax.set_ylim(0, 1.02)
    _draw_refs(ax, refs)
    ax.set_xlabel(EPSILON_LABEL)


def _label_points(ax: Axes, group: pd.DataFrame, metric: str, color: object) -> None:
    """Parameter labels beside the points, alternately above and below along the line, and
    left of the point for the largest epsilon, so neighbours and the frame do not collide."""
    largest = group["epsilon"].max()
    for i, row in enumerate(group.itertuples(index=False)):
        left = row.epsilon == largest and len(group) > 1
        up = i % 2 == 0
        ax.annotate(
            row.param_label,
            (row.epsilon, getattr(row, metric)),
            fontsize=7,
            xytext=(-6 if left else 6, 6 if up else -6),
            textcoords="offset points",
            ha="right" if left else "left",
            va="bottom" if up else "top",
            color=color,
        )


def _pad_log_x(ax: Axes, epsilon: pd.Series) -> None:
    """A log x range with a quarter decade of room each side, at least one decade wide, with
    labelled ticks at powers of ten only (no crowded 2x10^0, 3x10^0 minor labels)."""
    from matplotlib.ticker import LogLocator, NullFormatter

    values = epsilon.astype(float)
    values = values[np.isfinite(values) & (values > 0)]
    if values.empty:
        return
    lo, hi = math.log10(values.min()), math.log10(values.max())
    if hi - lo < 1:
        mid = (lo + hi) / 2
        lo, hi = mid - 0.5, mid + 0.5
    ax.set_xlim(10 ** (lo - 0.25), 10 ** (hi + 0.25))
    ax.xaxis.set_major_locator(LogLocator(base=10))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _legend_outside(fig: Figure, ax: Axes) -> None:
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", frameon=False)


def accuracy_vs_epsilon(points: pd.DataFrame, refs: Sequence[RefLine], *, title: str) -> Figure:
    """Classifier accuracy over epsilon, one line per mechanism (paper 003, Figure 3a/c/e).

    ``points``: one row per private setting with mech, param_label, epsilon(_hw), acc(_hw).
    """
    with _style():
        fig = Figure(figsize=(8, 4.5), layout="constrained")
        ax = fig.subplots()
        _epsilon_panel(ax, points, "acc", refs)
        ax.set_ylabel(ACC_LABEL)
        ax.set_title(title)
        _legend_outside(fig, ax)
    return fig


#: Panels per row of the MI AP figures: a run of every attack has about 15 measures.
MAX_PANEL_COLUMNS = 4


def _panel_grid(fig: Figure, n: int) -> np.ndarray:
    """``n`` axes in rows of at most :data:`MAX_PANEL_COLUMNS`, y shared; the grid's unused
    axes are hidden."""
    cols = min(n, MAX_PANEL_COLUMNS)
    rows = math.ceil(n / cols)
    axes = np.atleast_1d(fig.subplots(rows, cols, sharey=True)).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return axes[:n]


def _grid_size(n: int) -> tuple[float, float]:
    cols = min(n, MAX_PANEL_COLUMNS)
    return 4.2 * cols + 2, 4.0 * math.ceil(n / cols) + 0.5


def measure_order(measures: Sequence[str], first: str | None = None) -> list[str]:
    """Measures sorted by name, ``first`` (the worst case) leading where present."""
    rest = sorted(m for m in measures if m != first)
    return ([first] if first in measures else []) + rest


def mi_ap_vs_epsilon(
    points: pd.DataFrame,
    refs: dict[str, Sequence[RefLine]],
    *,
    title: str,
    first: str | None = None,
) -> Figure:
    """MI AP over epsilon, one panel per measure (attack and distance; ``first``, the worst case,
    leads), one line per mechanism (Figure 3b/d/f); panels wrap in rows of
    :data:`MAX_PANEL_COLUMNS`.

    ``points``: one row per (private setting, measure) with mech, distance (the measure),
    param_label, epsilon(_hw), mi_ap(_hw); ``refs``: the reference lines of each measure.
    """
    distances = measure_order(list(points["distance"].unique()), first)
    with _style():
        fig = Figure(figsize=_grid_size(len(distances)), layout="constrained")
        axes = _panel_grid(fig, len(distances))
        for ax, distance in zip(axes, distances, strict=True):
            _epsilon_panel(
                ax, points[points["distance"] == distance], "mi_ap", refs.get(distance, ())
            )
            if ":" in distance:  # attack:distance:variant, as the rows name it
                ax.set_title(distance, fontsize=9)
            else:  # the reconstruction attack's distances, and the worst case
                ax.set_title(f"attack distance: {distance.upper()}")
        low = float(np.nanmin(points["mi_ap"] - points["mi_ap_hw"].fillna(0)))
        axes[0].set_ylim(max(0.0, min(0.4, low - 0.02)), 1.02)  # MI AP lies in [0, 1]
        for ax in axes[::MAX_PANEL_COLUMNS]:
            ax.set_ylabel(MI_AP_LABEL)
        fig.suptitle(title)
        _legend_outside(fig, axes[0])
    return fig


def mi_ap_by_attack(points: pd.DataFrame, *, title: str, worst: str) -> Figure:
    """MI AP over epsilon, one panel per private mechanism, one line per measure (attack,
    distance, variant), coloured by attack, the ``worst`` measure (the held-out worst case)
    thick and black: which attack leads where, at a glance.

    ``points``: as :func:`mi_ap_vs_epsilon`'s.
    """
    mechs = list(points["mech"].unique())
    measures = measure_order(list(points["distance"].unique()), worst)
    families = sorted({m.split(":")[0] for m in measures if m != worst})
    palette = dict(zip(families, sns.color_palette("colorblind", len(families)), strict=True))
    styles = ("-", "--", ":", "-.")
    with _style():
        fig = Figure(figsize=_grid_size(len(mechs)), layout="constrained")
        axes = _panel_grid(fig, len(mechs))
        for ax, mech in zip(axes, mechs, strict=True):
            seen: dict[str, int] = {}
            for measure in measures:
                group = points[(points["mech"] == mech) & (points["distance"] == measure)]
                if group.empty:
                    continue
                group = group.sort_values("epsilon")
                if measure == worst:
                    style = {"color": "black", "linewidth": 3, "linestyle": "-", "zorder": 3}
                else:
                    family = measure.split(":")[0]
                    k = seen[family] = seen.get(family, -1) + 1
                    style = {
                        "color": palette[family],
                        "linewidth": 1.3,
                        "linestyle": styles[k % len(styles)],
                    }
                ax.plot(
                    group["epsilon"],
                    group["mi_ap"],
                    marker="o",
                    markersize=3,
                    label=measure,
                    **style,
                )
            ax.set_xscale("log")
            _pad_log_x(ax, points.loc[points["mech"] == mech, "epsilon"])
            ax.axhline(0.5, color="grey", linestyle=":", linewidth=1)
            ax.set_title(mech)
            ax.set_xlabel(EPSILON_LABEL)
        axes[0].set_ylim(0.35, 1.02)
        for ax in axes[::MAX_PANEL_COLUMNS]:
            ax.set_ylabel(MI_AP_LABEL)
        handles: dict[str, Line2D] = {}
        for ax in axes:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                handles.setdefault(label, handle)
        order = [m for m in measures if m in handles]
        fig.legend(
            [handles[m] for m in order],
            order,
            loc="outside right center",
            frameon=False,
            fontsize=7,
        )
        fig.suptitle(title)
    return fig


def phi_bars(points: pd.DataFrame, *, title: str) -> Figure:
    """phi per mechanism and parameter value, bars grouped by distance (paper 003, Figure 5).

    ``points``: one row per (private setting, distance) with mech, param_label, distance,
    epsilon and phi(_hw); parameters are ordered by decreasing epsilon (increasing noise).
    """
    mechs = list(dict.fromkeys(points["mech"]))
    distances = sorted(points["distance"].unique())
    colors = dict(zip(distances, sns.color_palette("deep", len(distances)), strict=True))
    width = 0.8 / len(distances)
    with _style():
        fig = Figure(figsize=(3.6 * len(mechs) + 1.5, 4.2), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(mechs), sharey=True))
        for ax, mech in zip(axes, mechs, strict=True):
            group = points[points["mech"] == mech].sort_values("epsilon", ascending=False)
            labels = list(dict.fromkeys(group["param_label"]))
            for i, distance in enumerate(distances):
                sub = group[group["distance"] == distance].set_index("param_label").reindex(labels)
                x = np.arange(len(labels)) + (i - (len(distances) - 1) / 2) * width
                ax.bar(
                    x,
                    sub["phi"],
                    width,
                    yerr=_err(sub["phi"], sub["phi_hw"], low=0, high=2),
                    capsize=3,
                    color=colors[distance],
                    label=f"distance {distance.upper()}",
                )
            ax.axhline(
                1.0,
                color=BASELINE_COLOR,
                linestyle=":",
                linewidth=1,
                label="φ = 1 (equal relative losses)",
            )
            ax.set_xticks(np.arange(len(labels)), labels, rotation=30, ha="right")
            ax.set_title(mech)
            ax.set_xlabel("parameter: z noise multiplier, εᵢ, σ (more noise →)")
            ax.set_ylim(0, 2.05)
        axes[0].set_ylabel(PHI_LABEL)
        fig.suptitle(title)
        _legend_outside(fig, axes[0])
    return fig


def _band(ax: Axes, band: CurveBand, *, label: str, color: object, linestyle: str = "-") -> None:
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


def attack_curves(
    rows: dict[str, list[SettingCurves]], baseline: SettingCurves | None, *, title: str
) -> Figure:
    """Precision-recall (left) and ROC (right) curves of the attack, one row per mechanism.

    Each setting is one line (mean over seeds, 95 % band); the non-private baseline is repeated
    dashed in every row. Chance: precision 0.5 on a balanced D_atk, the ROC diagonal.
    """
    names = list(rows) or [MechanismName.NONE.value]
    with _style():
        fig = Figure(figsize=(10, 3.6 * len(names) + 0.6), layout="constrained")
        axes = np.atleast_2d(fig.subplots(len(names), 2, squeeze=False))
        for (ax_pr, ax_roc), mech in zip(axes, names, strict=True):
            settings = rows.get(mech, [])
            shades = sns.light_palette(mech_color(mech), n_colors=len(settings) + 2)[2:]
            for setting, color in zip(settings, shades, strict=True):
                _band(ax_pr, setting.pr, label=setting.label, color=color)
                _band(ax_roc, setting.roc, label=setting.label, color=color)
            if baseline is not None:
                for ax, band in ((ax_pr, baseline.pr), (ax_roc, baseline.roc)):
                    _band(ax, band, label=baseline.label, color=BASELINE_COLOR, linestyle="--")
            ax_pr.axhline(0.5, color="grey", linestyle=":", linewidth=1, label="chance")
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
            ax_roc.legend(loc="lower right", fontsize=7)
        fig.suptitle(title)
    return fig


def image_grid(
    rows: Sequence[tuple[str, np.ndarray]], *, column_titles: Sequence[str], title: str
) -> Figure:
    """A grid of images, one labelled row per entry: arrays (K, C, H, W) in [0, 1] (Figure 6)."""
    n_cols = max(len(images) for _, images in rows)
    with _style(), sns.axes_style("white"):
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
    with _style():
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
    """Write ``fig`` as ``out_dir/stem.<format>`` for each format, atomically; returns the paths."""
    paths = []
    for fmt in formats:
        path = Path(out_dir) / f"{stem}.{fmt}"
        io.write_with(path, lambda tmp, fmt=fmt: fig.savefig(tmp, format=fmt, dpi=150))
        paths.append(path)
    return paths
