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

from audit.config import MechanismName
from audit.report.markdown import _md_table
from audit.report.plots import EPSILON_LABEL, _pad_log_x, _style, mech_color
from audit.report.stats import format_epsilon, t_interval
from audit.report.summaries import SETTING, WORST_CASE, ordered

NONE = MechanismName.NONE.value
AT_CHANCE = "at chance"
BEYOND = "beyond chance"


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
    chance = rows["acc_base"].astype(float)
    if "acc_majority" in rows:
        chance = np.maximum(chance, rows["acc_majority"].astype(float).fillna(0))
    return f"{acc} (majority {chance.mean():.3f})"


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
        phi = "–" if setting["mech"].iloc[0] == NONE else _value(mine, "phi", "", "")
        if verdict == AT_CHANCE and phi != "–":
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
    return _md_table(headers, rows)


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
    return _md_table(headers, rows)


def _per_setting(worst: pd.DataFrame) -> pd.DataFrame:
    out = []
    for _, rows in worst.groupby(list(SETTING), dropna=False, sort=False):
        values = rows["mi_ap"].astype(float).dropna()
        if values.empty:
            continue
        if len(values) == 1:
            r = rows.loc[values.index[0]]
            low, high = float(r.get("mi_ap_low", math.nan)), float(r.get("mi_ap_high", math.nan))
        else:
            ci = t_interval(values.to_numpy())
            low, high = ci.mean - ci.half_width, ci.mean + ci.half_width
        out.append(
            {
                "mech": rows["mech"].iloc[0],
                "param_label": rows["param_label"].iloc[0],
                "epsilon": float(rows["epsilon"].astype(float).mean()),
                "mi_ap": float(values.mean()),
                "low": low,
                "high": high,
                "q95": float(rows.get("worst_mi_ap_null_q95", pd.Series([math.nan])).mean()),
            }
        )
    return pd.DataFrame(out)


def worst_case_figure(frame: pd.DataFrame, *, title: str) -> Figure | None:
    """The held-out worst-case MI AP against epsilon, one line per mechanism with its 95 %
    intervals, the non-private baseline as a line with its band, and the blind attacker's
    95 % quantile shaded (below it, a value is at chance). None without worst-case rows."""
    points = _per_setting(frame[frame["distance"] == WORST_CASE])
    if points.empty:
        return None
    with _style():
        fig = Figure(figsize=(7.5, 4.2), layout="constrained")
        ax = fig.add_subplot()
        private = points[(points["mech"] != NONE) & np.isfinite(points["epsilon"])]
        for mech, group in private.groupby("mech", sort=False):
            group = group.sort_values("epsilon")
            yerr = np.stack([group["mi_ap"] - group["low"], group["high"] - group["mi_ap"]]).clip(
                min=0
            )
            ax.errorbar(
                group["epsilon"],
                group["mi_ap"],
                yerr=np.nan_to_num(yerr),
                color=mech_color(mech),
                marker="o",
                capsize=3,
                label=mech,
            )
            for r in group.itertuples(index=False):
                ax.annotate(
                    r.param_label,
                    (r.epsilon, r.mi_ap),
                    fontsize=7,
                    xytext=(5, 4),
                    textcoords="offset points",
                    color=mech_color(mech),
                )
        base = points[points["mech"] == NONE]
        if not base.empty:
            b = base.iloc[0]
            ax.axhline(b["mi_ap"], color="black", linestyle="--", label="non-private (none)")
            if math.isfinite(b["low"]) and math.isfinite(b["high"]):
                for y in (b["low"], b["high"]):
                    ax.axhline(y, color="black", linestyle=":", linewidth=0.9)
                ax.plot([], [], color="black", linestyle=":", label="non-private: 95 % interval")
        q95 = float(points["q95"].max())
        if math.isfinite(q95):
            label = f"at chance: below the blind attacker's 95 % quantile ({q95:.3f})"
            ax.axhspan(0, q95, color="#e8d9b0", alpha=0.6, label=label, zorder=0)
        ax.set_ylim(0.3, 1.02)
        if not private.empty:
            ax.set_xscale("log")
            _pad_log_x(ax, private["epsilon"])
        ax.set_xlabel(EPSILON_LABEL)
        ax.set_ylabel("held-out worst-case MI AP\n(95 % interval)")
        ax.set_title(title, fontsize=10)
        ax.legend(loc="upper left", fontsize=7, frameon=True)
    return fig


def headline(frame: pd.DataFrame) -> tuple[str, str]:
    """(compact table, detail table) of one report section."""
    return headline_table(frame), detail_table(frame)
