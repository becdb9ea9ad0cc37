"""What the report leads with: one compact table per setting and one figure of the held-out worst
case with its band; then the per-attack detail (one row per attack variant).

Every MI AP comes with how sure it is: with one seed its 95 % bootstrap interval (the row's
``mi_ap_low`` / ``mi_ap_high``), with several the mean and its 95 % Student-t half-width over
seeds; and with what a blind attacker reaches at the same counts (``mi_ap_null_q95``). A value
at or below that quantile is marked "at chance".
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from audit.mechanisms import BASELINE
from audit.report.figure_parts import (
    _chance_handle,
    _finish,
    _label_points,
    _legend_below,
    epsilon_axis,
)
from audit.report.figure_style import (
    CHANCE_COLOR,
    WORST_CASE_LABEL,
    attack_family,
    family_color,
    family_order,
    measure_label,
    mech_color,
    report_style,
    wrap,
)
from audit.report.markdown import md_table
from audit.report.plots import family_measure_order
from audit.report.stats import format_epsilon, t_interval
from audit.report.summaries import SETTING, WORST_CASE, ordered
from audit.rows.row_uncertainty import AT_CHANCE, BEYOND
from audit.rows.tradeoff import chance_accuracy


def _value(rows: pd.DataFrame, metric: str, low: str, high: str) -> str:
    """``0.612 [0.55, 0.67]`` (one seed: the row's bootstrap interval) or ``0.612 ± 0.034``
    (several: the t-interval over seeds); ``n/a`` without a value."""
    if metric not in rows:
        return "n/a"
    values = rows[metric].astype(float).dropna()
    if values.empty:
        return "n/a"
    if len(values) == 1:
        row = rows.loc[values.index[0]]
        lo, hi = float(row.get(low, math.nan)), float(row.get(high, math.nan))
        if math.isnan(lo) or math.isnan(hi):
            return f"{values.iloc[0]:.3f}"
        return f"{values.iloc[0]:.3f} [{lo:.3f}, {hi:.3f}]"
    return t_interval(values.to_numpy()).format()


def _verdict(flags: pd.Series) -> str:
    """``at chance`` / ``beyond chance`` over a setting's seeds, or ``k of n beyond chance``."""
    known = [str(f) for f in flags if str(f) in ("True", "False")]
    if not known:
        return "n/a"
    beyond = sum(f == "True" for f in known)
    if beyond == 0:
        return AT_CHANCE
    if beyond == len(known):
        return BEYOND
    return f"{beyond} of {len(known)} seeds beyond chance"


def _chance(rows: pd.DataFrame, column: str) -> str:
    values = rows[column].astype(float).dropna() if column in rows else pd.Series(dtype=float)
    return "n/a" if values.empty else f"≤ {values.mean():.3f}"


def _reached_by(cell_rows: pd.DataFrame) -> str:
    """The attack the held-out choice picked (most often over seeds) and what it saw."""
    if "worst_case" not in cell_rows:
        return "n/a"
    chosen = cell_rows[cell_rows["worst_case"].astype(str) == "True"]
    if chosen.empty:
        return "n/a"
    labels = chosen["distance"].astype(str)
    if "attacker_sees" in chosen:
        labels = labels + " (" + chosen["attacker_sees"].fillna("").astype(str) + ")"
    return labels.value_counts().index[0].replace(" ()", "")


def _accuracy(rows: pd.DataFrame) -> str:
    acc = _value(rows, "acc", "", "")
    majority = rows["acc_majority"] if "acc_majority" in rows else [math.nan] * len(rows)
    chance = [chance_accuracy(b, m) for b, m in zip(rows["acc_base"], majority, strict=True)]
    return f"{acc} (majority {np.mean(chance):.3f})"


def headline_table(frame: pd.DataFrame) -> str:
    """One row per setting: epsilon, the held-out worst-case MI AP with its interval, the blind
    attacker's 95 % quantile at its counts and the verdict, the attack that reached it and what
    it saw, accuracy against the majority rate, phi of the worst case."""
    attacks = frame[frame["distance"] != WORST_CASE]
    worst = frame[frame["distance"] == WORST_CASE]
    rows = []
    for _, setting in ordered(attacks).groupby(list(SETTING), dropna=False, sort=False):
        mine = worst[worst["setting_hash"] == setting["setting_hash"].iloc[0]]
        mine = mine if not mine.empty else setting.iloc[0:0]
        verdict = _verdict(mine.get("worst_beyond_chance", pd.Series(dtype=object)))
        phi = "–" if setting["mech"].iloc[0] == BASELINE else _value(mine, "phi", "", "")
        if phi == "n/a" and "phi_note" in setting:
            notes = [n for n in setting["phi_note"].dropna().astype(str) if "phi_worst:" in n]
            if notes:  # why phi is empty: the baseline at chance, or its utility not valid
                phi += " (" + notes[0].split("phi_worst: ")[1].split(";")[0] + ")"
        if verdict == AT_CHANCE and phi != "–" and not phi.startswith("n/a"):
            phi += " (privacy at chance)"
        rows.append(
            [
                setting["mech"].iloc[0],
                setting["param_label"].iloc[0],
                format_epsilon(float(setting["epsilon"].astype(float).mean())),
                _value(mine, "mi_ap", "mi_ap_low", "mi_ap_high"),
                _chance(mine, "worst_mi_ap_null_q95"),
                verdict,
                _reached_by(setting),
                _accuracy(setting.drop_duplicates("config_hash")),
                phi,
                int(setting["seed"].nunique()),
            ]
        )
    headers = [
        "mech",
        "param",
        "ε",
        "worst-case MI AP (held out) [95 %]",
        "blind attacker (95 % quantile)",
        "verdict",
        "reached by (what it saw)",
        "acc (majority rate)",
        "φ (worst case)",
        "seeds",
    ]
    return md_table(headers, rows)


def _tpr(rows: pd.DataFrame) -> str:
    if "tpr_at_fpr_1pct" not in rows or rows["tpr_at_fpr_1pct"].isna().all():
        note = rows["tpr_note"].dropna().astype(str) if "tpr_note" in rows else []
        reason = next((n for n in note if n), "")
        first = reason.split(";")[0].removeprefix("FPR 0.01: ")
        return f"n/a ({first})" if first else "n/a"
    return _value(rows, "tpr_at_fpr_1pct", "tpr_at_fpr_1pct_low", "tpr_at_fpr_1pct_high")


def _side(rows: pd.DataFrame) -> str:
    r = rows.iloc[0]
    if "attacker_sees" not in rows or not isinstance(r.get("attacker_sees"), str):
        return "n/a"
    parts = [r["attacker_sees"]]
    records, models = int(r.get("side_reference_records", 0) or 0), r.get("side_reference_models")
    if records:
        parts.append(f"{records} reference records")
    if models and int(models):
        parts.append(f"{int(models)} reference models ({r.get('side_models_trained', '')})")
    return " + ".join(parts)


def _bound(rows: pd.DataFrame) -> str:
    if "epsilon_lower_attack" not in rows:
        return "n/a"
    values = rows["epsilon_lower_attack"].astype(float).dropna()
    return "n/a" if values.empty else f"{values.max():.3g}"


def detail_table(frame: pd.DataFrame) -> str:
    """One row per (setting, attack variant): MI AP and AUC with their intervals, the blind
    attacker's 95 % quantile and the verdict, TPR at 1 % FPR (or why not), the attack-based
    epsilon lower bound (the largest over seeds), and what the attacker saw and knew."""
    attacks = ordered(frame[frame["distance"] != WORST_CASE])
    rows = []
    for _, group in attacks.groupby([*SETTING, "distance"], dropna=False, sort=False):
        rows.append(
            [
                group["mech"].iloc[0],
                group["param_label"].iloc[0],
                group["distance"].iloc[0],
                _value(group, "mi_ap", "mi_ap_low", "mi_ap_high"),
                _chance(group, "mi_ap_null_q95"),
                _verdict(group.get("beyond_chance", pd.Series(dtype=object))),
                _value(group, "mi_auc", "mi_auc_low", "mi_auc_high"),
                _tpr(group),
                _bound(group),
                _side(group),
            ]
        )
    headers = [
        "mech",
        "param",
        "attack",
        "MI AP [95 %]",
        "blind (95 %)",
        "verdict",
        "AUC [95 %]",
        "TPR at 1 % FPR",
        "ε lower (attack)",
        "attacker saw + side knowledge",
    ]
    return md_table(headers, rows)


def _per_setting(
    rows: pd.DataFrame, *, by: tuple[str, ...] = SETTING, q95: str = "worst_mi_ap_null_q95"
) -> pd.DataFrame:
    """One row per group of ``by``: mechanism, parameter label, mean epsilon, MI AP with its 95 %
    interval (one seed: the row's bootstrap; several: the t-interval) and the mean of ``q95``."""
    out = []
    for _, group in rows.groupby(list(by), dropna=False, sort=False):
        values = group["mi_ap"].astype(float).dropna()
        if values.empty:
            continue
        if len(values) == 1:
            r = group.loc[values.index[0]]
            low, high = float(r.get("mi_ap_low", math.nan)), float(r.get("mi_ap_high", math.nan))
        else:
            ci = t_interval(values.to_numpy())
            low, high = ci.mean - ci.half_width, ci.mean + ci.half_width
        out.append(
            {
                "mech": group["mech"].iloc[0],
                "param_label": group["param_label"].iloc[0],
                "distance": group["distance"].iloc[0],
                "epsilon": float(group["epsilon"].astype(float).mean()),
                "mi_ap": float(values.mean()),
                "low": low,
                "high": high,
                "q95": float(group.get(q95, pd.Series([math.nan])).astype(float).mean()),
            }
        )
    return pd.DataFrame(out)


def _yerr(points: pd.DataFrame) -> np.ndarray:
    err = np.stack([points["mi_ap"] - points["low"], points["high"] - points["mi_ap"]])
    return np.nan_to_num(err.astype(np.float64)).clip(min=0)


def worst_case_figure(frame: pd.DataFrame, *, title: str) -> Figure | None:
    """The held-out worst-case MI AP against epsilon, one line per mechanism with its 95 %
    intervals, the non-private baseline as a line with its band, and the blind attacker's
    95 % quantile shaded (below it, a value is at chance). Where no private setting has a
    finite epsilon (an attacked release), each attack's MI AP and the worst case as bars
    instead (:func:`_attack_bars`). None without worst-case rows."""
    points = _per_setting(frame[frame["distance"] == WORST_CASE])
    if points.empty:
        return None
    private = points[(points["mech"] != BASELINE) & np.isfinite(points["epsilon"])]
    if private.empty:
        return _attack_bars(frame, title=title.removesuffix(" vs ε"))
    with report_style():
        fig = Figure(figsize=(8.0, 5.6), layout="constrained")
        ax = fig.add_subplot()
        q95 = float(points["q95"].max())
        if math.isfinite(q95):
            label = f"at chance: below the blind attacker's 95 % quantile ({q95:.3f})"
            ax.axhspan(0, q95, color=CHANCE_COLOR, alpha=0.6, label=label, zorder=0)
        for mech, group in private.groupby("mech", sort=False):
            group = group.sort_values("epsilon")
            ax.errorbar(
                group["epsilon"],
                group["mi_ap"],
                yerr=_yerr(group),
                color=mech_color(mech),
                marker="o",
                capsize=3,
                label=mech,
            )
            _label_points(ax, group, "mi_ap", mech_color(mech))
        base = points[points["mech"] == BASELINE]
        if not base.empty:
            b = base.iloc[0]
            ax.axhline(b["mi_ap"], color="black", linestyle="--", label="non-private (none)")
            if math.isfinite(b["low"]) and math.isfinite(b["high"]):
                for y in (b["low"], b["high"]):
                    ax.axhline(y, color="black", linestyle=":", linewidth=0.9)
                ax.plot([], [], color="black", linestyle=":", label="non-private: 95 % interval")
        low = float(np.nanmin(np.append(points["low"].to_numpy(dtype=float), points["mi_ap"])))
        ax.set_ylim(max(0.0, min(0.3, low - 0.03)), 1.02)
        epsilon_axis(ax, private["epsilon"])
        ax.set_ylabel("held-out worst-case MI AP\n(bars: 95 % interval)")
        _finish(fig, title)
        handles, labels = ax.get_legend_handles_labels()
        _legend_below(fig, handles, labels)
    return fig


#: The colour of each bar's own blind 95 % quantile mark: seen on black and coloured bars.
TICK = "#d62728"


def _attack_bars(frame: pd.DataFrame, *, title: str) -> Figure:
    """Per setting without a finite epsilon (an attacked release): one horizontal bar per attack
    result coloured by family, the held-out worst case in black on top, each with its 95 %
    interval and a tick at its own blind attacker's 95 % quantile; the band up to the attacks'
    quantile shaded."""
    attacks = _per_setting(frame, by=(*SETTING, "distance"), q95="mi_ap_null_q95")
    settings = list(dict.fromkeys(attacks["param_label"]))
    n_bars = max(int((attacks["param_label"] == s).sum()) for s in settings)
    with report_style():
        fig = Figure(
            figsize=(8.0, len(settings) * (0.8 + 0.3 * n_bars) + 1.8), layout="constrained"
        )
        axes = np.atleast_1d(fig.subplots(len(settings), 1, sharex=True, squeeze=False)[:, 0])
        for ax, setting in zip(axes, settings, strict=True):
            mine = attacks[attacks["param_label"] == setting]
            order = family_measure_order(list(mine["distance"]))
            mine = mine.set_index("distance").loc[order].reset_index()
            y = np.arange(len(mine))[::-1]
            q_attack = float(mine.loc[mine["distance"] != WORST_CASE, "q95"].max())
            if math.isfinite(q_attack):
                ax.axvspan(0, q_attack, color=CHANCE_COLOR, alpha=0.6, zorder=0)
            ax.barh(
                y,
                mine["mi_ap"],
                xerr=_yerr(mine),
                color=[family_color(attack_family(m)) for m in mine["distance"]],
                capsize=2,
                ecolor="dimgray",
                height=0.7,
            )
            ax.plot(mine["q95"], y, linestyle="none", marker="|", markersize=14, mew=2, color=TICK)
            names = [measure_label(m) for m in mine["distance"]]
            ax.set_yticks(y, [wrap(n, 3.0, 7) for n in names], fontsize=7)
            ax.set_title(f"{mine['mech'].iloc[0]} {setting}".replace(" none", ""), fontsize=9)
            low = float(np.nanmin(np.append(mine["low"].to_numpy(dtype=float), mine["mi_ap"])))
            ax.set_xlim(max(0.0, min(0.3, low - 0.03)), 1.02)
        axes[-1].set_xlabel("MI AP (average precision; members positive, 0.5 = chance)")
        families = family_order(list(attacks["distance"]))
        handles: list[object] = [Patch(color=family_color(f)) for f in families]
        labels = [WORST_CASE_LABEL if f == WORST_CASE else f for f in families]
        chance, chance_label = _chance_handle(q_attack, " (one attack)")
        handles += [
            chance,
            Line2D([], [], linestyle="none", marker="|", markersize=10, mew=2, color=TICK),
        ]
        labels += [chance_label, "each bar's own blind 95 % quantile"]
        _legend_below(fig, handles, labels)
        _finish(fig, f"{title}: no finite ε to plot against, so MI AP per attack (95 % intervals)")
    return fig


def headline(frame: pd.DataFrame) -> tuple[str, str]:
    """(compact table, detail table) of one report section."""
    return headline_table(frame), detail_table(frame)
