"""The clip norm C of DP-Adam: the default, and the trade-off paper's median heuristic (a short
non-private warm-up that looks at D_train outside the accounting)."""

from __future__ import annotations

import copy
import logging

import torch

from models.dp.engine import (
    DEFAULT_GRAD_SAMPLE_MODE,
    GradSampleMode,
    PerExampleGradients,
    SampleLoss,
    parse_mode,
    per_unit_norms,
)
from models.training import Pair, VAETrainSettings, training_noise
from models.vae import ConditionalConvVAE

log = logging.getLogger(__name__)


#: Default clip norm C for the conv VAE's objective (``models.training.vae_per_example_loss``:
#: per-pixel cross-entropy summed over the image + beta * KL). Unclipped per-example gradient
#: norms measured on the embedded datasets are about 25 to 55 on digits (8x8) and 45 to 400 on
#: the LFW subset (25x25), at initialisation and over a 20-epoch non-private run. C = 10 lies
#: below them, so (nearly) every gradient is clipped: per-example normalisation, under which
#: Adam's update does not depend on C (Adam divides by the gradient's scale) and C only sets the
#: unit of the noise std z*C. The trade-off then hinges on z and B.
DEFAULT_CLIP_NORM = 10.0


#: Epochs of the non-private warm-up behind the 'median' clip norm (the trade-off paper uses 100
#: training epochs; a short warm-up keeps the quick and standard profiles cheap).
MEDIAN_WARMUP_EPOCHS = 5


def median_gradient_norm(
    model: ConditionalConvVAE,
    train: Pair,
    settings: VAETrainSettings,
    *,
    epochs: int = MEDIAN_WARMUP_EPOCHS,
    mode: GradSampleMode | str = DEFAULT_GRAD_SAMPLE_MODE,
) -> float:
    """The trade-off paper's clip norm (Abadi et al.'s heuristic): the median of the unclipped
    per-example gradient norms over a non-private warm-up of ``epochs`` epochs on ``train``.

    A deep copy of ``model`` trains with plain Adam on shuffled batches (seeded with
    ``settings.seed``); ``model`` itself is left untouched.

    Notes:
        The warm-up looks at D_train outside the privacy accounting, so the clip norm it returns
        is data-dependent and not covered by the run's epsilon; a run using it must say so.
    """
    device = torch.device(settings.device)
    warm = copy.deepcopy(model).to(device).train()
    mode = parse_mode(mode)
    engine = PerExampleGradients(
        SampleLoss(warm, beta=settings.beta),
        GradSampleMode.EW if mode in (GradSampleMode.GHOST, GradSampleMode.BK) else mode,
    )
    opt = torch.optim.Adam(warm.parameters(), lr=settings.lr)
    gen = torch.Generator().manual_seed(settings.seed)
    x_train, y_train = train
    norms: list[torch.Tensor] = []
    try:
        for _ in range(epochs):
            order = torch.randperm(len(x_train), generator=gen)
            for start in range(0, len(order), settings.batch_size):
                idx = order[start : start + settings.batch_size]
                noise = training_noise(warm, len(idx), generator=gen)
                grads, _ = engine.gradients(
                    x_train[idx].to(device), y_train[idx].to(device), noise.to(device)
                )
                norms.append(per_unit_norms(grads).cpu())
                for p, g in zip(engine.params, grads, strict=True):
                    p.grad = g.mean(0)
                opt.step()
    finally:
        engine.close()
    median = float(torch.cat(norms).median())
    log.info("median clip norm %.4g from %d per-example norms", median, sum(map(len, norms)))
    return median
