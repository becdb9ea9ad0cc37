"""Columns derived from several rows of a run: utility validity, phi and phi of the held-out
worst case against each row's non-private baseline, and the worst-case rows themselves.

Filled when rows are collected from the cells (:func:`audit.results.table.collect_rows`); the
phi formula itself is :func:`audit.tradeoff.phi_score`.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from audit.config import MechanismName
from audit.rows import RESULT_KEY
from audit.tradeoff import above_chance, phi_score


def _baseline(frame: pd.DataFrame, row: Any) -> pd.DataFrame:
    """The rows of ``row``'s baseline cell with the same attack result (attack, distance,
    variant): phi compares an attack with itself on the non-private model."""
    same = frame.config_hash == row.baseline_hash
    for column in RESULT_KEY:
        same &= frame[column] == getattr(row, column)
    return frame[same]


def _utility_valid(frame: pd.DataFrame, row: Any) -> bool:
    """Whether the row's non-private baseline classifies above chance (:func:`above_chance`),
    chance being the larger of 1/#classes and D_test's majority-class share: only then does its
    accuracy axis (acc, phi, sweet spots) measure anything. The baseline's accuracy is its
    cell's, whatever attacks it ran: a row of an attack the baseline did not run (dp2vae's
    decoder-only attacks against a reconstruction-only baseline) is judged by it too."""
    base = frame[frame.config_hash == row.baseline_hash]
    if base.empty or "n_test" not in frame:
        return False
    b = base.iloc[0]
    chance = float(b.acc_base)
    majority = float(getattr(b, "acc_majority", math.nan))
    if math.isfinite(majority):  # a constant classifier scores the majority class's share
        chance = max(chance, majority)
    return above_chance(float(b.acc), n_test=float(b.n_test), chance=chance)


def _phi(frame: pd.DataFrame, row: Any) -> float:
    if row.mech == MechanismName.NONE.value:
        return math.nan
    base = _baseline(frame, row)
    if base.empty:
        return math.nan
    b = base.iloc[0]
    return phi_score(
        atk_orig=b.mi_ap, atk=row.mi_ap, acc_orig=b.acc, acc=row.acc, acc_base=row.acc_base
    )


#: The attack name and distance of a cell's held-out worst case over its attacks, as a row of
#: its own (:func:`worst_case_rows`): what the report plots and the gate's thresholds limit.
WORST_CASE_ATTACK = "worst-case"
WORST_CASE_DISTANCE = "held-out"


def worst_case_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per cell of ``frame`` with a held-out worst case (``worst_mi_ap`` finite): the
    cell's first row with attack :data:`WORST_CASE_ATTACK`, distance and variant
    :data:`WORST_CASE_DISTANCE`, MI AP ``worst_mi_ap``, TPR at 1 % FPR
    ``worst_tpr_at_fpr_1pct`` and phi ``phi_worst`` (the attack picked on one half of D_atk,
    measured on the other; ``attacks.worst_case``). Empty where no cell has one."""
    if "worst_mi_ap" not in frame.columns:
        return frame.iloc[0:0]
    cells = frame[frame["worst_mi_ap"].notna()].drop_duplicates("config_hash")
    worst = cells.assign(
        attack=WORST_CASE_ATTACK,
        distance=WORST_CASE_DISTANCE,
        variant=WORST_CASE_DISTANCE,
        mi_ap=cells["worst_mi_ap"],
        phi=cells["phi_worst"] if "phi_worst" in cells.columns else math.nan,
    )
    for column in WORST_CASE_COLUMNS:
        if f"worst_{column}" in worst.columns:
            worst[column] = worst[f"worst_{column}"]
    if "worst_beyond_chance" in worst.columns:
        worst["beyond_chance"] = worst["worst_beyond_chance"]
    return worst


#: The held-out worst case's own columns (``worst_<name>``) its row shows as ``<name>``.
WORST_CASE_COLUMNS = (
    "tpr_at_fpr_1pct",
    "mi_ap_low",
    "mi_ap_high",
    "mi_ap_null_q50",
    "mi_ap_null_q95",
)


def _phi_worst(frame: pd.DataFrame, row: Any) -> float:
    """phi of the row's cell at its held-out worst case (``worst_mi_ap``: the attack picked on
    one half of D_atk, measured on the other) against the baseline cell's held-out worst case;
    NaN where either is unknown."""
    if row.mech == MechanismName.NONE.value or "worst_mi_ap" not in frame:
        return math.nan
    base = frame[frame.config_hash == row.baseline_hash]
    if base.empty:
        return math.nan
    b = base.iloc[0]
    return phi_score(
        atk_orig=float(b.worst_mi_ap),
        atk=float(row.worst_mi_ap),
        acc_orig=b.acc,
        acc=row.acc,
        acc_base=row.acc_base,
    )


def add_derived_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (every row of a run) with ``utility_valid``, ``phi`` and ``phi_worst`` filled:
    phi only where the row's baseline classifies above chance."""
    rows = list(frame.itertuples(index=False))
    frame["utility_valid"] = [_utility_valid(frame, row) for row in rows]
    rows = list(frame.itertuples(index=False))
    frame["phi"] = [_phi(frame, row) if row.utility_valid else math.nan for row in rows]
    frame["phi_worst"] = [
        _phi_worst(frame, row) if row.utility_valid else math.nan for row in rows
    ]
    return frame
