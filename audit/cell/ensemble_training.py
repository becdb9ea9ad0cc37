"""A cell's target VAE and the reference models it would train, trained together as ensembles
(:mod:`models.ensemble`) where that pays.

Every model whose training is non-private Adam (:func:`audit.cell.target.nonprivate_settings`:
the target of a none, ldp or vae-ldp cell; reference models copying such a mechanism; the
non-private reference set of every cell) joins an ensemble with the models of its recipe (same
architecture and settings but the seed); each trains exactly as it would alone, on its own
records and seeds. Reference models come out as the cell would have trained them (the driver
caches them, one file a model, as before) and those already in the cache are not trained
again. Models that train otherwise (DP-Adam), and recipes with one model, train alone later, by
the usual path (:func:`audit.cell.target.train_target`,
:func:`audit.cell.reference_training.reference_set`).

Where it pays: :func:`models.ensemble.ensemble_pays` (CUDA; on the CPU the solo runs are faster,
``benchmarks/bench_ensemble.py``), for models ``vmap`` batches (not the LSTM VAE). Elsewhere
nothing is trained here and a cell runs as before.

Reference models are trained here only where an attack of the cell would read them, decided on
the release the cell will make (its D_gen taken as released: a cell whose D_gen comes out NaN
withholds it, and a reference model trained here for an attack that then needs D_gen goes
unused). The ensemble's wall time is shared equally among its members' ``seconds``.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass

from attacks.threat import Release
from audit.cell.attack_step import release_calibrates
from audit.cell.membership import reference_records
from audit.cell.reference_training import ReferenceStart, finish_reference, start_reference
from audit.cell.references import ReferenceModel, cell_reference_specs
from audit.cell.target import (
    TargetStart,
    TrainedTarget,
    adam_trained,
    finish_target,
    nonprivate_settings,
    start_target,
)
from audit.config import CellConfig
from audit.mechanisms import CellData, Context, get_mechanism
from audit.mechanisms.mechanism import Trained
from models.ensemble import (
    EnsembleMember,
    ensemble_pays,
    ensemble_recipe,
    ensemble_supports,
    train_vae_ensemble,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainedTogether:
    """What :func:`train_together` trained: the target (None: it trains alone, by
    :func:`audit.cell.target.train_target`, from ``started`` where that is not None) and
    reference models (the cell's ``fresh``)."""

    target: TrainedTarget | None = None
    started: TargetStart | None = None
    references: tuple[ReferenceModel, ...] = ()


def train_together(
    cell: CellConfig,
    data: CellData,
    ctx: Context,
    *,
    cached: tuple[ReferenceModel, ...] = (),
) -> TrainedTogether:
    """Train ``cell``'s target and the reference models it lacks (not in ``cached``) as
    ensembles of equal recipes, where :func:`models.ensemble.ensemble_pays` on ``ctx.device``;
    nothing elsewhere (an empty :class:`TrainedTogether`)."""
    if not ensemble_pays(ctx.device, cell.precision):
        return TrainedTogether()
    target = start_target(cell, data, ctx)
    if not ensemble_supports(target.model):
        return TrainedTogether(started=target)
    settings = nonprivate_settings(target, cell, ctx)
    jobs: list[tuple[EnsembleMember, TargetStart | ReferenceStart]] = []
    if settings is not None:
        member = EnsembleMember(target.model, target.prepared.train, target.prepared.val, settings)
        jobs.append((member, target))
    jobs += _reference_jobs(cell, data, ctx, target, cached)
    groups: dict[tuple, list[tuple[EnsembleMember, TargetStart | ReferenceStart]]] = defaultdict(
        list
    )
    for member, start in jobs:
        groups[ensemble_recipe(member)].append((member, start))
    trained_target, references = None, []
    for group in groups.values():
        if len(group) < 2:
            continue  # one model of its recipe: it trains alone, by the usual path
        log.info("training %d VAEs of one recipe together", len(group))
        began = time.perf_counter()
        histories = train_vae_ensemble([m for m, _ in group], progress=ctx.progress)
        share = (time.perf_counter() - began) / len(group)
        for (_, start), history in zip(group, histories, strict=True):
            if isinstance(start, TargetStart):
                trained = Trained(history=history)
                trained_target = finish_target(cell, data, start, trained, share)
            else:
                model = finish_reference(start)
                references.append(_with_seconds(model, share))
    return TrainedTogether(
        target=trained_target,
        started=None if trained_target is not None else target,
        references=tuple(references),
    )


def _reference_jobs(
    cell: CellConfig,
    data: CellData,
    ctx: Context,
    target: TargetStart,
    cached: tuple[ReferenceModel, ...],
) -> list[tuple[EnsembleMember, ReferenceStart]]:
    """The reference models the cell would train (an attack of its release reads them) and the
    cache lacks, whose training is non-private Adam, started."""
    reference = reference_records(data, cell)
    if reference is None:
        return []
    kind = get_mechanism(cell.mech).release
    release = Release.of_kind(kind, model=target.model, samples=reference, reference=reference)
    if not release_calibrates(cell, release):
        return []
    have = {(m.key, m.index) for m in cached}
    jobs = []
    for spec in cell_reference_specs(cell, data):
        if not spec.recipe.nonprivate and not adam_trained(get_mechanism(spec.recipe.mechanism)):
            continue  # the copied mechanism trains with DP-Adam
        for index in range(spec.n_models):
            if (spec.key, index) in have:
                continue
            start = start_reference(spec, reference, index, device=ctx.device)
            if start.member is not None:
                jobs.append((start.member, start))
    return jobs


def _with_seconds(model: ReferenceModel, seconds: float) -> ReferenceModel:
    return ReferenceModel(
        key=model.key, index=model.index, state=model.state, records=model.records, seconds=seconds
    )
