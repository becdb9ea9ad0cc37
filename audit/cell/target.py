"""Training a cell's target VAE: the one code path that a sweep cell
(:func:`audit.sweep.cell_run.run_cell`) and the empirical audits
(:mod:`audit.empirical.one_run`) share, so that an audit audits the row's training.

The mechanism prepares the data (``prepare``), the model is built and initialised from the
cell's ``Purpose.INIT`` seed, the mechanism trains it (``train``, with ``ctx.audit_hook`` where
an audit sets one) and states its claim (``claim``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from audit.config import CellConfig
from audit.mechanisms import CellData, Context, get_mechanism
from audit.mechanisms.mechanism import Mechanism, Prepared, Trained, vae_settings
from audit.privacy.claim import PrivacyClaim
from dpvae_core.seeding import Purpose, derive_seed
from models.factory import ModelFamily, model_family
from models.latent_metrics import latent_summary
from models.training import VAETrainSettings, evaluate_vae_loss


@dataclass(frozen=True)
class Measured:
    """What the cell measured of its trained target: divergence, the losses on real D_train
    and D_test (their difference is ``train_test_gap``) and PriVAE's latent metrics."""

    diverged: bool
    loss_train: float
    loss_test: float
    latents: dict[str, float]


@dataclass(frozen=True)
class TrainedTarget:
    """The trained target VAE in inference form (eval mode), what it trained on
    (``prepared``), its history (``trained``), the claim of this training and its seconds."""

    model: torch.nn.Module
    prepared: Prepared
    trained: Trained
    claim: PrivacyClaim
    family: ModelFamily
    seconds: float


@dataclass(frozen=True)
class TargetStart:
    """A target VAE before training: its mechanism, what it trains on, its family and the
    initialised model (what :func:`train_target` trains, or the ensemble of
    :mod:`audit.cell.ensemble_training`)."""

    mech: Mechanism
    prepared: Prepared
    family: ModelFamily
    model: torch.nn.Module


def start_target(cell: CellConfig, data: CellData, ctx: Context) -> TargetStart:
    """Prepare ``data`` with ``cell``'s mechanism and build the target VAE, initialised from
    the cell's ``Purpose.INIT`` seed (the global torch RNG is left as it was)."""
    mech = get_mechanism(cell.mech)
    prepared = mech.prepare(cell, data, ctx)
    family = model_family(data.shape, data.num_classes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(cell.seed, Purpose.INIT) % 2**63)
        model = family.target_vae(
            latent_dim=cell.profile.latent_dim,
            per_example_gradients=mech.per_example_gradients,
        ).to(ctx.device)
    return TargetStart(mech=mech, prepared=prepared, family=family, model=model)


def finish_target(
    cell: CellConfig, data: CellData, start: TargetStart, trained: Trained, seconds: float
) -> TrainedTarget:
    """``start``'s model, trained as ``trained`` says, in inference form, with its claim."""
    return TrainedTarget(
        model=start.family.for_inference(start.model).eval(),  # same function, faster kernels
        prepared=start.prepared,
        trained=trained,
        claim=start.mech.claim(cell, data, trained),
        family=start.family,
        seconds=seconds,
    )


def adam_trained(mech: Mechanism) -> bool:
    """Whether ``mech`` trains the target with the default, non-private Adam
    (:meth:`~audit.mechanisms.mechanism.Mechanism.train` not overridden: none, ldp, vae-ldp), a
    training an ensemble may run (:mod:`models.ensemble`); not DP-Adam's mechanisms."""
    return type(mech).train is Mechanism.train


def nonprivate_settings(
    start: TargetStart, cell: CellConfig, ctx: Context
) -> VAETrainSettings | None:
    """The settings of :func:`models.training.train_vae` with which ``start``'s mechanism trains
    it, where :func:`adam_trained`; None where the mechanism trains its own way."""
    return vae_settings(cell, ctx) if adam_trained(start.mech) else None


def train_target(
    cell: CellConfig, data: CellData, ctx: Context, *, start: TargetStart | None = None
) -> TrainedTarget:
    """Prepare ``data`` with ``cell``'s mechanism, build and initialise the target VAE from the
    cell's ``Purpose.INIT`` seed (the global torch RNG is left as it was), train it and state
    the claim. ``start``: the prepared and initialised target, where it was already
    (:func:`start_target`)."""
    start = start_target(cell, data, ctx) if start is None else start
    began = time.perf_counter()
    trained = start.mech.train(start.model, start.prepared, cell, ctx)
    return finish_target(cell, data, start, trained, time.perf_counter() - began)


log = logging.getLogger(__name__)


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
            cell.mech,
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
