"""Every attack of a cell against what its mechanism releases, with the reference models the
calibrated variants read."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from attacks import AttackData, AttackResult, AttackSettings, Records, Release, build_attack
from attacks.registry import get_attack
from attacks.threat import missing
from audit.attack_plan import attack_settings, calibrates
from audit.cell.gen_accuracy import Generated
from audit.cell.membership import (
    MIN_REFERENCE_RECORDS,
    attack_data,
    independent_membership,
    reference_positions,
    reference_records,
)
from audit.cell.reference_training import ReferenceSet, reference_set
from audit.cell.references import (
    ReferenceModel,
    _specs,
)
from audit.cell.target import TrainedTarget
from audit.config import CellConfig
from audit.mechanisms import CellData, Context, get_mechanism
from dpvae_core.precision import mixed_precision
from dpvae_core.records import Modality
from dpvae_core.seeding import Purpose, derive_seed


@dataclass(frozen=True)
class Attacked:
    """The attack step: D_atk, the release the attacker held (reference records and models
    included), every result, and whether D_atk's membership was drawn by independent coins."""

    data: AttackData
    release: Release
    results: list[AttackResult]
    references: tuple[ReferenceSet, ...]  # mechanism-copying first, then non-private
    independent: bool
    notes: dict[str, str]


log = logging.getLogger(__name__)


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
    fresh: tuple[ReferenceModel, ...] = (),
) -> tuple[ReferenceSet, ...]:
    """The cell's reference model sets (:func:`cell_reference_specs`: mechanism-copying first,
    then non-private for a private mechanism), those of ``cached`` and ``fresh`` (trained by
    this cell with its target) that belong to them and the others trained; empty where the
    cell trains none or no attack that ``release`` serves calibrates."""
    if not release_calibrates(cell, release):
        return ()
    return tuple(
        reference_set(
            spec,
            reference,
            cached=cached,
            fresh=fresh,
            device=ctx.device,
            progress=ctx.progress,
        )
        for spec in _specs(cell, data, reference)
    )


def release_calibrates(cell: CellConfig, release: Release) -> bool:
    """Whether an attack of ``cell`` that ``release`` serves reads reference models."""
    return calibrates([name for name in cell.attacks if name not in unmet_attacks(cell, release)])


def attack_target(
    cell: CellConfig,
    data: CellData,
    target: TrainedTarget,
    generated: Generated,
    ctx: Context,
    *,
    cached: tuple[ReferenceModel, ...] = (),
    fresh: tuple[ReferenceModel, ...] = (),
) -> Attacked:
    """Every attack of the cell against what its mechanism releases (D_gen and the reference
    records and models included), on D_atk. ``cached``: reference models trained before;
    ``fresh``: those this cell trained with its target (both used where they belong)."""
    atk_data = attack_data(data, cell)
    reference = reference_records(data, cell)
    release = Release.of_kind(
        get_mechanism(cell.mech).release,
        model=target.model,
        samples=released_samples(generated.x, generated.y),
        reference=reference,
    )
    references = calibration_models(
        cell, data, release, reference, ctx, cached=tuple(cached), fresh=tuple(fresh)
    )
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
