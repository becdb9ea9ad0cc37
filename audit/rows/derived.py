"""Columns derived from several rows of a run: utility validity, phi and phi of the held-out
worst case against each row's non-private baseline (the reader's, clipped at chance, and the
paper's raw formula), and the worst-case rows themselves.

Filled when rows are collected from the cells (:func:`audit.results.table.collect_rows`); the
phi formula itself is :func:`audit.rows.tradeoff.phi_score`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from audit.mechanisms import BASELINE
from audit.rows.row import RESULT_KEY
from audit.rows.tradeoff import above_chance, chance_accuracy, phi_clipped, phi_score


def _baseline(frame: pd.DataFrame, row: Any) -> pd.DataFrame:
    """The rows of ``row``'s baseline cell with the same attack result (attack, distance,
    variant): phi compares an attack with itself on the non-private model."""
    same = frame.config_hash == row.baseline_hash
    for column in RESULT_KEY:
        same &= frame[column] == getattr(row, column)
    return frame[same]


def _baseline_chance(b: Any) -> float:
    return chance_accuracy(float(b.acc_base), float(getattr(b, "acc_majority", math.nan)))


def accuracy_valid(
    *, acc: float, acc_base: float, acc_majority: float, n_test: float
) -> bool | None:
    """Whether accuracy ``acc`` on ``n_test`` labelled test records is above chance =
    max(1/#classes, their majority share) (:func:`above_chance`); None where no accuracy was
    measured (NaN)."""
    if not math.isfinite(acc):
        return None
    chance = chance_accuracy(acc_base, acc_majority)
    return above_chance(acc, n_test=n_test, chance=chance)


def _utility_valid(frame: pd.DataFrame, row: Any) -> bool | None:
    """Whether the row's non-private baseline classifies above chance (:func:`above_chance`),
    chance being the larger of 1/#classes and D_test's majority-class share: only then does its
    accuracy axis (acc, phi, sweet spots) measure anything. The baseline's accuracy is its
    cell's, whatever attacks it ran: a row of an attack the baseline did not run (dp2vae's
    decoder-only attacks against a reconstruction-only baseline) is judged by it too. A row
    without a baseline (an attacked release: ``baseline_hash`` empty) is judged by its own
    accuracy (:func:`accuracy_valid`; None without one)."""
    if not (isinstance(row.baseline_hash, str) and row.baseline_hash):
        return accuracy_valid(
            acc=float(row.acc),
            acc_base=float(row.acc_base),
            acc_majority=float(getattr(row, "acc_majority", math.nan)),
            n_test=float(getattr(row, "n_test", math.nan)),
        )
    base = frame[frame.config_hash == row.baseline_hash]
    if base.empty or "n_test" not in frame:
        return False
    b = base.iloc[0]
    valid = accuracy_valid(
        acc=float(b.acc),
        acc_base=float(b.acc_base),
        acc_majority=float(getattr(b, "acc_majority", math.nan)),
        n_test=float(b.n_test),
    )
    return bool(valid)  # a baseline without an accuracy is not valid


def as_flag(value: object) -> bool | None:
    """A bool column's value as rows.json (bool) or a CSV (text) holds it; None if unknown."""
    if value is True or str(value) == "True":
        return True
    if value is False or str(value) == "False":
        return False
    return None


@dataclass(frozen=True)
class Phi:
    """phi of one row against its baseline: the reader's (:func:`phi_clipped`, NaN with
    ``note`` saying why where it means nothing) and the paper's raw formula."""

    phi: float
    paper: float
    note: str = ""


NO_PHI = Phi(math.nan, math.nan)


def _phi_pair(row: Any, b: Any, *, prefix: str, what: str) -> Phi:
    """:class:`Phi` of ``row`` against baseline row ``b`` at their ``{prefix}mi_ap`` (``""``:
    the attack result; ``"worst_"``: the held-out worst case), with the baseline's
    ``{prefix}beyond_chance`` and ``{prefix}mi_ap_null_q95`` saying whether there is privacy to
    lose."""
    atk_orig, atk = float(getattr(b, f"{prefix}mi_ap")), float(getattr(row, f"{prefix}mi_ap"))
    paper = phi_score(
        atk_orig=atk_orig, atk=atk, acc_orig=b.acc, acc=row.acc, acc_base=row.acc_base
    )
    if not row.utility_valid:
        return Phi(math.nan, paper, f"{what}: the non-private utility is not above chance")
    if as_flag(getattr(b, f"{prefix}beyond_chance", None)) is not True:
        q95 = float(getattr(b, f"{prefix}mi_ap_null_q95", math.nan))
        band = f" (its blind attacker's 95 % quantile {q95:.3f})" if math.isfinite(q95) else ""
        return Phi(
            math.nan,
            paper,
            f"{what}: the non-private attack (MI AP {atk_orig:.3f}) is not beyond its chance "
            f"band{band}, so there is no privacy to lose",
        )
    phi = phi_clipped(
        atk_orig=atk_orig, atk=atk, acc_orig=b.acc, acc=row.acc, chance=_baseline_chance(b)
    )
    return Phi(phi, paper)


def _phi(frame: pd.DataFrame, row: Any) -> Phi:
    """phi of the row's attack result against the same result on its baseline cell."""
    if row.mech == BASELINE:
        return NO_PHI
    base = _baseline(frame, row)
    return NO_PHI if base.empty else _phi_pair(row, base.iloc[0], prefix="", what="phi")


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


def _phi_worst(frame: pd.DataFrame, row: Any) -> Phi:
    """phi of the row's cell at its held-out worst case (``worst_mi_ap``: the attack picked on
    one half of D_atk, measured on the other) against the baseline cell's held-out worst case;
    NaN where either is unknown."""
    if row.mech == BASELINE or "worst_mi_ap" not in frame:
        return NO_PHI
    base = frame[frame.config_hash == row.baseline_hash]
    return NO_PHI if base.empty else _phi_pair(row, base.iloc[0], prefix="worst_", what="phi_worst")


def add_derived_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (every row of a run) with ``utility_valid``, ``phi``, ``phi_paper``,
    ``phi_worst``, ``phi_worst_paper`` and ``phi_note`` filled.

    ``phi``/``phi_worst`` are :func:`phi_clipped` (MI AP clipped at 0.5, accuracy at chance),
    empty where the baseline's utility is not above chance or its attack (its held-out worst
    case) is not beyond its chance band, ``phi_note`` saying which; ``*_paper`` are the trade-off
    paper's raw Eq. 2 (:func:`phi_score`, ACC_base = 1/#classes), for comparison with its
    figures."""
    rows = list(frame.itertuples(index=False))
    frame["utility_valid"] = [_utility_valid(frame, row) for row in rows]
    rows = list(frame.itertuples(index=False))
    per_attack = [_phi(frame, row) for row in rows]
    worst = [_phi_worst(frame, row) for row in rows]
    frame["phi"] = [p.phi for p in per_attack]
    frame["phi_paper"] = [p.paper for p in per_attack]
    frame["phi_worst"] = [p.phi for p in worst]
    frame["phi_worst_paper"] = [p.paper for p in worst]
    frame["phi_note"] = [
        "; ".join(n for n in (a.note, w.note) if n) for a, w in zip(per_attack, worst, strict=True)
    ]
    return frame
