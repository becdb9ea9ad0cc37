"""Figures of records and scores: the attack curves of the attack that won the worst case, and
grids of images or series."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from audit.mechanisms import BASELINE
from audit.report.figure_parts import CurveBand, SettingCurves, _finish, _spread
from audit.report.figure_style import (
    BASELINE_COLOR,
    MAX_NAMED_SETTINGS,
    PANEL_HEIGHT,
    VARIANT_STYLES,
    _show,
    attack_family,
    measure_label,
    mech_color,
    report_style,
)


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
    names = list(rows) or [BASELINE]
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
        _finish(fig, title)  # wrapped to the figure's width
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
        _finish(fig, title)  # wrapped to the figure's width
    return fig
