"""Non-private training of a classifier (the target classifier, and the classifiers that score
generated records): Adam(W) with early stopping on validation records (:class:`ClassifierSettings`),
the training augmentation, accuracy, and the random held-out split for early stopping.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from dpvae_core.precision import grad_scaler, mixed_precision
from dpvae_core.progress import ProgressFactory, null_progress
from models.training import Pair, channels_last_model, image_layout


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
