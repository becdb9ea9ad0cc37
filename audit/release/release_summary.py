"""What a person reads first of a cell's rows: one line per cell and threat model (the Python
API's ``.summary()``, of a release attacked from outside the suite and of a sweep alike).

A threat model is what the attacker holds of the release (the rows' ``attacker_sees``): the
samples only, the decoder, or the whole VAE (encoder and decoder). They nest: whoever holds the
decoder can draw samples and run every sample attack, whoever holds the whole VAE every decoder
attack too; so each threat model's line is over its own attacks and those of the weaker ones.
Per line: the strongest attack on all attacked records (its MI AP with the row's 95 % bootstrap
interval: a maximum over attacks, biased upward), the held-out worst case over those attacks
(:func:`attacks.worst_case.held_out_worst_case`: picked on one seeded half, measured on the
other, with its interval and the blind attacker's 95 % quantile at the half's counts), the
verdict (``beyond chance`` / ``at chance``), the utility and the DCR check.

The widest threat model's worst case is the cell's own (``worst_mi_ap`` of its rows); a
narrower one's is computed again from the cell's scores with the cell's worst-case seed, by the
same function, so the two agree where the attacks do.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from attacks.attack import AttackResult, Distance, Measure, Variant
from attacks.threat import Capability
from attacks.worst_case import held_out_count
from audit.results import SCORES_FILE, cell_path, load_attack_scores, scores_key
from audit.rows.derived import as_flag
from audit.rows.row_uncertainty import (
    AT_CHANCE,
    BEYOND,
    cell_worst_case,
    worst_case_uncertainty,
)
from audit.rows.threat_columns import SEES
from audit.rows.tradeoff import chance_accuracy

#: Threat models from the weakest attacker to the strongest.
THREAT_ORDER: tuple[str, ...] = (
    SEES[frozenset({Capability.SAMPLES})],
    SEES[frozenset({Capability.DECODER})],
    SEES[frozenset({Capability.ENCODER, Capability.DECODER})],
)

#: The grid point of a cell (what tells a sweep's summary lines apart besides the threat model).
CELL_COLUMNS = ("dataset", "mech", "param_name", "param_value", "seed")
SUMMARY_COLUMNS: tuple[str, ...] = (
    *CELL_COLUMNS,
    "threat_model",
    "attacks",
    "strongest_attack",
    "strongest_mi_ap",
    "strongest_mi_ap_low",
    "strongest_mi_ap_high",
    "worst_attack",
    "worst_mi_ap",
    "worst_mi_ap_low",
    "worst_mi_ap_high",
    "worst_mi_ap_null_q95",
    "worst_members",
    "worst_nonmembers",
    "verdict",
    "acc",
    "acc_chance",
    "utility_valid",
    "dcr_share",
    "dcr_p_value",
    "dcr_passes",
    "config_hash",
)

#: (is_member, {scores key: scores}) of one cell, or None where its scores are not at hand.
CellScores = tuple[np.ndarray, Mapping[str, np.ndarray]] | None


def result_label(row: Mapping | pd.Series) -> str:
    """``attack (distance, variant)``, e.g. ``latent-search (mse, raw)``."""
    return f"{row['attack']} ({row['distance']}, {row['variant']})"


def _rank(view: str) -> int:
    return THREAT_ORDER.index(view) if view in THREAT_ORDER else len(THREAT_ORDER)


def threat_models(views: pd.Series) -> list[str]:
    """The threat models present, weakest first (unknown ones last, in order of appearance)."""
    present = list(dict.fromkeys(str(v) for v in views))
    return sorted(present, key=lambda v: (_rank(v), present.index(v)))


def _included(rows: pd.DataFrame, view: str) -> pd.DataFrame:
    """The rows an attacker holding ``view`` can run: its own, and those of weaker views."""
    sees = rows["attacker_sees"].astype(str)
    if view not in THREAT_ORDER:
        return rows[sees == view]
    return rows[sees.map(lambda v: v == view or _rank(v) < _rank(view))]


def _verdict(flag: bool | None) -> str:
    return "" if flag is None else (BEYOND if flag else AT_CHANCE)


def _as_distance(value: str) -> Distance | Measure:
    try:
        return Distance(value)
    except ValueError:
        return Measure(value)


def _worst_from_scores(rows: pd.DataFrame, scores: CellScores, seed: int) -> dict[str, object]:
    """The held-out worst case over ``rows``' results, from the cell's scores, seeded as the
    cell's (:func:`audit.rows.row_uncertainty.cell_worst_case`); NaN where the scores are
    missing."""
    empty = {"worst_attack": "", "worst_mi_ap": math.nan, "worst_mi_ap_low": math.nan}
    if scores is None:
        return empty
    is_member, arrays = scores
    results = []
    for _, r in rows.iterrows():
        key = scores_key(str(r["attack"]), str(r["distance"]), str(r["variant"]))
        if key not in arrays:
            return empty
        results.append(
            AttackResult(
                attack=str(r["attack"]),
                distance=_as_distance(str(r["distance"])),
                scores=np.asarray(arrays[key], dtype=np.float64),
                is_member=is_member,
                n_samples=1,
                variant=Variant(str(r["variant"])),
            )
        )
    worst = cell_worst_case(results, seed=seed)
    if worst is None:
        return empty
    held = worst_case_uncertainty(worst)
    return {
        "worst_attack": f"{worst.attack} ({worst.distance}, {worst.variant})",
        **{k: held[k] for k in ("worst_mi_ap", "worst_mi_ap_low", "worst_mi_ap_high")},
        "worst_mi_ap_null_q95": held.get("worst_mi_ap_null_q95", math.nan),
        "worst_beyond_chance": held.get("worst_beyond_chance"),
        "worst_members": int(worst.is_member.sum()),
        "worst_nonmembers": int((~worst.is_member).sum()),
    }


def _worst_from_rows(rows: pd.DataFrame) -> dict[str, object]:
    """The cell's own held-out worst case, as its rows carry it."""
    chosen = rows[rows["worst_case"].map(as_flag) == True]  # noqa: E712  (True / False / None)
    if chosen.empty:
        return {"worst_attack": "", "worst_mi_ap": math.nan}
    w = chosen.iloc[0]
    members, nonmembers = int(w["attack_members"]), int(w["attack_nonmembers"])
    return {
        "worst_attack": result_label(w),
        "worst_mi_ap": float(w["worst_mi_ap"]),
        "worst_mi_ap_low": float(w.get("worst_mi_ap_low", math.nan)),
        "worst_mi_ap_high": float(w.get("worst_mi_ap_high", math.nan)),
        "worst_mi_ap_null_q95": float(w.get("worst_mi_ap_null_q95", math.nan)),
        "worst_beyond_chance": w.get("worst_beyond_chance"),
        "worst_members": held_out_count(members),
        "worst_nonmembers": held_out_count(nonmembers),
    }


def cell_summary(rows: pd.DataFrame, scores: CellScores) -> list[dict[str, object]]:
    """One line per threat model of one cell's rows (in its results' order)."""
    first = rows.iloc[0]
    chance = chance_accuracy(
        float(first.get("acc_base", math.nan)), float(first.get("acc_majority", math.nan))
    )
    cell = {c: first.get(c) for c in CELL_COLUMNS}
    lines = []
    for view in threat_models(rows["attacker_sees"]):
        mine = _included(rows, view)
        top = mine.loc[mine["mi_ap"].astype(float).idxmax()]
        whole = len(mine) == len(rows)
        worst = (
            _worst_from_rows(rows)
            if whole
            else _worst_from_scores(mine, scores, int(first["seed"]))
        )
        beyond = as_flag(worst.pop("worst_beyond_chance", None))
        lines.append(
            {
                **cell,
                "threat_model": view,
                "attacks": len(mine),
                "strongest_attack": result_label(top),
                "strongest_mi_ap": float(top["mi_ap"]),
                "strongest_mi_ap_low": float(top.get("mi_ap_low", math.nan)),
                "strongest_mi_ap_high": float(top.get("mi_ap_high", math.nan)),
                **worst,
                "verdict": _verdict(beyond),
                "acc": float(first.get("acc", math.nan)),
                "acc_chance": chance,
                "utility_valid": as_flag(first.get("utility_valid")),
                "dcr_share": float(first.get("dcr_share", math.nan)),
                "dcr_p_value": float(first.get("dcr_p_value", math.nan)),
                "dcr_passes": as_flag(first.get("dcr_passes")),
                "config_hash": first.get("config_hash"),
            }
        )
    return lines


def summary_frame(
    table: pd.DataFrame, scores: Callable[[str], CellScores] = lambda digest: None
) -> pd.DataFrame:
    """One line per cell and threat model of ``table`` (rows as ``runs.csv`` holds them), in
    the table's cell order; ``scores(config_hash)`` gives a cell's scores (needed for the held-out
    worst case of a threat model narrower than the cell's release)."""
    lines: list[dict[str, object]] = []
    if not table.empty:
        for digest, rows in table.groupby("config_hash", sort=False):
            lines += cell_summary(rows, scores(str(digest)))
    return pd.DataFrame(lines, columns=list(SUMMARY_COLUMNS))


def cell_scores(run_dir: Path) -> Callable[[str], CellScores]:
    """``scores`` for :func:`summary_frame` from the cells' ``scores.npz`` under ``run_dir``."""

    def read(digest: str) -> CellScores:
        path = cell_path(Path(run_dir), digest) / SCORES_FILE
        if not path.is_file():
            return None
        is_member, keyed = load_attack_scores(path)  # checked: schema, is_member, shapes
        return is_member, {scores_key(*key): values for key, values in keyed.items()}

    return read


def one_line(summary: pd.DataFrame) -> str:
    """The widest threat model's worst case of each cell, one short clause per cell: what the
    repr of a release attack's or a sweep's result says."""
    if summary.empty:
        return "no rows"
    widest = summary.groupby("config_hash", sort=False).tail(1)
    parts = []
    for _, s in widest.iterrows():
        if not math.isfinite(float(s["worst_mi_ap"])):
            parts.append(f"{s['threat_model']}: no held-out worst case")
            continue
        interval = ""
        if math.isfinite(float(s.get("worst_mi_ap_low", math.nan))):
            interval = f" [{s['worst_mi_ap_low']:.3f}, {s['worst_mi_ap_high']:.3f}]"
        parts.append(
            f"worst case {s['worst_attack']} MI AP {s['worst_mi_ap']:.3f}{interval}"
            + (f", {s['verdict']}" if s["verdict"] else "")
        )
    return "; ".join(parts)
