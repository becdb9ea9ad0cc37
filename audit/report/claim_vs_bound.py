"""Claimed epsilon against the empirical lower bounds of ``--canary-audit`` runs: a table and a
figure, only for runs with audited rows (``epsilon_lower``, :mod:`audit.empirical.cell_audit`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from audit.check.checking import param_label
from audit.report.figure_parts import _figure, _finish, _panel_grid, log_axis
from audit.report.figure_style import mech_color, point_label, report_style

CELL = ["mech", "param_name", "param_value", "seed"]
AUDIT = [
    "epsilon",
    "epsilon_lower",
    "epsilon_lower_estimator",
    "epsilon_lower_fdp",
    "epsilon_lower_input_fdp",
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
        "| mech | param | seed | claimed ε | lower bound | estimator | f-DP bound | audit | "
        "M or m | ceiling | input-canary bound (m) | input f-DP |"
    )
    lines = [head, "|" + " --- |" * 12]
    for c in cells.itertuples(index=False):
        label = param_label(c.mech, c.param_name, c.param_value)
        inp = (
            f"{c.epsilon_lower_input:.4g} ({int(c.epsilon_lower_input_m)})"
            if np.isfinite(c.epsilon_lower_input)
            else "-"
        )
        lines.append(
            f"| {c.mech} | {label} | {c.seed} | {c.epsilon:.4g} | {c.epsilon_lower:.4g} | "
            f"{c.epsilon_lower_estimator or '-'} | {_value(c.epsilon_lower_fdp)} | "
            f"{c.epsilon_lower_kind} | {int(c.epsilon_lower_m)} | {c.epsilon_lower_ceiling:.4g} "
            f"| {inp} | {_value(c.epsilon_lower_input_fdp)} |"
        )
    return "\n".join(lines)


def _value(x: float) -> str:
    return f"{x:.4g}" if np.isfinite(x) else "-"


#: The estimators drawn besides the main lower bound: column, label, marker.
OTHER_ESTIMATORS = (
    ("epsilon_lower_fdp", "one-run f-DP", "D-."),
    ("epsilon_lower_input", "input canaries (one-run)", "^:"),
    ("epsilon_lower_input_fdp", "input canaries (f-DP)", "v:"),
)


def claim_vs_bound_figure(cells: pd.DataFrame, *, title: str) -> Figure:
    """One panel per mechanism (in rows of two): claimed ε and every estimator's lower bound
    (mean over seeds) against the mechanism's parameter, log-scaled ε; the ceiling dotted.
    Bounds of 0 are not drawn on the log scale (the table lists them)."""
    mechs = sorted(cells["mech"].unique())
    with report_style():
        fig = _figure(len(mechs), extra_height=1.0)
        axes = _panel_grid(fig, len(mechs), sharey=False)
        for ax, mech in zip(axes, mechs, strict=True):
            mine = cells[cells["mech"] == mech]
            group = mine.groupby("param_value")
            mean = group[["epsilon", "epsilon_lower", "epsilon_lower_ceiling"]].mean()
            x = mean.index.to_numpy(float)
            color = mech_color(mech)
            drawn = [mean["epsilon"].to_numpy(float)]
            ax.plot(x, mean["epsilon"], "o-", color=color, label="claimed ε")
            shown = (mean["epsilon_lower"] > 0).to_numpy()
            estimators = mine["epsilon_lower_estimator"]
            named = ", ".join(sorted({str(e) for e in estimators if isinstance(e, str) and e}))
            ax.plot(
                x[shown],
                mean["epsilon_lower"][shown],
                "s--",
                color=color,
                label=f"lower bound ({named or 'audit'})",
            )
            drawn.append(mean["epsilon_lower"].to_numpy(float)[shown])
            for column, label, style in OTHER_ESTIMATORS:
                values = group[column].mean()
                if (values > 0).any():
                    ok = (values > 0).to_numpy()
                    ax.plot(x[ok], values[ok], style, color=color, label=label)
                    drawn.append(values.to_numpy(float)[ok])
            ceiling = (mean["epsilon_lower_ceiling"] > 0).to_numpy()
            ax.plot(
                x[ceiling],
                mean["epsilon_lower_ceiling"][ceiling],
                ":",
                color="grey",
                label="ceiling (the most this audit can show)",
            )
            drawn.append(mean["epsilon_lower_ceiling"].to_numpy(float)[ceiling])
            log_axis(ax, x)
            log_axis(ax, np.concatenate(drawn), which="y")
            ax.set_xlabel(point_label(mech) or str(mine["param_name"].iloc[0]))
            ax.set_ylabel("ε")
            ax.set_title(mech)
            ax.legend(fontsize=7, loc="best")
        _finish(fig, title)
    return fig
