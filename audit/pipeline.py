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
from audit import io
from audit.attack_plan import attack_settings, calibrates
from audit.cell_rows import (
    Attacked,
    Generated,
    Measured,
    cell_rows,
    scores_of,
)
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
from audit.results import AttackedRecords, write_attack_set
from audit.rows import Row
from audit.target_training import TrainedTarget, train_target
from dpvae_core.precision import mixed_precision
from dpvae_core.records import Modality
from dpvae_core.seeding import Purpose, derive_seed, numpy_rng
from models.classifier_training import ClassifierSettings, accuracy, holdout_split, train_classifier
from models.face_embedding import FACE_EMBEDDING, embedding_accuracy
from models.factory import CLASSIFIER_RECIPES, model_family
from models.generation import finite_records, gen_labels, generate
from models.latent_metrics import latent_summary
from models.training import Pair, evaluate_vae_loss

log = logging.getLogger(__name__)

GEN_HOLDOUT = 0.2  # share of D_gen held out for the classifier's early stopping


@dataclass(frozen=True)
class CellOutcome:
    rows: tuple[Row, ...]
    model_state: dict[str, torch.Tensor]
    history: dict[str, Any]
    scores: dict[str, np.ndarray]
    attacked: AttackedRecords | None = None  # what the report's reconstruction grids show
    references: tuple[ReferenceSet, ...] = ()  # the reference models (the driver caches new ones)


def cell_data(dataset: Dataset, split: Split, cell: CellConfig) -> CellData:
    """Tensors of the split, with D_train capped at ``profile.max_train`` (stratified, seeded)
    and, with ``profile.membership_coins``, D_atk's membership drawn by independent fair coins
    (:func:`membership_by_coins`; else D_atk is drawn balanced when attacked).

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
    test_idx, members, others, notes = split.test, None, None, {}
    if cell.profile.membership_coins:
        train_idx, test_idx, members, others = membership_by_coins(train_idx, test_idx, cell)
        notes["attack_membership"] = MEMBERSHIP_NOTE
    scaler = dataset.channel_ranges

    def pair(idx: np.ndarray) -> Pair:
        x = dataset.x[idx] if scaler is None else scaler.transform(dataset.x[idx])
        return torch.from_numpy(x), torch.from_numpy(dataset.y[idx])

    n_total = len(train_idx) + len(split.val) + len(test_idx)
    if dataset.modality is Modality.SERIES:
        notes["series_scaling"] = "series given in [-1, 1]" if scaler is None else scaler.describe()
    return CellData(
        pair(train_idx),
        pair(split.val),
        pair(test_idx),
        dataset.num_classes,
        n_total,
        notes=notes,
        train_index=train_idx,
        test_index=test_idx,
        attack_members=members,
        attack_nonmembers=others,
    )


MEMBERSHIP_NOTE = (
    "D_atk's 2n candidates (n from the split's D_train, n from its D_test) each joined D_train "
    "on an independent fair coin (seeded per seed), so |D_train| and the member count vary"
)


def _attack_count(n_train: int, n_test: int, cell: CellConfig) -> int:
    """n: D_atk's records from each side of the split (balanced on average)."""
    limit = cell.profile.attack_records
    n_each = min(n_train, n_test)
    return n_each if limit is None else min(n_each, limit // 2)


def membership_by_coins(
    train_idx: np.ndarray, test_idx: np.ndarray, cell: CellConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(D_train rows, D_test rows, members' positions in D_train, non-members' positions in
    D_test): D_atk's candidates are n records of the split's D_train and n of its D_test
    (:func:`_attack_count`, seeded); each then goes to D_train on its own fair coin.

    Notes:
        Steinke, Nasr and Jagielski's one-run analysis (2023, Algorithm 1) needs each audited
        record included independently with probability 1/2; a balanced draw (exactly n members)
        is not that. The candidates are chosen before, and independently of, the coins, and
        every record outside them keeps its side, so D_atk's membership is i.i.d. fair coins
        given everything else, and every attack's scores give an epsilon lower bound
        (:mod:`audit.empirical.attack_bound`). Coins are keyed by the seed alone: every cell of
        a seed (its baseline included) has the same D_train and D_atk.
    """
    n_each = _attack_count(len(train_idx), len(test_idx), cell)
    rng = numpy_rng(cell.seed, Purpose.ATTACK, "records")
    candidates = np.concatenate(
        [
            rng.choice(train_idx, size=n_each, replace=False),
            rng.choice(test_idx, size=n_each, replace=False),
        ]
    )
    coins = numpy_rng(cell.seed, Purpose.ATTACK, "membership").random(candidates.size) < 0.5
    train = np.sort(np.concatenate([np.setdiff1d(train_idx, candidates), candidates[coins]]))
    test = np.sort(np.concatenate([np.setdiff1d(test_idx, candidates), candidates[~coins]]))
    members = np.searchsorted(train, np.sort(candidates[coins]))
    others = np.searchsorted(test, np.sort(candidates[~coins]))
    return train, test, members, others


def independent_membership(data: CellData) -> bool:
    """Whether D_atk's membership was drawn by independent coins (:func:`cell_data` does;
    data built by hand, with a balanced D_atk, does not)."""
    return data.attack_members is not None


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
    """(members: positions in D_train, non-members: positions in D_test) of D_atk: those
    :func:`cell_data` drew by coins, or for data without them a balanced seeded draw."""
    if data.attack_members is not None and data.attack_nonmembers is not None:
        return data.attack_members, data.attack_nonmembers
    n_each = _attack_count(len(data.train[0]), len(data.test[0]), cell)
    rng = numpy_rng(cell.seed, Purpose.ATTACK, "records")
    members = np.sort(rng.choice(len(data.train[0]), size=n_each, replace=False))
    others = np.sort(rng.choice(len(data.test[0]), size=n_each, replace=False))
    return members, others


def attack_set(data: CellData, cell: CellConfig) -> AttackData:
    """D_atk: members from D_train, non-members from D_test, always UNPERTURBED."""
    members, others = _attack_positions(data, cell)
    x = torch.cat([data.train[0][members], data.test[0][others]])
    y = torch.cat([data.train[1][members], data.test[1][others]])
    is_member = np.concatenate([np.ones(len(members), bool), np.zeros(len(others), bool)])
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


def cell_reference_specs(cell: CellConfig, data: CellData) -> tuple[ReferenceSpec, ...]:
    """The specs of the cell's reference models on its own reference records (what the sweep's
    driver looks up in the cache before the cell runs): the mechanism-copying set, then, for a
    private mechanism, the non-private one (:func:`~audit.reference_models.cell_spec`); empty
    where the cell trains none."""
    return _specs(cell, data, reference_records(data, cell))


def _specs(
    cell: CellConfig, data: CellData, reference: Records | None
) -> tuple[ReferenceSpec, ...]:
    copying = cell_spec(cell, data, reference)
    if copying is None:
        return ()
    plain = cell_spec(cell, data, reference, copy_mechanism=False)
    return (copying,) if plain is None or plain.key == copying.key else (copying, plain)


def reference_note(
    data: CellData,
    cell: CellConfig,
    reference: Records | None,
    references: tuple[ReferenceSet, ...] = (),
) -> str:
    """What a row says of its reference set and models (the ``reference`` privacy note)."""
    n = len(reference_positions(data, cell))
    if reference is None:
        return (
            f"none (only {n} D_test records outside D_atk, fewer than {MIN_REFERENCE_RECORDS}), "
            "no reference models (calibrated variants not run)"
        )
    records = f"{n} D_test records outside D_atk"
    if references:
        sets = " and ".join(
            f"{'non-private' if r.spec.recipe.nonprivate else 'mechanism-copying'} "
            f"reference models: {r.note()}"
            for r in references
        )
        return f"{records}, {sets}"
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
) -> tuple[ReferenceSet, ...]:
    """The cell's reference model sets (:func:`cell_reference_specs`: mechanism-copying first,
    then non-private for a private mechanism), those of ``cached`` that belong to them and the
    others trained; empty where the cell trains none or no attack that ``release`` serves
    calibrates."""
    runs = [name for name in cell.attacks if name not in unmet_attacks(cell, release)]
    if not calibrates(runs):
        return ()
    return tuple(
        reference_set(spec, reference, cached=cached, device=ctx.device, progress=ctx.progress)
        for spec in _specs(cell, data, reference)
    )


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
        precision=cell.precision,
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
    images, HAR-CNN for series; ``kind`` names another (the profile's ``classifier``):
    ``face-embedding`` is dlib's frozen face descriptor with a logistic regression chosen on
    ``val`` (:mod:`models.face_embedding`).
    """
    if kind == FACE_EMBEDDING:
        return embedding_accuracy(train, val, test, device=settings.device)
    family = model_family(train[0].shape[1:], num_classes)
    model = train_classifier(
        partial(family.classifier, kind), train, val, settings, progress=ctx.progress, desc=desc
    )
    with mixed_precision(settings.device, settings.precision):
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
    those of this cell's specs and trains the others; the outcome carries them)."""
    start = time.perf_counter()
    target = train_target(cell, data, ctx)
    measured = measure_target(cell, data, target)
    generated = generate_and_classify(cell, data, target, ctx)
    attacked = attack_target(cell, data, target, generated, ctx, cached=cached_references)
    audited = audit_cell(cell, data, ctx, target.claim)
    facts = {
        "acc_real": acc_real,
        "wall_s": time.perf_counter() - start,
        "code_version": code_version,
        "baseline_hash": baseline_hash,
    }
    rows = cell_rows(cell, data, target, measured, generated, attacked, audited, facts=facts)
    return CellOutcome(
        rows=rows,
        model_state=target.model.state_dict(),
        history=_history(target, measured),
        scores=scores_of(attacked),
        attacked=attacked_records(data, cell),
        references=attacked.references,
    )


def measure_target(cell: CellConfig, data: CellData, target: TrainedTarget) -> Measured:
    """Whether training diverged (logged), the losses on real D_train and D_test, and the
    latent metrics of D_train's codes."""
    history = target.trained.history
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
    model = target.model
    gap_seed = derive_seed(cell.seed, Purpose.TRAIN, "gap") % 2**63
    latent_seed = derive_seed(cell.seed, Purpose.TRAIN, "latent-metrics") % 2**63
    return Measured(
        diverged=diverged,
        loss_train=evaluate_vae_loss(model, data.train, beta=cell.profile.beta, seed=gap_seed),
        loss_test=evaluate_vae_loss(model, data.test, beta=cell.profile.beta, seed=gap_seed),
        latents=latent_summary(model, *data.train, seed=latent_seed),
    )


def generate_and_classify(
    cell: CellConfig, data: CellData, target: TrainedTarget, ctx: Context
) -> Generated:
    """D_gen from the target (NaN values zeroed, with a warning) and the accuracy on real
    D_test of the classifier trained on it (early stopping on a held-out share of D_gen).
    """
    labels = generation_labels(cell, data)
    with mixed_precision(ctx.device, cell.precision):  # the decoders return float32
        gen_x, gen_y = generate(
            target.model,
            labels,
            seed=cell.seed,
            method=target.family.generation,
            source=target.prepared.train,
        )
    gen_x, nonfinite = finite_records(gen_x)
    if nonfinite:
        log.warning(
            "cell %s: %d of %d generated records had NaN or infinite values, set to 0",
            cell.config_hash,
            nonfinite,
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
    return Generated(gen_x, gen_y, nonfinite, acc)


def generation_labels(cell: CellConfig, data: CellData) -> torch.Tensor:
    """D_gen's labels: ``gen_records`` (None: |D_train|, the old rule) of them with D_val's
    class shares (exact counts, largest remainders), in seeded order.

    Notes:
        D_val's shares, not D_train's: they read no D_train record. With D_train's counts,
        adding a record would change D_gen's label counts deterministically and model plus D_gen
        would have no finite epsilon (:data:`audit.cell_rows.GEN_LABELS_NOTE`).
    """
    n_gen = cell.profile.gen_records or len(data.train[1])
    return gen_labels(data.val[1], n_gen, seed=cell.seed)


def attack_target(
    cell: CellConfig,
    data: CellData,
    target: TrainedTarget,
    generated: Generated,
    ctx: Context,
    *,
    cached: tuple[ReferenceModel, ...] = (),
) -> Attacked:
    """Every attack of the cell against what its mechanism releases (D_gen and the reference
    records and models included), on D_atk."""
    atk_data = attack_set(data, cell)
    reference = reference_records(data, cell)
    release = Release.of_kind(
        get_mechanism(cell.mech).release,
        model=target.model,
        samples=released_samples(generated.x, generated.y),
        reference=reference,
    )
    references = calibration_models(cell, data, release, reference, ctx, cached=tuple(cached))
    if references:  # the mechanism-copying set (mech none: non-private), then the non-private
        copying, *plain = references
        release = replace(
            release,
            reference_models=copying.modules(device=ctx.device),
            nonprivate_reference_models=plain[0].modules(device=ctx.device) if plain else (),
        )
    with mixed_precision(ctx.device, cell.precision):  # decoding; the scores come out float32
        results = run_attacks(cell, release, atk_data, ctx, modality=target.family.modality)
    notes = {
        "reference": reference_note(data, cell, reference, references),
        **not_run_note(cell, release),
    }
    return Attacked(
        data=atk_data,
        release=release,
        results=results,
        references=references,
        independent=independent_membership(data),
        notes=notes,
    )


def _history(target: TrainedTarget, measured: Measured) -> dict[str, Any]:
    history = target.trained.history
    return {
        "train_loss": history.train_loss,
        "val_loss": history.val_loss,
        "dp_run": None if history.dp is None else _plain(asdict(history.dp)),
        "train_notes": dict(target.trained.notes),
        "loss_train_real": measured.loss_train,
        "loss_test_real": measured.loss_test,
    }


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
