"""The report's figures (the trade-off paper, Figures 3-6). Each function returns a matplotlib
Figure; :func:`save_figure` writes it. Figures are built without pyplot, so no display or global
figure state is involved, and seaborn's style is applied through context managers only.

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
from collections.abc import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from audit.report.figure_parts import (
    RefLine,
    _chance_band,
    _chance_handle,
    _dodge,
    _draw_refs,
    _err,
    _figure,
    _finish,
    _Intervals,
    _label_points,
    _legend_below,
    _mech_handles,
    _panel_grid,
    _panel_title,
    _panel_width,
    chance_level,
    epsilon_axis,
    mi_ap_interval,
)
from audit.report.figure_style import (
    ACC_LABEL,
    BASELINE_COLOR,
    MAX_LEGEND_ENTRIES,
    MAX_PANEL_COLUMNS,
    MI_AP_LABEL,
    PHI_LABEL,
    SINGLE_WIDTH,
    VARIANT_STYLES,
    WORST_CASE_LABEL,
    attack_family,
    family_color,
    family_order,
    mech_color,
    report_style,
    short_number,
    variant_name,
    variant_styles,
)
from audit.report.summaries import WORST_CASE
from audit.rows.row import PAPER_ATTACK


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
    """Classifier accuracy over epsilon, one line per mechanism (the trade-off paper, Figure
    3a/c/e).

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
            if family != PAPER_ATTACK
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
    """phi per mechanism and setting, one bar per measure (the trade-off paper, Figure 5): the
    report passes the held-out worst case alone where the run has one. Settings are ordered by
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
