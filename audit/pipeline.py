"""One grid cell end to end (paper 003, Figure 1): mechanism -> target VAE -> D_gen -> classifier
accuracy, and every attack of the cell (:attr:`CellConfig.attacks`) against what the mechanism
releases, on unperturbed members vs non-members."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from enum import Enum
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attacks import AttackData, AttackResult, AttackSettings, Records, Release, build_attack
from attacks.registry import get_attack
from attacks.threat import missing
from attacks.worst_case import held_out_worst_case
from audit import io
from audit.attack_plan import attack_settings, calibrates
from audit.config import CellConfig
from audit.datasets import Dataset, Split
from audit.empirical.cell_audit import audit_cell
from audit.mechanisms import CellData, Context, get_mechanism
from audit.reference_models import (
    ReferenceModel,
    ReferenceSet,
    ReferenceSpec,
    cell_spec,
    reference_set,
)
from audit.results import AttackedRecords, scores_key, write_attack_set
from audit.rows import Row
from audit.target_training import train_target
from dpvae_core.records import Modality
from dpvae_core.seeding import Purpose, derive_seed, numpy_rng
from models.factory import CLASSIFIER_RECIPES, model_family
from models.generation import Generation, finite_records, gen_labels, generate
from models.latent_metrics import latent_summary
from models.training import (
    ClassifierSettings,
    Pair,
    accuracy,
    evaluate_vae_loss,
    holdout_split,
    train_classifier,
)

log = logging.getLogger(__name__)

GEN_HOLDOUT = 0.2  # share of D_gen held out for the classifier's early stopping
#: What a row says about how D_gen was drawn, where that touches privacy.
GENERATION_NOTES: dict[Generation, dict[str, str]] = {
    Generation.CLASS_LATENT: {
        "generation": "class-latent (paper 003): z ~ q(z|x) of the target's training records "
        "per class, so D_gen reads those records (perturbed ones under ldp/vae-ldp) besides "
        "the released model, and under cdp that use of D_train is outside the accounting",
    },
}

#: What every row releases besides the mechanism's output, computed on the private records and
#: covered by no epsilon (the row's ``privacy_notes`` say so).
OUTSIDE_ACCOUNTING = (
    "n_train (|D_train|) and train_test_gap (the target VAE's losses on the real D_train and "
    "D_test) are computed on private records outside the accounting"
)
MEAN_BATCH_NOTE = ", so is mean_batch_size (the realised Poisson batches' mean size)"


def release_notes(notes: dict[str, Any]) -> dict[str, str]:
    """The ``released_outside_accounting`` note for a row whose other notes are ``notes``."""
    extra = MEAN_BATCH_NOTE if "mean_batch_size" in notes else ""
    return {"released_outside_accounting": OUTSIDE_ACCOUNTING + extra}


@dataclass(frozen=True)
class CellOutcome:
    rows: tuple[Row, ...]
    model_state: dict[str, torch.Tensor]
    history: dict[str, Any]
    scores: dict[str, np.ndarray]
    attacked: AttackedRecords | None = None  # what the report's reconstruction grids show
    references: ReferenceSet | None = None  # the reference models (the driver caches new ones)


def cell_data(dataset: Dataset, split: Split, cell: CellConfig) -> CellData:
    """Tensors of the split, with D_train capped at ``profile.max_train`` (stratified, seeded).

    A series dataset with ``channel_ranges`` is clipped into those fixed per-channel ranges and
    mapped to [-1, 1] record by record (no statistic of any record is used); every split, and so
    the mechanisms, the target VAE, the classifier and the attack, sees that one scale. The
    returned ``notes`` say so and go into every row of the cell.
    """
    train_idx = split.train
    cap = cell.profile.max_train
    if cap is not None and cap < len(train_idx):
        rng = numpy_rng(cell.seed, Purpose.SPLIT, "cap")
        subset = balanced_subset if cell.profile.balanced_train else _stratified_subset
        train_idx = subset(train_idx, dataset.y[train_idx], cap, rng)
    scaler = dataset.channel_ranges

    def pair(idx: np.ndarray) -> Pair:
        x = dataset.x[idx] if scaler is None else scaler.transform(dataset.x[idx])
        return torch.from_numpy(x), torch.from_numpy(dataset.y[idx])

    n_total = len(train_idx) + len(split.val) + len(split.test)
    notes = {}
    if dataset.modality is Modality.SERIES:
        notes["series_scaling"] = "series given in [-1, 1]" if scaler is None else scaler.describe()
    return CellData(
        pair(train_idx),
        pair(split.val),
        pair(split.test),
        dataset.num_classes,
        n_total,
        notes=notes,
        train_index=train_idx,
        test_index=split.test,
    )


def _stratified_subset(
    idx: np.ndarray, y: np.ndarray, k: int, rng: np.random.Generator
) -> np.ndarray:
    """k indices of ``idx`` keeping each class's share (largest remainders), sorted."""
    classes, counts = np.unique(y, return_counts=True)
    quota = counts * k / len(y)
    take = np.floor(quota).astype(int)
    for i in np.argsort(-(quota - take))[: k - take.sum()]:
        take[i] += 1
    chosen = [
        rng.choice(idx[y == c], size=t, replace=False) for c, t in zip(classes, take, strict=True)
    ]
    return np.sort(np.concatenate(chosen))


def balanced_subset(idx: np.ndarray, y: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k indices of ``idx`` spread over the classes as evenly as their sizes allow, sorted.

    Water-filling: every class gets min(n_c, t) records for the largest t whose total is at most
    k; the records left over go one each to the largest classes still holding more (ties: the
    lower label). LFW20, k = 200: 10 per person.
    """
    classes, counts = np.unique(y, return_counts=True)
    take = np.zeros(len(classes), dtype=int)
    while take.sum() < k:
        open_ = np.flatnonzero(take < counts)
        room = k - take.sum()
        if len(open_) <= room:
            take[open_] += 1
        else:
            largest = open_[np.argsort(-counts[open_], kind="stable")][:room]
            take[largest] += 1
    chosen = [
        rng.choice(idx[y == c], size=t, replace=False) for c, t in zip(classes, take, strict=True)
    ]
    return np.sort(np.concatenate(chosen))


def _attack_positions(data: CellData, cell: CellConfig) -> tuple[np.ndarray, np.ndarray]:
    """(members: positions in D_train, non-members: positions in D_test) of the balanced D_atk."""
    limit = cell.profile.attack_records
    n_each = min(len(data.train[0]), len(data.test[0]))
    if limit is not None:
        n_each = min(n_each, limit // 2)
    rng = numpy_rng(cell.seed, Purpose.ATTACK, "records")
    members = np.sort(rng.choice(len(data.train[0]), size=n_each, replace=False))
    others = np.sort(rng.choice(len(data.test[0]), size=n_each, replace=False))
    return members, others


def attack_set(data: CellData, cell: CellConfig) -> AttackData:
    """Balanced D_atk: members from D_train, non-members from D_test, always UNPERTURBED."""
    members, others = _attack_positions(data, cell)
    n_each = len(members)
    x = torch.cat([data.train[0][members], data.test[0][others]])
    y = torch.cat([data.train[1][members], data.test[1][others]])
    is_member = np.concatenate([np.ones(n_each, bool), np.zeros(n_each, bool)])
    return AttackData(x=x, y=y, is_member=is_member)


MIN_REFERENCE_RECORDS = 20
"""Fewest reference records a cell hands the attacker; with fewer it holds none (DOMIAS's KDE
needs more records than its 10 PCA dimensions, and so few records estimate no density), and
the attacks needing them do not run. There is no upper cap: every D_test record outside D_atk
is a reference record, whatever the profile."""


def reference_positions(data: CellData, cell: CellConfig) -> np.ndarray:
    """Positions in D_test of the cell's reference records: every D_test record that is not one
    of D_atk's non-members (:func:`attack_set`), sorted.

    Notes:
        They are in neither D_train nor D_atk, and no training of the cell reads them: the
        target VAE trains on D_train (early stopping on D_val), ldp and vae-ldp perturb D_train
        and D_val, vae-ldp's perturbation model fits D_val or D_train, the classifiers fit D_gen
        or D_train (early stopping on a D_gen holdout or D_val). D_test scores the classifiers
        and the train-test gap only.
    """
    _, nonmembers = _attack_positions(data, cell)
    return np.setdiff1d(np.arange(len(data.test[0])), nonmembers)


def reference_records(data: CellData, cell: CellConfig) -> Records | None:
    """The attacker's reference records (:func:`reference_positions`), unperturbed; None when
    there are fewer than :data:`MIN_REFERENCE_RECORDS`."""
    positions = reference_positions(data, cell)
    if len(positions) < MIN_REFERENCE_RECORDS:
        return None
    return Records(data.test[0][positions], data.test[1][positions])


def cell_reference_spec(cell: CellConfig, data: CellData) -> ReferenceSpec | None:
    """:func:`~audit.reference_models.cell_spec` of the cell's own reference records (what the
    sweep's driver looks up in the cache before the cell runs)."""
    return cell_spec(cell, data, reference_records(data, cell))


def reference_note(
    data: CellData,
    cell: CellConfig,
    reference: Records | None,
    references: ReferenceSet | None = None,
) -> str:
    """What a row says of its reference set and models (the ``reference`` privacy note)."""
    n = len(reference_positions(data, cell))
    if reference is None:
        return (
            f"none (only {n} D_test records outside D_atk, fewer than {MIN_REFERENCE_RECORDS}), "
            "no reference models (calibrated variants not run)"
        )
    records = f"{n} D_test records outside D_atk"
    if references is not None:
        return f"{records}, reference models: {references.note()}"
    if not calibrates(cell.attacks):
        return f"{records}, no reference models (no attack of the cell calibrates)"
    return f"{records}, no reference models (reference-models 0: calibrated variants not run)"


def calibration_models(
    cell: CellConfig,
    data: CellData,
    release: Release,
    reference: Records | None,
    ctx: Context,
    *,
    cached: tuple[ReferenceModel, ...] = (),
) -> ReferenceSet | None:
    """The cell's reference models (:func:`cell_reference_spec`), those of ``cached`` that belong to
    them and the others trained; None where the cell trains none or no attack that ``release``
    serves calibrates."""
    spec = cell_spec(cell, data, reference)
    runs = [name for name in cell.attacks if name not in unmet_attacks(cell, release)]
    if spec is None or not calibrates(runs):
        return None
    return reference_set(spec, reference, cached=cached, device=ctx.device, progress=ctx.progress)


def attacked_records(data: CellData, cell: CellConfig) -> AttackedRecords | None:
    """D_atk of :func:`attack_set` as dataset rows (same records, same order), and D_train's
    rows; None where ``data`` does not say its rows (not cut from a dataset)."""
    if data.train_index is None or data.test_index is None:
        return None
    members, others = _attack_positions(data, cell)
    return AttackedRecords(
        index=np.concatenate([data.train_index[members], data.test_index[others]]),
        is_member=np.concatenate([np.ones(len(members), bool), np.zeros(len(others), bool)]),
        train_index=np.asarray(data.train_index),
    )


def classifier_settings(cell: CellConfig, device: str, purpose: str) -> ClassifierSettings:
    p = cell.profile
    return ClassifierSettings(
        epochs=p.classifier_epochs,
        patience=p.classifier_patience,
        seed=derive_seed(cell.seed, Purpose.CLASSIFIER, purpose) % 2**31,
        device=device,
        **CLASSIFIER_RECIPES.get(p.classifier or "", {}),
    )


def classifier_accuracy(
    train: Pair,
    val: Pair,
    test: Pair,
    *,
    num_classes: int,
    settings: ClassifierSettings,
    ctx: Context,
    desc: str,
    kind: str | None = None,
) -> float:
    """Train the target classifier on ``train`` (early stop on ``val``); accuracy on real ``test``.

    The classifier is the modality's (:func:`models.factory.model_family`): a small CNN for
    images, HAR-CNN for series; ``kind`` names another (the profile's ``classifier``).
    """
    family = model_family(train[0].shape[1:], num_classes)
    model = train_classifier(
        partial(family.classifier, kind), train, val, settings, progress=ctx.progress, desc=desc
    )
    return accuracy(model, test)


#: An epoch loss this many times the first epoch's (the untrained model's) is divergence: a
#: healthy run's epoch loss falls from its first epoch's (DP noise makes it wobble by percents).
DIVERGENCE_FACTOR = 10.0


def training_diverged(train_loss: Sequence[float]) -> bool:
    """Whether a training run's epoch losses show divergence: any non-finite one, or one above
    :data:`DIVERGENCE_FACTOR` times the first epoch's (seen on LFW20 at the quick profile: an
    exploding posterior variance took the loss from 8.4e3 to 4e27 in one epoch)."""
    losses = [float(x) for x in train_loss]
    if not losses:
        return False
    if not all(math.isfinite(x) for x in losses):
        return True
    first = abs(losses[0])
    return any(x > DIVERGENCE_FACTOR * first for x in losses[1:])


def _loss_summary(train_loss: Sequence[float]) -> str:
    losses = [float(x) for x in train_loss]
    return f"first {losses[0]:.4g}, largest {max(losses):.4g}, last {losses[-1]:.4g}"


def majority_share(labels: torch.Tensor) -> float:
    """The share of the most common label (NaN for no labels)."""
    if len(labels) == 0:
        return math.nan
    return float(torch.bincount(labels).max()) / len(labels)


def run_cell(
    cell: CellConfig,
    data: CellData,
    ctx: Context,
    *,
    acc_real: float,
    code_version: str,
    baseline_hash: str,
    cached_references: tuple[ReferenceModel, ...] = (),
) -> CellOutcome:
    """Run one cell; returns one row per result of each of its attacks (keyed by attack,
    distance and variant), the target model's state and its history. ``baseline_hash``: the
    config hash of the cell's non-private baseline, recorded in every row.
    ``cached_references``: reference models trained before (:func:`calibration_models` uses
    those of this cell's spec and trains the others; the outcome carries them)."""
    start = time.perf_counter()
    mech = get_mechanism(cell.mech)
    target = train_target(cell, data, ctx)
    model, prepared, trained, claim = target.model, target.prepared, target.trained, target.claim
    family = target.family
    history = trained.history
    diverged = training_diverged(history.train_loss)
    if diverged:
        log.warning(
            "cell %s (%s %s=%s, seed %s): the target VAE's training diverged (epoch losses %s); "
            "its rows measure a broken model and the gate fails them",
            cell.config_hash,
            cell.mech.value,
            cell.param_name,
            cell.param_value,
            cell.seed,
            _loss_summary(history.train_loss),
        )
    gap_seed = derive_seed(cell.seed, Purpose.TRAIN, "gap") % 2**63
    loss_train = evaluate_vae_loss(model, data.train, beta=cell.profile.beta, seed=gap_seed)
    loss_test = evaluate_vae_loss(model, data.test, beta=cell.profile.beta, seed=gap_seed)

    latents = latent_summary(
        model, *data.train, seed=derive_seed(cell.seed, Purpose.TRAIN, "latent-metrics") % 2**63
    )

    n_gen = cell.profile.gen_records or len(data.train[1])  # None: |D_train|, the old rule
    labels = gen_labels(data.train[1], n_gen, seed=cell.seed)
    gen_x, gen_y = generate(
        model, labels, seed=cell.seed, method=family.generation, source=prepared.train
    )
    gen_x, gen_nonfinite = finite_records(gen_x)
    if gen_nonfinite:
        log.warning(
            "cell %s: %d of %d generated records had NaN or infinite values, set to 0",
            cell.config_hash,
            gen_nonfinite,
            len(gen_x),
        )
    fit, hold = holdout_split(
        len(gen_x),
        fraction=GEN_HOLDOUT,
        seed=derive_seed(cell.seed, Purpose.GENERATE, "holdout") % 2**32,
    )
    acc = classifier_accuracy(
        (gen_x[fit], gen_y[fit]),
        (gen_x[hold], gen_y[hold]),
        data.test,
        num_classes=data.num_classes,
        settings=classifier_settings(cell, ctx.device, "gen"),
        ctx=ctx,
        desc="classifier on D_gen",
        kind=cell.profile.classifier,
    )

    atk_data = attack_set(data, cell)
    reference = reference_records(data, cell)
    release = Release.of_kind(
        mech.release, model=model, samples=released_samples(gen_x, gen_y), reference=reference
    )
    references = calibration_models(
        cell, data, release, reference, ctx, cached=tuple(cached_references)
    )
    if references is not None:
        release = replace(release, reference_models=references.modules(device=ctx.device))
    results = run_attacks(cell, release, atk_data, ctx, modality=family.modality)
    worst = worst_case_columns(results, seed=derive_seed(cell.seed, Purpose.ATTACK, "worst-case"))
    audited = audit_cell(cell, data, ctx, claim)

    wall = time.perf_counter() - start
    notes = {
        **data.notes,
        **prepared.notes,
        **claim.extra,
        **GENERATION_NOTES.get(family.generation, {}),
        "reference": reference_note(data, cell, reference, references),
        **({"gen_nonfinite_records_zeroed": gen_nonfinite} if gen_nonfinite else {}),
        **not_run_note(cell, release),
        **({"empirical_audit": audited.note} if audited.note else {}),
    }
    notes.update(release_notes(notes))
    facts = {
        "dataset": cell.dataset,
        "mech": cell.mech.value,
        "param_name": cell.param_name,
        "param_value": cell.param_value if cell.param_value is not None else math.nan,
        "seed": cell.seed,
        "profile": cell.option("profile_name", ""),
        "acc": acc,
        "acc_base": 1.0 / data.num_classes,
        "acc_majority": majority_share(data.test[1]),
        **latents,
        "train_diverged": diverged,
        "acc_real": acc_real,
        "train_test_gap": loss_test - loss_train,
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
        "n_attack": len(atk_data.is_member),
        "n_test": len(data.test[0]),
        "gen_records": len(gen_y),
        "clip_norm": math.nan if history.dp is None else history.dp.clip_norm,
        "wall_s": wall,
        "config_hash": cell.config_hash,
        "code_version": code_version,
        "baseline_hash": baseline_hash,
        **audited.columns(),
    }
    rows = tuple(
        Row(**facts, **result.to_row(), **columns)
        for result, columns in zip(results, worst, strict=True)
    )
    hist = {
        "train_loss": history.train_loss,
        "val_loss": history.val_loss,
        "dp_run": None if history.dp is None else _plain(asdict(history.dp)),
        "train_notes": dict(trained.notes),
        "loss_train_real": loss_train,
        "loss_test_real": loss_test,
    }
    scores = {scores_key(r.attack, r.distance.value, r.variant.value): r.scores for r in results}
    scores["is_member"] = atk_data.is_member
    return CellOutcome(
        rows=rows,
        model_state=model.state_dict(),
        history=hist,
        scores=scores,
        attacked=attacked_records(data, cell),
        references=references,
    )


def _plain(value: Any) -> Any:
    """``value`` with Enums as their values (for JSON)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value.value if isinstance(value, Enum) else value


def released_samples(gen_x: torch.Tensor, gen_y: torch.Tensor) -> Records | None:
    """D_gen as the attacker holds it; None (with a warning) where the decoder produced NaN or
    infinite values, which no attack can compare (attacks needing samples then do not apply)."""
    if not bool(torch.isfinite(gen_x).all()):
        log.warning("D_gen holds NaN or infinite values; it is not released to the attacks")
        return None
    return Records(gen_x, gen_y)


def unmet_attacks(cell: CellConfig, release: Release) -> dict[str, frozenset]:
    """The attacks of ``cell`` that ``release`` cannot serve, with what each lacks: the plan
    (:func:`audit.attack_plan.plan_attacks`) assumes D_gen and reference records, but D_gen is
    withheld when it holds NaN (:func:`released_samples`) and a small D_test leaves no reference
    records (:func:`reference_records`)."""
    lacking = {name: missing(get_attack(name), release) for name in cell.attacks}
    return {name: caps for name, caps in lacking.items() if caps}


def not_run_note(cell: CellConfig, release: Release) -> dict[str, str]:
    """The ``not_run`` privacy note naming the cell's attacks its release could not serve."""
    unmet = unmet_attacks(cell, release)
    if not unmet:
        return {}
    parts = [
        f"{name} (lacks {', '.join(sorted(c.value for c in caps))})" for name, caps in unmet.items()
    ]
    return {"not_run": ", ".join(parts)}


def worst_case_columns(results: list[AttackResult], *, seed: int) -> list[dict[str, object]]:
    """The worst-case columns of each result's row, in order: ``worst_case`` True on the one
    result :func:`~attacks.worst_case.held_out_worst_case` picks on half of D_atk, and on every
    row that result's MI AP and TPR at FPR 1 % on the other half (``worst_mi_ap``,
    ``worst_tpr_at_fpr_1pct``). With fewer than two members or non-members D_atk cannot be
    halved: ``worst_case`` None and NaN metrics."""
    if min(int(results[0].is_member.sum()), int((~results[0].is_member).sum())) < 2:
        return [{"worst_case": None} for _ in results]
    worst = held_out_worst_case(results, seed=seed)
    chosen = (worst.attack, worst.distance, worst.variant)
    return [
        {
            "worst_case": (r.attack, r.distance.value, r.variant.value) == chosen,
            "worst_mi_ap": worst.metrics.mi_ap,
            "worst_tpr_at_fpr_1pct": worst.metrics.tpr_at_fpr_1pct,
        }
        for r in results
    ]


def run_attacks(
    cell: CellConfig, release: Release, data: AttackData, ctx: Context, *, modality: Modality
) -> list[AttackResult]:
    """Every attack of ``cell`` that ``release`` serves (the others, :func:`unmet_attacks`, are
    skipped with a warning), each built by name from the profile's settings and seeded from the
    cell's attack seed; results in the cell's attack order, then each attack's own."""
    unmet = unmet_attacks(cell, release)
    for name, caps in unmet.items():
        lacks = ", ".join(sorted(c.value for c in caps))
        log.warning("attack %s not run: this cell's release lacks %s", name, lacks)
    settings = attack_settings(attack_samples=cell.profile.attack_samples, modality=modality)
    names = [n for n in cell.attacks if n not in unmet]
    return run_release_attacks(names, release, data, settings=settings, seed=cell.seed, ctx=ctx)


def run_release_attacks(
    names: Sequence[str],
    release: Release,
    data: AttackData,
    *,
    settings: AttackSettings,
    seed: int,
    ctx: Context,
) -> list[AttackResult]:
    """The attacks ``names`` (each one that ``release`` serves) on ``data``, each built by name
    from ``settings`` and seeded from ``seed``'s attack seed; results in the order of ``names``,
    then each attack's own. The one attack runner of the sweep's cells and of releases made
    outside the suite (:mod:`audit.release`); ValueError where no attack ran."""
    attack_seed = derive_seed(seed, Purpose.ATTACK)
    results: list[AttackResult] = []
    for name in names:
        attack = build_attack(name, seed=attack_seed, device=ctx.device, settings=settings)
        bar = ctx.progress(total=data.n_records, desc=f"attack: {name}")
        results.extend(attack.run_release(release, data, progress=bar.update).values())
        bar.close()
    if not results:
        raise ValueError(
            f"no attack of {list(names)} could run on this release "
            f"({', '.join(sorted(c.value for c in release.capabilities)) or 'nothing'})"
        )
    return results


def save_outcome(cell_dir: Path, cell: CellConfig, outcome: CellOutcome, metadata: dict) -> None:
    """Write the cell's files; ``rows.json`` goes last and marks the cell finished."""
    io.write_json(cell_dir / "config.json", {"config": cell.canonical(), "hash": cell.config_hash})
    io.write_json(cell_dir / "metadata.json", metadata)
    io.write_json(cell_dir / "history.json", outcome.history)
    io.save_state(cell_dir / "model.pt", {"model": outcome.model_state})
    io.save_npz(cell_dir / "scores.npz", outcome.scores)
    if outcome.attacked is not None:
        write_attack_set(cell_dir, outcome.attacked)
    io.write_json(cell_dir / "rows.json", {"rows": [row.to_dict() for row in outcome.rows]})
