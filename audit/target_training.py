"""Training a cell's target VAE: the one code path that a sweep cell
(:func:`audit.pipeline.run_cell`) and the empirical audits
(:mod:`audit.empirical.one_run`) share, so that an audit audits the row's training.

The mechanism prepares the data (``prepare``), the model is built and initialised from the
cell's ``Purpose.INIT`` seed, the mechanism trains it (``train``, with ``ctx.audit_hook`` where
an audit sets one) and states its claim (``claim``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from audit.config import CellConfig
from audit.mechanisms import CellData, Context, get_mechanism
from audit.mechanisms.mechanism import Prepared, Trained
from audit.privacy.claim import PrivacyClaim
from dpvae_core.seeding import Purpose, derive_seed
from models.factory import ModelFamily, model_family


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


def train_target(cell: CellConfig, data: CellData, ctx: Context) -> TrainedTarget:
    """Prepare ``data`` with ``cell``'s mechanism, build and initialise the target VAE from the
    cell's ``Purpose.INIT`` seed (the global torch RNG is left as it was), train it and state
    the claim."""
    mech = get_mechanism(cell.mech)
    prepared = mech.prepare(cell, data, ctx)
    family = model_family(data.shape, data.num_classes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(cell.seed, Purpose.INIT) % 2**63)
        model = family.target_vae(
            latent_dim=cell.profile.latent_dim,
            per_example_gradients=mech.per_example_gradients,
        ).to(ctx.device)
    start = time.perf_counter()
    trained = mech.train(model, prepared, cell, ctx)
    seconds = time.perf_counter() - start
    claim = mech.claim(cell, data, trained)
    return TrainedTarget(
        model=family.for_inference(model).eval(),  # same function and weights, faster kernels
        prepared=prepared,
        trained=trained,
        claim=claim,
        family=family,
        seconds=seconds,
    )
