"""Non-private training: the target VAE (fixed epochs, validated) and a classifier (early stop)."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from dpvae_core.precision import grad_scaler, mixed_precision
from dpvae_core.progress import ProgressFactory, null_progress
from models.vae import ConditionalConvVAE, vae_loss_terms

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
    #: autocast precision of :func:`train_vae` (:mod:`dpvae_core.precision`); DP loops ignore it
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
    record (``models.mlp_vae.MlpVAE``: (L, latent_dim), paper 004's L reconstruction samples)."""
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
    """Adam on the mean negative ELBO for a fixed number of epochs (paper 003 trains 1000).

    Shuffling and reparameterisation noise come from a generator seeded with ``settings.seed``.
    Forward and backward passes run in ``settings.precision`` (autocast; the loss in float32,
    fp16 with a loss scaler), the weights and Adam's state in float32.
    """
    with mixed_precision(settings.device, settings.precision):
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


class StopOn(str, Enum):
    """What the classifier's early stopping watches on its validation records."""

    LOSS = "loss"  # lowest cross-entropy (the original rule)
    ACCURACY = "accuracy"  # highest accuracy, ties to the lower cross-entropy


@dataclass(frozen=True)
class ClassifierSettings:
    """How the target classifier trains (Adam, early stopping on the validation records).

    ``augment``: random horizontal flips and shifts of up to :data:`AUGMENT_SHIFT` pixels
    (images only); ``label_smoothing``: of the training cross-entropy; ``stop_on``: what early
    stopping watches. Cross-entropy misleads where the training labels' class mix differs from
    the validation records' (a class-balanced D_train against LFW20's D_val, 27.8 % one person):
    its minimum came at epoch 1 with accuracy under the majority rate (issue 27), so image
    classifiers stop on accuracy. ``weight_decay``: AdamW's decoupled decay (0: plain Adam).
    """

    epochs: int
    patience: int
    batch_size: int = 64
    lr: float = 1e-3
    seed: int = 0
    device: str = "cpu"
    augment: bool = False
    label_smoothing: float = 0.0
    stop_on: StopOn = StopOn.LOSS
    weight_decay: float = 0.0
    #: autocast precision of training and scoring (dpvae_core.precision); out of the repr, which
    #: keys cached accuracies (audit.sweep), so float32 keys stay as they were
    precision: str = field(default="float32", repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing!r}")
        if not self.weight_decay >= 0.0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        object.__setattr__(self, "stop_on", StopOn(self.stop_on))


#: Largest shift (pixels, each axis) of the classifier's training augmentation.
AUGMENT_SHIFT = 4


def augment_images(x: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
    """Random horizontal flip (probability 1/2) and a random shift of up to
    :data:`AUGMENT_SHIFT` pixels per axis (reflect-padded), drawn per image from ``generator``.

    x: (B, C, H, W); returns a new tensor of the same shape.
    """
    b, _, h, w = x.shape
    if b == 0:
        return x.clone()
    s = min(AUGMENT_SHIFT, h - 1, w - 1)
    flip = torch.rand(b, generator=generator) < 0.5
    dy = torch.randint(0, 2 * s + 1, (b,), generator=generator)
    dx = torch.randint(0, 2 * s + 1, (b,), generator=generator)
    x = torch.where(flip.view(b, 1, 1, 1).to(x.device), x.flip(3), x)
    padded = F.pad(x, (s, s, s, s), mode="reflect")
    rows = (dy.view(b, 1) + torch.arange(h)).to(x.device)
    cols = (dx.view(b, 1) + torch.arange(w)).to(x.device)
    batch = torch.arange(b, device=x.device).view(b, 1, 1)
    out = padded.permute(0, 2, 3, 1)[batch, rows.view(b, h, 1), cols.view(b, 1, w)]
    return out.permute(0, 3, 1, 2).contiguous()


def accuracy(model: nn.Module, data: Pair, *, batch_size: int = 1024) -> float:
    """Fraction of correctly classified records of ``data``."""
    x, y = data
    device = next(model.parameters()).device
    model.eval()
    correct = 0
    with torch.inference_mode():
        for start in range(0, len(x), batch_size):
            pred = model(x[start : start + batch_size].to(device)).argmax(1).cpu()
            correct += int((pred == y[start : start + batch_size]).sum())
    return correct / max(len(x), 1)


def _val_scores(model: nn.Module, data: Pair, *, batch_size: int = 512) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of ``model`` on ``data``."""
    x, y = data
    device = next(model.parameters()).device
    ce, correct = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(x), batch_size):
            logits = model(x[start : start + batch_size].to(device)).float()
            target = y[start : start + batch_size].to(device)
            ce += float(F.cross_entropy(logits, target, reduction="sum"))
            correct += int((logits.argmax(1) == target).sum())
    n = max(len(x), 1)
    return ce / n, correct / n


def _improves(stop_on: StopOn, score: tuple[float, float], best: tuple[float, float]) -> bool:
    """Whether validation ``score`` (ce, acc) beats ``best`` under ``stop_on``."""
    (ce, acc), (best_ce, best_acc) = score, best
    if stop_on is StopOn.LOSS:
        return ce < best_ce - 1e-4
    return acc > best_acc or (acc == best_acc and ce < best_ce - 1e-4)


def train_classifier(
    make_model: Callable[[], nn.Module],
    train: Pair,
    val: Pair,
    settings: ClassifierSettings,
    *,
    progress: ProgressFactory = null_progress,
    desc: str = "train classifier",
) -> nn.Module:
    """Adam(W) with early stopping on ``val`` (:class:`ClassifierSettings`); returns the
    best-validation weights."""
    with torch.random.fork_rng(devices=[]):  # init and dropout draw from the default generator
        torch.manual_seed(settings.seed)
        with mixed_precision(settings.device, settings.precision):
            return _train_classifier(make_model, train, val, settings, progress=progress, desc=desc)


def _train_classifier(
    make_model: Callable[[], nn.Module],
    train: Pair,
    val: Pair,
    settings: ClassifierSettings,
    *,
    progress: ProgressFactory,
    desc: str,
) -> nn.Module:
    model = channels_last_model(make_model().to(settings.device))
    scaler = grad_scaler(settings.device)
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    gen = torch.Generator().manual_seed(settings.seed)
    x_train, y_train = train
    best, best_state, waited = (math.inf, -math.inf), copy.deepcopy(model.state_dict()), 0
    bar = progress(total=settings.epochs, desc=desc)
    for _ in range(settings.epochs):
        model.train()
        order = torch.randperm(len(x_train), generator=gen)
        for start in range(0, len(order), settings.batch_size):
            idx = order[start : start + settings.batch_size]
            xb = x_train[idx]
            if settings.augment:
                xb = augment_images(xb, generator=gen)
            loss = F.cross_entropy(
                model(image_layout(xb.to(settings.device))),
                y_train[idx].to(settings.device),
                label_smoothing=settings.label_smoothing,
            )
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        model.eval()
        score = _val_scores(model, val)
        bar.update(1)
        if _improves(settings.stop_on, score, best):
            best, best_state, waited = score, copy.deepcopy(model.state_dict()), 0
        else:
            waited += 1
            if waited >= settings.patience:
                break
    bar.close()
    model.load_state_dict(best_state)
    model.eval()
    return model


def holdout_split(n: int, *, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random (train, held-out) index arrays with ``fraction`` held out (at least one each)."""
    order = np.random.default_rng(seed).permutation(n)
    k = min(max(1, round(n * fraction)), n - 1)
    return order[k:], order[:k]
