"""Non-private training: the target VAE (fixed epochs, validated) and a classifier (early stop)."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from audit.progress import ProgressFactory, null_progress
from models.vae import ConditionalConvVAE, vae_loss_terms

log = logging.getLogger(__name__)

Pair = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class VAETrainSettings:
    epochs: int
    batch_size: int
    lr: float
    beta: float
    seed: int
    device: str = "cpu"


@dataclass
class TrainHistory:
    """Per-epoch mean per-example loss on D_train (as trained) and D_val; extra facts by name."""

    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    extra: dict[str, float | str] = field(default_factory=dict)


@runtime_checkable
class OwnObjective(Protocol):
    """A VAE that defines its own per-example training loss (e.g. ``models.lstm_vae.LstmVAE``)."""

    def per_example_loss(
        self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor, *, beta: float
    ) -> torch.Tensor: ...


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
    noise_all = torch.randn(len(x_all), model.latent_dim, generator=gen)
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
    """
    device = torch.device(settings.device)
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=settings.lr)
    gen = torch.Generator().manual_seed(settings.seed)
    x_train, y_train = train
    history = TrainHistory()
    bar = progress(total=settings.epochs, desc="train VAE")
    for epoch in range(settings.epochs):
        order = torch.randperm(len(x_train), generator=gen)
        seen, total = 0, 0.0
        for start in range(0, len(order), settings.batch_size):
            idx = order[start : start + settings.batch_size]
            noise = torch.randn(len(idx), model.latent_dim, generator=gen)
            loss = vae_per_example_loss(
                model,
                x_train[idx].to(device),
                y_train[idx].to(device),
                noise.to(device),
                beta=settings.beta,
            )
            opt.zero_grad(set_to_none=True)
            loss.mean().backward()
            opt.step()
            seen, total = seen + len(idx), total + float(loss.detach().sum())
        history.train_loss.append(total / max(seen, 1))
        history.val_loss.append(evaluate_vae_loss(model, val, beta=settings.beta, seed=epoch))
        bar.update(1)
        bar.set_postfix(train=f"{history.train_loss[-1]:.2f}", val=f"{history.val_loss[-1]:.2f}")
    bar.close()
    model.eval()
    return history


@dataclass(frozen=True)
class ClassifierSettings:
    epochs: int
    patience: int
    batch_size: int = 64
    lr: float = 1e-3
    seed: int = 0
    device: str = "cpu"


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


def _mean_ce(model: nn.Module, data: Pair) -> float:
    x, y = data
    device = next(model.parameters()).device
    with torch.inference_mode():
        return float(F.cross_entropy(model(x.to(device)), y.to(device)))


def train_classifier(
    make_model: Callable[[], nn.Module],
    train: Pair,
    val: Pair,
    settings: ClassifierSettings,
    *,
    progress: ProgressFactory = null_progress,
    desc: str = "train classifier",
) -> nn.Module:
    """Adam with early stopping on ``val`` cross-entropy; returns the best-validation weights."""
    with torch.random.fork_rng(devices=[]):  # init and dropout draw from the default generator
        torch.manual_seed(settings.seed)
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
    model = make_model().to(settings.device)
    opt = torch.optim.Adam(model.parameters(), lr=settings.lr)
    gen = torch.Generator().manual_seed(settings.seed)
    x_train, y_train = train
    best, best_state, waited = math.inf, copy.deepcopy(model.state_dict()), 0
    bar = progress(total=settings.epochs, desc=desc)
    for _ in range(settings.epochs):
        model.train()
        order = torch.randperm(len(x_train), generator=gen)
        for start in range(0, len(order), settings.batch_size):
            idx = order[start : start + settings.batch_size]
            loss = F.cross_entropy(
                model(x_train[idx].to(settings.device)), y_train[idx].to(settings.device)
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        model.eval()
        val_loss = _mean_ce(model, val)
        bar.update(1)
        if val_loss < best - 1e-4:
            best, best_state, waited = val_loss, copy.deepcopy(model.state_dict()), 0
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
