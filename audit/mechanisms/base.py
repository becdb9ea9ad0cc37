"""The interface every privacy mechanism implements, and the data a cell hands it."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from attacks.threat import ReleaseKind
from audit.config import CellConfig, MechanismName
from audit.privacy.claim import PrivacyClaim
from core.progress import ProgressFactory
from core.seeding import Purpose, derive_seed
from models.training import Pair, TrainHistory, VAETrainSettings, train_vae
from models.vae import ConditionalConvVAE


@dataclass(frozen=True)
class CellData:
    """The real (unperturbed) splits of one cell as tensors: x (N, C, H, W) in [0, 1] or series
    (N, T, F) in [-1, 1], y (N,); ``notes``: how the data were prepared, for every row."""

    train: Pair
    val: Pair
    test: Pair
    num_classes: int
    n_total: int
    notes: Mapping[str, str] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.train[0].shape[1:])


@dataclass(frozen=True)
class Prepared:
    """What the target VAE is trained and validated on, and what the mechanism did to get it."""

    train: Pair
    val: Pair
    notes: dict[str, float | str] = field(default_factory=dict)


@dataclass(frozen=True)
class Context:
    """Run-time facts a mechanism may need that are not part of the cell's identity."""

    device: str
    progress: ProgressFactory


class Mechanism(ABC):
    """A privacy mechanism: how it perturbs data, how the target VAE trains, what it claims.

    Subclasses set ``name``, ``param_name`` (the grid's parameter, e.g. ``noise_multiplier``)
    and ``default_grid``; the defaults of ``prepare`` and ``train`` are the non-private path.
    ``per_example_gradients``: whether ``train`` needs Opacus's per-example gradients of the
    target VAE (DP-Adam); without, the VAE is built in its fast implementation
    (:meth:`models.factory.ModelFamily.target_vae`). ``release``: what the mechanism publishes of
    the trained VAE (:class:`~attacks.threat.ReleaseKind`), which decides the attacks its cells
    run (:mod:`audit.attack_plan`). The default, the whole VAE, is what none, cdp, cdp-termwise,
    ldp and vae-ldp release; a mechanism that publishes less (dp2vae: the decoder) overrides it.
    """

    name: ClassVar[MechanismName]
    param_name: ClassVar[str]
    default_grid: ClassVar[tuple[float, ...]]
    option_names: ClassVar[tuple[str, ...]] = ()
    per_example_gradients: ClassVar[bool] = False
    release: ClassVar[ReleaseKind] = ReleaseKind.WHOLE_VAE

    def validate_value(self, value: float | None) -> None:
        if value is None or not math.isfinite(value) or value <= 0:
            raise ValueError(
                f"{self.name.value}: {self.param_name} must be a positive finite number, "
                f"got {value!r}"
            )

    def default_grid_for(self, modality: str) -> tuple[float, ...]:
        """The default grid for records of ``modality`` (by default the same for all)."""
        return self.default_grid

    def validate_options(self, options: Mapping[str, Any], *, batch_size: int) -> None:
        """Check the mechanism's options before any cell runs (the default accepts all)."""
        return None

    def validate_for_data(
        self,
        options: Mapping[str, Any],
        *,
        record_shape: tuple[int, ...],
        n_train: int,
        epochs: int,
        batch_size: int,
    ) -> None:
        """Check the options against the loaded data before any cell runs: ``record_shape`` is one
        record's (C, H, W) or (T, F), ``n_train`` |D_train| after the ``max_train`` cap (the
        smallest over the seeds). The default accepts all."""
        return None

    def prepare(self, cell: CellConfig, data: CellData, ctx: Context) -> Prepared:
        """Training and validation data for the target VAE (identity unless local DP)."""
        return Prepared(train=data.train, val=data.val)

    def train(
        self, model: ConditionalConvVAE, prepared: Prepared, cell: CellConfig, ctx: Context
    ) -> TrainHistory:
        """Train ``model`` in place; the default is non-private Adam."""
        return train_vae(
            model, prepared.train, prepared.val, vae_settings(cell, ctx), progress=ctx.progress
        )

    @abstractmethod
    def claim(self, cell: CellConfig, data: CellData, history: TrainHistory) -> PrivacyClaim:
        """The privacy this cell claims (epsilon, delta and how they were computed)."""


def vae_settings(cell: CellConfig, ctx: Context) -> VAETrainSettings:
    p = cell.profile
    return VAETrainSettings(
        epochs=p.epochs,
        batch_size=p.batch_size,
        lr=p.lr,
        beta=p.beta,
        seed=derive_seed(cell.seed, Purpose.TRAIN),
        device=ctx.device,
    )


def as_device(pair: Pair, device: str) -> Pair:
    return pair[0].to(torch.device(device)), pair[1].to(torch.device(device))
