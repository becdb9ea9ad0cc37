"""A cell's rows, built in one place from what its steps produced (:func:`build_cell_rows`).

:func:`audit.sweep.cell_run.run_cell` runs the steps (train the target, measure it, generate D_gen
and score its classifier, attack, audit); this module turns their outputs into one
:class:`~audit.rows.row.Row` per attack result: the cell's facts, the result's metrics with how
sure they are (:mod:`audit.rows.row_uncertainty`), what the attacker saw
(:mod:`audit.rows.threat_columns`), the held-out worst case, and the notes on what the row assumes.
"""

from __future__ import annotations

import math
from typing import Any

from attacks import AttackResult, Release
from attacks.attack import NONPRIVATE_VARIANTS, Variant
from attacks.registry import get_attack
from audit.cell.attack_step import Attacked
from audit.cell.gen_accuracy import Generated
from audit.cell.reference_training import ReferenceSet
from audit.cell.target import Measured, TrainedTarget
from audit.cell.tuning import tuning_notes
from audit.config import CellConfig
from audit.empirical.cell_audit import CellAudit
from audit.mechanisms import CellData
from audit.rows.row import Row
from audit.rows.row_uncertainty import cell_worst_case, result_columns, worst_case_uncertainty
from audit.rows.threat_columns import threat_columns
from audit.rows.tradeoff import majority_share
from dpvae_core.seeding import Purpose, derive_seed
from models.generation import Generation

#: What a row says about how D_gen was drawn, where that touches privacy.
GENERATION_NOTES: dict[Generation, dict[str, str]] = {
    Generation.CLASS_LATENT: {
        "generation": "class-latent (the trade-off paper): z ~ q(z|x) of the target's training "
        "records per class, so D_gen reads those records (perturbed ones under ldp/vae-ldp) "
        "besides the released model, and under cdp that use of D_train is outside the accounting",
    },
}

#: How D_gen's labels were drawn (every row's ``gen_labels`` note).
GEN_LABELS_NOTE = (
    "D_gen's class counts follow D_val's class shares (largest remainders, seeded order): "
    "no D_train record is read, so D_gen's labels release nothing about D_train"
)

#: What every row releases besides the mechanism's output, computed on the private records and
#: covered by no epsilon (the row's ``privacy_notes`` say so).
OUTSIDE_ACCOUNTING = (
    "n_train (|D_train|), train_test_gap (the target VAE's losses on the real D_train and "
    "D_test), latent_hoyer, latent_mmd and latent_mmd_sparse (statistics of the target's codes "
    "of D_train) and train_diverged (from the training losses on D_train) are computed on "
    "private records outside the accounting"
)
MEAN_BATCH_NOTE = ", so is mean_batch_size (the realised Poisson batches' mean size)"


def release_notes(notes: dict[str, Any]) -> dict[str, str]:
    """The ``released_outside_accounting`` note for a row whose other notes are ``notes``."""
    extra = MEAN_BATCH_NOTE if "mean_batch_size" in notes else ""
    return {"released_outside_accounting": OUTSIDE_ACCOUNTING + extra}


def worst_case_columns(results: list[AttackResult], *, seed: int) -> list[dict[str, object]]:
    """The worst-case columns of each result's row, in order: ``worst_case`` True on the one
    result :func:`~audit.rows.row_uncertainty.cell_worst_case` picks on half of D_atk (``seed``:
    the cell's), and on every row that result's MI AP (with its bootstrap interval and chance
    quantiles at the half's counts) and TPR at FPR 1 % on the other half. With fewer than two
    members or non-members D_atk cannot be halved: ``worst_case`` None and NaN metrics."""
    worst = cell_worst_case(results, seed=seed)
    if worst is None:
        return [{"worst_case": None} for _ in results]
    held_out = worst_case_uncertainty(worst)
    return [{"worst_case": i == worst.index, **held_out} for i in range(len(results))]


def result_rows(
    common: dict[str, Any],
    results: list[AttackResult],
    *,
    release: Release,
    references: tuple[ReferenceSet, ...],
    independent: bool,
    seed: int,
    delta: float,
) -> tuple[Row, ...]:
    """One row per result: ``common`` (the columns every row shares), the result's keys,
    counts and metrics with how sure they are (:func:`audit.rows.row_uncertainty.result_columns`),
    what the attacker saw and knew (:func:`audit.rows.threat_columns.threat_columns`), and the
    held-out worst case (:func:`worst_case_columns`, seeded from ``seed``).

    The one row builder of a sweep's cells and of releases made outside the suite.
    ``independent``: whether D_atk's membership was drawn by independent fair coins (else
    ``epsilon_lower_attack`` is NaN and says why); ``delta``: the claim's (NaN: none).
    """
    worst = worst_case_columns(results, seed=seed)
    uncertainty_seed = derive_seed(seed, Purpose.ATTACK, "uncertainty") % 2**32
    n_reference = 0 if release.reference is None else len(release.reference)
    sets = dict(zip((False, True), references, strict=False))  # keyed by "non-private variant"
    rows = []
    for result, columns in zip(results, worst, strict=True):
        own = {
            **result.to_row(),
            **result_columns(
                result.scores,
                result.is_member,
                seed=uncertainty_seed,
                delta=delta,
                independent=independent,
                claim_epsilon=float(common.get("epsilon", math.nan)),
            ),
            **threat_columns(
                get_attack(result.attack).needs,
                distance=result.distance.value,
                variant=result.variant.value,
                reference_records=n_reference,
                **_models_read(sets, result.variant),
            ),
        }
        rows.append(Row(**common, **own, **columns))
    return tuple(rows)


def _models_read(sets: dict[bool, ReferenceSet], variant: Variant) -> dict[str, object]:
    """``reference_models`` and ``models_trained`` of :func:`threat_columns` for a result of
    ``variant``: the non-private set for the ``-nonprivate`` variants, else the first
    (mechanism-copying; for mech none, non-private) set."""
    chosen = sets.get(variant in NONPRIVATE_VARIANTS.values())
    if chosen is None:
        return {"reference_models": 0, "models_trained": ""}
    return {"reference_models": len(chosen.models), "models_trained": chosen.spec.recipe.describe()}


def build_cell_rows(
    cell: CellConfig,
    data: CellData,
    target: TrainedTarget,
    measured: Measured,
    generated: Generated,
    attacked: Attacked,
    audited: CellAudit,
    *,
    facts: dict[str, Any],
) -> tuple[Row, ...]:
    """The cell's rows, one per attack result. ``facts``: the run's own columns (acc_real,
    wall_s, code_version, baseline_hash)."""
    claim, history = target.claim, target.trained.history
    notes = {
        **data.notes,
        **target.prepared.notes,
        **claim.extra,
        **GENERATION_NOTES.get(target.family.generation, {}),
        "gen_labels": GEN_LABELS_NOTE,
        **attacked.notes,
        **({"gen_nonfinite_records_zeroed": generated.nonfinite} if generated.nonfinite else {}),
        **({"empirical_audit": audited.note} if audited.note else {}),
        **tuning_notes(cell),
    }
    notes.update(release_notes(notes))
    common = {
        "dataset": cell.dataset,
        "mech": cell.mech,
        "param_name": cell.param_name,
        "param_value": cell.param_value if cell.param_value is not None else math.nan,
        "seed": cell.seed,
        "profile": cell.option("profile_name", ""),
        "acc": generated.acc,
        "acc_base": 1.0 / data.num_classes,
        "acc_majority": majority_share(data.test[1]),
        **measured.latents,
        "train_diverged": measured.diverged,
        "train_test_gap": measured.loss_test - measured.loss_train,
        "epsilon": claim.epsilon,
        "delta": claim.delta,
        "epsilon_method": claim.method,
        "accountant": claim.accountant,
        "privacy_notes": "; ".join(f"{k}={v}" for k, v in notes.items()),
        "epochs": cell.profile.epochs,
        "batch_size": cell.profile.batch_size,
        "lr": cell.profile.lr,
        "latent_dim": cell.profile.latent_dim,
        "n_train": len(data.train[0]),
        "n_attack": len(attacked.data.is_member),
        "n_test": len(data.test[0]),
        "gen_records": len(generated.y),
        "clip_norm": math.nan if history.dp is None else history.dp.clip_norm,
        "config_hash": cell.config_hash,
        **facts,
        **audited.columns(),
    }
    return result_rows(
        common,
        attacked.results,
        release=attacked.release,
        references=attacked.references,
        independent=attacked.independent,
        seed=cell.seed,
        delta=claim.delta if math.isfinite(claim.delta) else math.nan,
    )
