"""Non-private training of the target VAE (fixed epochs, validated), and its parts that other
training reuses: the settings, the per-example objective, the training noise and the validation
record (the DP loops), and the channels-last layout (:mod:`models.classifier_training` too)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch
from torch import nn

from dpvae_core.precision import grad_scaler, mixed_precision
from dpvae_core.progress import ProgressFactory, null_progress
from models.vae import ConditionalConvVAE, folded_training, vae_loss_terms

log = logging.getLogger(__name__)

Pair = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class ValidationSchedule:
    """When, and on which records, the target VAE's validation loss is computed.

    The validation loss only feeds the history and the progress line: it never changes the
    weights, the training noise or any result column. Computing it every epoch on all of D_val
    cost more than training itself on small training sets (LFW20 standard profile: 381 D_val
    records against 50 D_train, 84 % of each epoch), so by default it runs every ``every``
    epochs on a fixed subsample of ``records`` D_val records (drawn once, seeded), and on all
    of D_val after the last epoch. ``benchmarks/bench_validation.py`` measures its cost as a
    ratio to training (target: at most 10 %). Epochs without validation hold NaN.
    """

    every: int = 10
    records: int | None = 32

    def __post_init__(self) -> None:
        if not isinstance(self.every, int) or self.every < 1:
            raise ValueError(f"validation every must be a positive integer, got {self.every!r}")
        if self.records is not None and (not isinstance(self.records, int) or self.records < 1):
            raise ValueError(
                f"validation records must be a positive integer or None, got {self.records!r}"
            )

    def due(self, epoch: int, epochs: int) -> bool:
        """Whether 0-based ``epoch`` of ``epochs`` is validated (the last one always is)."""
        return (epoch + 1) % self.every == 0 or epoch == epochs - 1

    def subset(self, val: Pair, *, seed: int) -> Pair:
        """The fixed D_val subsample (all of ``val`` when ``records`` is None or larger)."""
        x, y = val
        if self.records is None or self.records >= len(x):
            return val
        gen = torch.Generator().manual_seed(seed)
        idx = torch.randperm(len(x), generator=gen)[: self.records].sort().values
        return x[idx], y[idx]


EVERY_EPOCH = ValidationSchedule(every=1, records=None)
"""The former behaviour: all of D_val after every epoch (the benchmark's baseline)."""


@dataclass(frozen=True)
class VAETrainSettings:
    epochs: int
    batch_size: int
    lr: float
    beta: float
    seed: int
    device: str = "cpu"
    validation: ValidationSchedule = field(default_factory=ValidationSchedule)
    #: autocast precision of :func:`train_vae` (:mod:`dpvae_core.precision`); DP-Adam's per-example
    #: gradients follow it where bf16 (:func:`models.dp.engine.dp_precision`), the other DP loops
    #: ignore it
    precision: str = "float32"


@runtime_checkable
class DPRunRecord(Protocol):
    """What :class:`models.dp.DPRun` provides (declared here: imports point one way)."""

    noise_multiplier: float
    clip_norm: float
    steps: int


@dataclass
class TrainHistory:
    """Per-epoch mean per-example loss on D_train (as trained) and D_val; ``dp``: what a DP
    training loop ran (a frozen record the privacy claim reads; None for non-private training).
    """

    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    dp: DPRunRecord | None = None

    @property
    def last_val_loss(self) -> float:
        """The latest validation loss computed (NaN before the first)."""
        return next((v for v in reversed(self.val_loss) if not math.isnan(v)), math.nan)


@runtime_checkable
class OwnObjective(Protocol):
    """A VAE that defines its own per-example training loss (e.g. ``models.lstm_vae.LstmVAE``)."""

    def per_example_loss(
        self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor, *, beta: float
    ) -> torch.Tensor: ...


def training_noise(model: nn.Module, n: int, *, generator: torch.Generator) -> torch.Tensor:
    """Reparameterisation noise for ``n`` records: standard normal of shape (n, *noise_shape),
    where a model's ``noise_shape`` (default ``(latent_dim,)``) may ask for several samples per
    record (``models.mlp_vae.MlpVAE``: (L, latent_dim), PriVAE's L reconstruction samples)."""
    shape = getattr(model, "noise_shape", (model.latent_dim,))
    return torch.randn(n, *shape, generator=generator)


def vae_per_example_loss(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor, *, beta: float
) -> torch.Tensor:
    """The training objective per example (B,) of ``model``.

    A model with its own ``per_example_loss`` (:class:`OwnObjective`) computes it; otherwise the
    conv VAE's negative ELBO: per-pixel binary cross-entropy summed over the image + beta * KL
    (:func:`models.vae.vae_loss_terms`).
    """
    if isinstance(model, OwnObjective):
        return model.per_example_loss(x, y, noise, beta=beta)
    recon, mu, logvar, _ = model(x, y, noise)
    rec, kl = vae_loss_terms(x, recon, mu, logvar)
    return rec + beta * kl


def evaluate_vae_loss(
    model: ConditionalConvVAE, data: Pair, *, beta: float, seed: int, batch_size: int = 512
) -> float:
    """Mean per-example loss over ``data`` with fixed reparameterisation noise from ``seed``."""
    x_all, y_all = data
    if len(x_all) == 0:
        return math.nan
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    noise_all = training_noise(model, len(x_all), generator=gen)
    was_training = model.training
    model.eval()
    total = 0.0
    with torch.inference_mode():
        for start in range(0, len(x_all), batch_size):
            sl = slice(start, start + batch_size)
            loss = vae_per_example_loss(
                model,
                x_all[sl].to(device),
                y_all[sl].to(device),
                noise_all[sl].to(device),
                beta=beta,
            )
            total += float(loss.sum())
    model.train(was_training)
    return total / len(x_all)


def record_validation(
    model: nn.Module,
    val: Pair,
    val_subset: Pair,
    settings: VAETrainSettings,
    history: TrainHistory,
    epoch: int,
) -> None:
    """Append epoch ``epoch``'s validation loss (NaN when the schedule skips it) and leave the
    model in training mode. The last epoch is scored on all of ``val``, the others on
    ``val_subset``; the loss's reparameterisation noise is seeded with the epoch, apart from
    the training generators."""
    schedule = settings.validation
    if not schedule.due(epoch, settings.epochs):
        history.val_loss.append(math.nan)
        return
    data = val if epoch == settings.epochs - 1 else val_subset
    history.val_loss.append(evaluate_vae_loss(model, data, beta=settings.beta, seed=epoch))
    model.train()


def image_layout(x: torch.Tensor) -> torch.Tensor:
    """``x`` in channels-last memory layout where it is a batch of images (B, C, H, W), else as
    given. Same values; on CPU (oneDNN) convolutions run faster on it (1.3x a 64x64 VAE training
    step, 1.8x its decoding here: benchmarks/bench_precision.py)."""
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x


def channels_last_model(model: nn.Module) -> nn.Module:
    """``model`` with its 4-D (convolution) weights in channels-last layout, in place: its
    convolutions then return channels-last outputs whatever their input's layout. Same function,
    same state-dict keys and values; a model without 4-D weights is unchanged."""
    if any(p.dim() == 4 for p in model.parameters()):
        model.to(memory_format=torch.channels_last)
    return model


def train_vae(
    model: ConditionalConvVAE,
    train: Pair,
    val: Pair,
    settings: VAETrainSettings,
    *,
    progress: ProgressFactory = null_progress,
) -> TrainHistory:
    """Adam on the mean negative ELBO for a fixed number of epochs (the trade-off paper trains
    1000).

    Shuffling and reparameterisation noise come from a generator seeded with ``settings.seed``.
    Forward and backward passes run in ``settings.precision`` (autocast; the loss in float32,
    fp16 with a loss scaler), the weights and Adam's state in float32.
    """
    with mixed_precision(settings.device, settings.precision), folded_training(model):
        return _train_vae(model, train, val, settings, progress=progress)


def _train_vae(
    model: ConditionalConvVAE,
    train: Pair,
    val: Pair,
    settings: VAETrainSettings,
    *,
    progress: ProgressFactory,
) -> TrainHistory:
    device = torch.device(settings.device)
    scaler = grad_scaler(device)
    channels_last_model(model.to(device)).train()
    opt = torch.optim.Adam(model.parameters(), lr=settings.lr)
    gen = torch.Generator().manual_seed(settings.seed)
    x_train, y_train = train
    history = TrainHistory()
    val_subset = settings.validation.subset(val, seed=settings.seed)
    bar = progress(total=settings.epochs, desc="train VAE")
    for epoch in range(settings.epochs):
        order = torch.randperm(len(x_train), generator=gen)
        seen, total = 0, 0.0
        for start in range(0, len(order), settings.batch_size):
            idx = order[start : start + settings.batch_size]
            noise = training_noise(model, len(idx), generator=gen)
            loss = vae_per_example_loss(
                model,
                image_layout(x_train[idx].to(device)),
                y_train[idx].to(device),
                noise.to(device),
                beta=settings.beta,
            )
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss.mean()).backward()
            scaler.step(opt)
            scaler.update()
            seen, total = seen + len(idx), total + float(loss.detach().sum())
        history.train_loss.append(total / max(seen, 1))
        record_validation(model, val, val_subset, settings, history, epoch)
        bar.update(1)
        bar.set_postfix(train=f"{history.train_loss[-1]:.2f}", val=f"{history.last_val_loss:.2f}")
    bar.close()
    model.eval()
    return history
