"""One row of ``runs.csv``: one (dataset, mechanism, parameter, seed, attack, distance, variant).

:class:`Row` is the record the pipeline builds for each result of each attack of a cell; its
fields, in order, are the CSV's columns (:data:`COLUMNS`), so no module lists them by hand.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from attacks.attack import Variant
from attacks.reconstruction import ReconstructionAttack


@dataclass(frozen=True, kw_only=True)
class Row:
    """A cell's measurements under one attack result, with the cell's configuration and claim.

    Its fields, in this order, are the columns of ``runs.csv``. What each one is and which step
    fills it (:func:`audit.rows.filling.build_cell_rows` for the cell's rows,
    :func:`audit.results.collect_rows` for the columns that need the baseline): ``docs/rows.md``.
    A field with a default is filled by a later step or only in some rows, and stays NaN, None,
    ``''`` or 0 where it does not apply.
    """

    dataset: str
    mech: str
    param_name: str
    param_value: float
    seed: int
    attack: str
    distance: str
    variant: str
    profile: str
    mi_ap: float
    mi_auc: float
    tpr_at_fpr_1pct: float
    tpr_at_fpr_01pct: float
    mi_ap_low: float = math.nan
    mi_ap_high: float = math.nan
    mi_auc_low: float = math.nan
    mi_auc_high: float = math.nan
    mi_ap_null_q50: float = math.nan
    mi_ap_null_q95: float = math.nan
    beyond_chance: bool | None = None
    tpr_at_fpr_1pct_low: float = math.nan
    tpr_at_fpr_1pct_high: float = math.nan
    tpr_at_fpr_01pct_low: float = math.nan
    tpr_at_fpr_01pct_high: float = math.nan
    tpr_note: str = ""
    worst_case: bool | None = None
    worst_mi_ap: float = math.nan
    worst_mi_ap_low: float = math.nan
    worst_mi_ap_high: float = math.nan
    worst_mi_ap_null_q50: float = math.nan
    worst_mi_ap_null_q95: float = math.nan
    worst_beyond_chance: bool | None = None
    worst_tpr_at_fpr_1pct: float = math.nan
    attacker_sees: str = ""
    side_reference_records: int = 0
    side_reference_models: int = 0
    side_models_trained: str = ""
    acc: float
    acc_base: float
    acc_real: float
    utility_valid: bool | None = None
    n_test: int
    gen_records: int
    train_test_gap: float
    acc_majority: float = math.nan
    train_diverged: bool | None = None
    epsilon: float
    delta: float
    epsilon_method: str
    accountant: str
    privacy_notes: str
    phi: float = math.nan
    phi_paper: float = math.nan
    phi_note: str = ""
    epochs: int
    batch_size: int
    lr: float
    latent_dim: int
    n_train: int
    n_attack: int
    attack_samples: int
    clip_norm: float
    wall_s: float
    config_hash: str
    code_version: str
    attack_members: int
    attack_nonmembers: int
    attack_nonfinite: int = 0
    baseline_hash: str
    epsilon_lower: float = math.nan
    epsilon_lower_estimator: str = ""
    epsilon_lower_fdp: float = math.nan
    epsilon_lower_input_fdp: float = math.nan
    epsilon_lower_kind: str = ""
    epsilon_lower_m: int = 0
    epsilon_lower_ceiling: float = math.nan
    epsilon_lower_input: float = math.nan
    epsilon_lower_input_m: int = 0
    epsilon_lower_input_ceiling: float = math.nan
    epsilon_lower_p: float = math.nan
    epsilon_lower_fdp_p: float = math.nan
    epsilon_lower_input_p: float = math.nan
    epsilon_lower_input_fdp_p: float = math.nan
    epsilon_lower_attack: float = math.nan
    epsilon_lower_attack_ceiling: float = math.nan
    epsilon_lower_attack_note: str = ""
    epsilon_lower_attack_p: float = math.nan
    latent_hoyer: float = math.nan
    latent_mmd: float = math.nan
    latent_mmd_sparse: float = math.nan
    phi_worst: float = math.nan
    phi_worst_paper: float = math.nan
    dcr_samples: int = 0
    dcr_share: float = math.nan
    dcr_expected_share: float = math.nan
    dcr_p_value: float = math.nan
    dcr_passes: bool | None = None

    def __post_init__(self) -> None:
        for name in ("attack", "distance", "variant"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value or "_" in value:
                raise ValueError(
                    f"{name} must be a non-empty name without '_' (score files are keyed "
                    f"scores_<attack>_<distance>), got {value!r}"
                )

    def to_dict(self) -> dict[str, Any]:
        """The row as ``rows.json`` stores it: every field, in column order."""
        return asdict(self)


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Row))
"""The columns of ``runs.csv`` a cell writes, in order."""

COLLECTED_COLUMNS: tuple[str, ...] = ("run_hash", "setting_hash", "precision")
"""Columns added when rows are collected from the cells (:func:`audit.results.collect_rows`)."""

GRID_POINT: tuple[str, ...] = ("dataset", "mech", "param_name", "param_value", "seed")
"""What names a row's cell within a run (with the run's profile)."""

RESULT_KEY: tuple[str, ...] = ("attack", "distance", "variant")
"""What tells a cell's rows apart: one row per attack result."""

PAPER_ATTACK = ReconstructionAttack.name
"""The trade-off paper's attack: what a cell runs by default where its release allows it, what a
threshold entry that names no attack limits, and the attack whose results the report labels by
distance alone."""
PLAIN_VARIANT = Variant.MEAN.value
"""The reconstruction attack's only variant (a mean over latent samples), left out of its score
keys."""
