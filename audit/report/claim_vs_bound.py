"""Claimed epsilon against the empirical lower bound of ``--audit`` runs: a table and a figure,
only for runs with audited rows (``epsilon_lower``, :mod:`audit.empirical.cell_audit`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from audit.gate.checking import param_label
from audit.report.plots import mech_color

CELL = ["mech", "param_name", "param_value", "seed"]
AUDIT = [
    "epsilon",
    "epsilon_lower",
    "epsilon_lower_kind",
    "epsilon_lower_m",
    "epsilon_lower_ceiling",
    "epsilon_lower_input",
    "epsilon_lower_input_m",
]


def audited_cells(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per audited cell (its rows share the audit): grid point, claim and bound; empty
    where the run has no ``epsilon_lower`` column or no finite bound."""
    if "epsilon_lower" not in rows.columns:
        return pd.DataFrame(columns=[*CELL, *AUDIT])
    rows = rows.assign(**{c: rows.get(c, np.nan) for c in AUDIT if c not in rows.columns})
    cells = rows[rows["epsilon_lower"].notna()][[*CELL, *AUDIT]]
    cells = cells.drop_duplicates(subset=CELL)
    return cells.sort_values(["mech", "param_value", "seed"]).reset_index(drop=True)


def claim_vs_bound_table(cells: pd.DataFrame) -> str:
    """Markdown: per audited cell, the claim, the lower bound, how (kind, M or m) and the
    ceiling (the most that audit could prove), and the input-canary bound with its m where the
    cell ran one (DP-SGD mechanisms)."""
    head = (
        "| mech | param | seed | claimed ε | lower bound | audit | M or m | ceiling | "
        "input-canary bound (m) |"
    )
    lines = [head, "|" + " --- |" * 9]
    for c in cells.itertuples(index=False):
        label = param_label(c.mech, c.param_name, c.param_value)
        inp = (
            f"{c.epsilon_lower_input:.4g} ({int(c.epsilon_lower_input_m)})"
            if np.isfinite(c.epsilon_lower_input)
            else "-"
        )
        lines.append(
            f"| {c.mech} | {label} | {c.seed} | {c.epsilon:.4g} | {c.epsilon_lower:.4g} | "
            f"{c.epsilon_lower_kind} | {int(c.epsilon_lower_m)} | {c.epsilon_lower_ceiling:.4g} "
            f"| {inp} |"
        )
    return "\n".join(lines)


def claim_vs_bound_figure(cells: pd.DataFrame, *, title: str) -> Figure:
    """One panel per mechanism: claimed ε and the lower bound (mean over seeds) against the
    mechanism's parameter, log-scaled ε; the ceiling dotted. Bounds of 0 are not drawn on the
    log scale (the table lists them)."""
    mechs = sorted(cells["mech"].unique())
    fig = Figure(figsize=(4.2 * len(mechs), 3.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(mechs), squeeze=False)[0])
    for ax, mech in zip(axes, mechs, strict=True):
        group = cells[cells["mech"] == mech].groupby("param_value")
        mean = group[["epsilon", "epsilon_lower", "epsilon_lower_ceiling"]].mean()
        x = mean.index.to_numpy(float)
        color = mech_color(mech)
        ax.plot(x, mean["epsilon"], "o-", color=color, label="claimed ε")
        shown = mean["epsilon_lower"] > 0
        ax.plot(x[shown], mean["epsilon_lower"][shown], "s--", color=color, label="lower bound")
        inputs = group["epsilon_lower_input"].mean()
        if (inputs > 0).any():
            ax.plot(
                x[inputs > 0],
                inputs[inputs > 0],
                "^:",
                color=color,
                label="lower bound (input canaries)",
            )
        ceiling = mean["epsilon_lower_ceiling"] > 0
        ax.plot(
            x[ceiling], mean["epsilon_lower_ceiling"][ceiling], ":", color="grey", label="ceiling"
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(cells.loc[cells["mech"] == mech, "param_name"].iloc[0])
        ax.set_ylabel("ε")
        ax.set_title(mech)
        ax.legend(fontsize="small")
    fig.suptitle(title)
    return fig
