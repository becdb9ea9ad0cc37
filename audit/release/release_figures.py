"""The figure of an attacked release's report: every attack result's MI AP with its 95 %
bootstrap interval, coloured by what the attacker held, the held-out worst case on top (its
interval at half the records), and per line the blind attacker's band (an attacker whose scores
ignore membership stays below the shaded end in 95 % of draws at that line's counts)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from attacks.worst_case import held_out_count
from audit.release.release_summary import THREAT_ORDER, result_label
from audit.report.figure_style import CHANCE_COLOR as BAND_COLOR
from audit.report.figure_style import report_style
from audit.rows.derived import as_flag

#: Colours of the threat models (the worst case is black).
_VIEW_COLORS = dict(zip(THREAT_ORDER, sns.color_palette("colorblind", 3), strict=True))
_OTHER = (0.5, 0.5, 0.5)
WORST_COLOR = "black"
ROW_HEIGHT = 0.34  # inches per line


def _lines(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per attack result, strongest first within each threat model (weakest model
    at the bottom), then the held-out worst case on top."""
    order = {v: i for i, v in enumerate(THREAT_ORDER)}
    attacks = rows.assign(
        _rank=rows["attacker_sees"].map(lambda v: order.get(str(v), len(order))),
        label=[_wrap(result_label(r)) for _, r in rows.iterrows()],
        low=rows.get("mi_ap_low", np.nan),
        high=rows.get("mi_ap_high", np.nan),
        q95=rows.get("mi_ap_null_q95", np.nan),
        color=rows["attacker_sees"].map(lambda v: _VIEW_COLORS.get(str(v), _OTHER)),
        worst=False,
    ).sort_values(["_rank", "mi_ap"], ascending=[True, True], kind="stable")
    chosen = rows[rows["worst_case"].map(as_flag) == True]  # noqa: E712  (True / False / None)
    if chosen.empty or not math.isfinite(float(chosen.iloc[0]["worst_mi_ap"])):
        return attacks
    w = chosen.iloc[0]
    worst = pd.DataFrame(
        [
            {
                "label": f"held-out worst case ({_half(w)} records):\n{result_label(w)}",
                "mi_ap": float(w["worst_mi_ap"]),
                "low": float(w.get("worst_mi_ap_low", math.nan)),
                "high": float(w.get("worst_mi_ap_high", math.nan)),
                "q95": float(w.get("worst_mi_ap_null_q95", math.nan)),
                "color": WORST_COLOR,
                "worst": True,
            }
        ]
    )
    return pd.concat([attacks, worst], ignore_index=True)


def _wrap(label: str, width: int = 40) -> str:
    """``attack (distance, variant)`` on two lines where it is longer than ``width``."""
    head, sep, tail = label.partition(" (")
    return f"{head}\n({tail}" if sep and len(label) > width else label


def _half(row: pd.Series) -> str:
    """``m + n``: the members and non-members of the held-out half (attacks.worst_case)."""
    m, n = int(row["attack_members"]), int(row["attack_nonmembers"])
    return f"{held_out_count(m)} + {held_out_count(n)}"


def _value_text(line: pd.Series) -> str:
    if math.isfinite(line["low"]) and math.isfinite(line["high"]):
        return f"{line['mi_ap']:.3f} [{line['low']:.3f}, {line['high']:.3f}]"
    return f"{line['mi_ap']:.3f}"


def release_mi_ap_by_attack(rows: pd.DataFrame, *, title: str) -> Figure:
    """MI AP per attack result of one release (``rows``: its rows as ``runs.csv`` holds them),
    with 95 % intervals, the blind attacker's band per line and the held-out worst case."""
    lines = _lines(rows)
    n = len(lines)
    y = np.arange(n)
    lows = np.nan_to_num(lines["low"].to_numpy(float), nan=np.inf)
    highs = np.nan_to_num(lines["high"].to_numpy(float), nan=-np.inf)
    values = lines["mi_ap"].to_numpy(float)
    left = min(0.45, float(np.min(np.minimum(values, lows))) - 0.02)
    right = max(float(np.max(np.maximum(values, highs))), 0.55) + 0.03  # room for a 1.0 marker
    with report_style():
        longest = max(len(part) for label in lines["label"] for part in label.split("\n"))
        height = 1.7 + ROW_HEIGHT * n + 0.12 * int(lines["label"].str.contains("\n").sum())
        fig = Figure(figsize=(max(8.5, 5.2 + 0.075 * longest), height), layout="constrained")
        ax = fig.add_subplot()
        for i, line in lines.iterrows():
            q95 = float(line["q95"])
            if math.isfinite(q95):
                ax.fill_betweenx(
                    [i - 0.42, i + 0.42], left, q95, color=BAND_COLOR, alpha=0.8, linewidth=0
                )
            xerr = None
            if math.isfinite(line["low"]) and math.isfinite(line["high"]):
                xerr = [
                    [max(0.0, line["mi_ap"] - line["low"])],
                    [max(0.0, line["high"] - line["mi_ap"])],
                ]
            ax.errorbar(
                [line["mi_ap"]],
                [i],
                xerr=xerr,
                fmt="D" if line["worst"] else "o",
                color=line["color"],
                capsize=3,
                markersize=6 if line["worst"] else 5,
            )
        if lines["worst"].any():
            ax.axhline(n - 1.5, color="#999999", linewidth=0.8)
        ax.axvline(0.5, color="#666666", linestyle=":", linewidth=1)
        ax.set_xlim(left, right)
        ax.set_ylim(-0.6, n - 0.4)
        ax.set_yticks(y, labels=list(lines["label"]), fontsize=8)
        ax.grid(axis="y", visible=False)
        values_axis = ax.twinx()
        values_axis.set_ylim(ax.get_ylim())
        values_axis.set_yticks(y, labels=[_value_text(r) for _, r in lines.iterrows()], fontsize=8)
        values_axis.grid(False)
        ax.set_xlabel("MI AP (average precision, members positive; 0.5 = a coin flip)")
        ax.set_title(title, fontsize=10)
        handles = [
            Patch(color=_VIEW_COLORS[v], label=f"attacker sees: {v}")
            for v in THREAT_ORDER
            if (rows["attacker_sees"].astype(str) == v).any()
        ]
        if lines["worst"].any():
            handles.append(
                Patch(
                    color=WORST_COLOR,
                    label="held-out worst case (chosen on one half, measured on the other)",
                )
            )
        handles.append(
            Patch(color=BAND_COLOR, label="at chance: below the blind attacker's 95 % quantile")
        )
        fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=7, frameon=False)
    return fig
