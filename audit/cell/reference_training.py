"""Training a cell's reference models (the attacker's side models) and holding them as a set."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from attacks.threat import Records
from audit.cell.references import ReferenceModel, ReferenceRecipe, ReferenceSpec, reference_cell
from audit.cell.target import TargetStart, nonprivate_settings, start_target
from audit.config import CellConfig
from audit.mechanisms import CellData, Context
from dpvae_core.progress import ProgressFactory, null_progress
from dpvae_core.seeding import Purpose, derive_seed, numpy_rng
from models.ensemble import EnsembleMember
from models.factory import model_family
from models.lstm_vae import without_dp_lstm_aliases
from models.training import VAETrainSettings, train_vae

log = logging.getLogger(__name__)


def _subset(spec: ReferenceSpec, index: int) -> tuple[np.ndarray, np.ndarray]:
    """(training positions, the other positions), sorted, of model ``index``."""
    rng = numpy_rng(spec.seed, Purpose.REFERENCE, "records", index)
    order = rng.permutation(spec.n_reference)
    k = spec.recipe.records_per_model
    return np.sort(order[:k]), np.sort(order[k:])


def _fresh_model(recipe: ReferenceRecipe, *, init_seed: int | None) -> nn.Module:
    family = model_family(recipe.record_shape, recipe.num_classes)
    with torch.random.fork_rng(devices=[]):
        if init_seed is not None:
            torch.manual_seed(init_seed)
        return family.target_vae(latent_dim=recipe.latent_dim, per_example_gradients=False)


def _copying_start(
    spec: ReferenceSpec,
    train: tuple[torch.Tensor, torch.Tensor],
    val: tuple[torch.Tensor, torch.Tensor],
    index: int,
    ctx: Context,
) -> tuple[CellConfig, TargetStart]:
    """Model ``index`` as the copied cell's mechanism starts it, through the target's own code
    path (:func:`audit.cell.target.start_target`), on ``train``, validated on ``val``."""
    assert spec.copied is not None
    cell = reference_cell(spec.copied, batch_size=spec.recipe.batch_size, index=index)
    data = CellData(
        train=train,
        val=val,
        test=val,
        num_classes=spec.recipe.num_classes,
        n_total=spec.n_reference,
    )
    return cell, start_target(cell, data, ctx)


def _copying_state(start: TargetStart) -> dict[str, torch.Tensor]:
    """A trained mechanism-copying model's state in its inference form (DP-Adam's DPLSTMs
    fused): the keys of the model :func:`_fresh_model` builds."""
    return without_dp_lstm_aliases(start.family.for_inference(start.model).eval().state_dict())


@dataclass(frozen=True)
class ReferenceStart:
    """Reference model ``index`` of ``spec`` before training: the positions of the reference
    records it trains on, and ``member``, its training where that is non-private Adam (the
    non-private set, or a copied mechanism whose training is non-private Adam on its prepared
    records: none, ldp, vae-ldp), which an ensemble may run; None where it is not (DP-Adam)."""

    spec: ReferenceSpec
    index: int
    records: np.ndarray
    member: EnsembleMember | None
    began: float
    copying: TargetStart | None = None


def start_reference(
    spec: ReferenceSpec,
    reference: Records,
    index: int,
    *,
    device: str = "cpu",
    progress: ProgressFactory = null_progress,
) -> ReferenceStart:
    """Reference model ``index`` of ``spec`` built, initialised and its data prepared (by the
    copied mechanism, which may train a model of its own there: VAE-LDP's perturbation VAE)."""
    if len(reference) != spec.n_reference:
        raise ValueError(
            f"spec {spec.key} is for {spec.n_reference} reference records, got {len(reference)}"
        )
    if not 0 <= index < spec.n_models:
        raise ValueError(f"model index must lie in [0, {spec.n_models}), got {index!r}")
    recipe = spec.recipe
    train_at, val_at = _subset(spec, index)
    began = time.perf_counter()
    pair = (reference.x[train_at], reference.y[train_at])
    val = (reference.x[val_at], reference.y[val_at])
    if recipe.nonprivate:
        model = _fresh_model(
            recipe, init_seed=derive_seed(spec.seed, Purpose.REFERENCE, "init", index) % 2**63
        )
        settings = VAETrainSettings(
            epochs=recipe.epochs,
            batch_size=recipe.batch_size,
            lr=recipe.lr,
            beta=recipe.beta,
            seed=derive_seed(spec.seed, Purpose.REFERENCE, "train", index),
            device=device,
            precision=recipe.precision,
        )
        member = EnsembleMember(model=model, train=pair, val=val, settings=settings)
        return ReferenceStart(spec, index, train_at, member, began)
    ctx = Context(device=device, progress=progress)
    cell, start = _copying_start(spec, pair, val, index, ctx)
    plain = nonprivate_settings(start, cell, ctx)
    member = (
        None
        if plain is None
        else EnsembleMember(start.model, start.prepared.train, start.prepared.val, plain)
    )
    return ReferenceStart(spec, index, train_at, member, began, copying=start)


def finish_reference(start: ReferenceStart) -> ReferenceModel:
    """``start``'s model, its ``member`` trained, as a :class:`ReferenceModel`."""
    assert start.member is not None
    model = start.member.model
    trained = model.state_dict() if start.copying is None else _copying_state(start.copying)
    return _reference_model(start, trained)


def _reference_model(start: ReferenceStart, trained: dict[str, torch.Tensor]) -> ReferenceModel:
    return ReferenceModel(
        key=start.spec.key,
        index=start.index,
        state={name: value.detach().cpu().clone() for name, value in trained.items()},
        records=start.records.astype(np.int64),
        seconds=time.perf_counter() - start.began,
    )


def train_reference_model(
    spec: ReferenceSpec,
    reference: Records,
    index: int,
    *,
    device: str = "cpu",
    progress: ProgressFactory = null_progress,
) -> ReferenceModel:
    """Train reference model ``index`` of ``spec`` on its subset of ``reference``.

    The reference records it does not train on validate it (the loss history only; validation
    never changes the weights).
    """
    start = start_reference(spec, reference, index, device=device, progress=progress)
    member = start.member
    if member is not None:
        train_vae(member.model, member.train, member.val, member.settings, progress=progress)
        return finish_reference(start)
    begun = start.copying  # the copied mechanism trains it its own way (DP-Adam)
    assert begun is not None and spec.copied is not None
    cell = reference_cell(spec.copied, batch_size=spec.recipe.batch_size, index=index)
    begun.mech.train(begun.model, begun.prepared, cell, Context(device=device, progress=progress))
    return _reference_model(start, _copying_state(begun))


def build_reference_model(
    recipe: ReferenceRecipe, model: ReferenceModel, *, device: str = "cpu"
) -> nn.Module:
    """The trained VAE of ``model``, on ``device``, in eval mode and its inference
    implementation (:meth:`models.factory.ModelFamily.for_inference`)."""
    vae = _fresh_model(recipe, init_seed=None)
    vae.load_state_dict(model.state)
    family = model_family(recipe.record_shape, recipe.num_classes)
    return family.for_inference(vae.to(torch.device(device))).eval()


@dataclass(frozen=True)
class ReferenceSet:
    """A cell's R reference models: ``models`` in index order, ``trained`` the indices trained
    by this cell (the others came from the cache)."""

    spec: ReferenceSpec
    models: tuple[ReferenceModel, ...]
    trained: tuple[int, ...]

    @property
    def new_models(self) -> tuple[ReferenceModel, ...]:
        """The models this cell trained (what the cache lacks)."""
        return tuple(m for m in self.models if m.index in self.trained)

    @property
    def seconds_trained_here(self) -> float:
        """Training seconds spent by this cell."""
        return sum(m.seconds for m in self.new_models)

    def modules(self, *, device: str = "cpu") -> tuple[nn.Module, ...]:
        """The R VAEs, ready for the attacks."""
        return tuple(build_reference_model(self.spec.recipe, m, device=device) for m in self.models)

    def note(self) -> str:
        """What a row says of its reference models."""
        total = sum(m.seconds for m in self.models)
        cached = len(self.models) - len(self.trained)
        return (
            f"{self.spec.describe()}, {len(self.trained)} trained in this cell "
            f"({self.seconds_trained_here:.1f} s) and {cached} from the cache, "
            f"{total:.1f} s of training in all"
        )


def reference_set(
    spec: ReferenceSpec,
    reference: Records,
    *,
    cached: Iterable[ReferenceModel] = (),
    fresh: Iterable[ReferenceModel] = (),
    device: str = "cpu",
    progress: ProgressFactory = null_progress,
) -> ReferenceSet:
    """The R models of ``spec``: those of ``cached`` that belong to it, those of ``fresh`` (this
    cell trained them already, with its target: :mod:`audit.cell.ensemble_training`), the others
    trained."""
    have = {m.index: m for m in cached if m.key == spec.key and 0 <= m.index < spec.n_models}
    new = {m.index: m for m in fresh if m.key == spec.key and 0 <= m.index < spec.n_models}
    models, trained = [], []
    for index in range(spec.n_models):
        if index in new:
            have[index] = new[index]
            trained.append(index)
        elif index not in have:
            log.info("training reference VAE %d of %d (%s)", index + 1, spec.n_models, spec.key)
            have[index] = train_reference_model(
                spec, reference, index, device=device, progress=progress
            )
            trained.append(index)
        models.append(have[index])
    return ReferenceSet(spec=spec, models=tuple(models), trained=tuple(trained))
