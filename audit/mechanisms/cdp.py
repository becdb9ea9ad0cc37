"""``cdp``: standard DP-Adam (paper 003, Section 2.3) on the target VAE's per-example objective.

Options (``benchmark.py`` flags): ``clip_norm`` (a number, or ``median``: paper 003's heuristic),
``target_epsilon`` (calibrates z and ignores the cell's grid value), ``delta`` (default
1/N_train), ``conversion`` (improved, the default, or classic). ``divergence`` / ``alpha`` are
accepted only to be refused: a batch-wise divergence needs ``cdp-termwise``
(``models.dp_training.check_per_example_objective``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from audit.config import CellConfig, MechanismName
from audit.mechanisms.base import CellData, Context, Mechanism, Prepared, vae_settings
from audit.privacy.cdp import cdp_claim, noise_multiplier_for_epsilon
from audit.privacy.claim import Conversion, PrivacyClaim
from core.schedule import dp_sgd_steps
from core.seeding import Purpose, derive_seed
from core.validation import check_batch, check_delta, check_positive, parse_enum
from models.dp_training import (
    DEFAULT_CLIP_NORM,
    MEDIAN_WARMUP_EPOCHS,
    DPSettings,
    check_per_example_objective,
    median_gradient_norm,
    train_dp_vae,
)
from models.training import TrainHistory, VAETrainSettings
from models.vae import ConditionalConvVAE

MEDIAN = "median"
MEDIAN_SOURCE = (
    f"median-heuristic over a {MEDIAN_WARMUP_EPOCHS}-epoch non-private warm-up on D_train "
    "(looks at private data outside the accounting)"
)


def parse_clip_norm(value: Any, what: str = "clip norm") -> float | None:
    """A positive float, or None for ``'median'``; the ValueError quotes the bad value."""
    if isinstance(value, str) and value.strip().lower() == MEDIAN:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a positive number or 'median', got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{what} must be a positive finite number or 'median', got {value!r}")
    return number


def with_extra(claim: PrivacyClaim, extra: Mapping[str, float | str]) -> PrivacyClaim:
    """``claim`` with further named facts in its extra."""
    return PrivacyClaim(
        epsilon=claim.epsilon,
        delta=claim.delta,
        method=claim.method,
        accountant=claim.accountant,
        extra={**claim.extra, **extra},
    )


class CentralDP(Mechanism):
    """``cdp``: Poisson sampling (q = B/N_train), per-example clipping at C, noise std z*C, Adam.

    Notes:
        The claim is Opacus RDP of ``ceil(epochs * N / B)`` sampled Gaussian releases at
        delta = 1/N_train (or ``--delta``), which is the number of steps the training loop runs
        (checked). With ``--clip-norm median`` the clip norm comes from D_train outside the
        accounting; the row's privacy notes say so.
    """

    name = MechanismName.CDP
    param_name = "noise_multiplier"
    default_grid = (0.001, 0.01, 0.1, 0.5, 1.0, 2.0, 4.0)
    option_names = ("clip_norm", "target_epsilon", "delta", "conversion", "divergence", "alpha")
    per_example_gradients = True

    def validate_options(self, options: Mapping[str, Any], *, batch_size: int) -> None:
        """Check the cell's options before any work; the ValueError quotes the bad value."""
        check_per_example_objective(
            divergence=options.get("divergence"), alpha=options.get("alpha"), batch_size=batch_size
        )
        self._check_common(options)

    def _check_common(self, options: Mapping[str, Any]) -> None:
        parse_clip_norm(options.get("clip_norm", DEFAULT_CLIP_NORM))
        if options.get("target_epsilon") is not None:
            check_positive("target epsilon", options["target_epsilon"])
        if options.get("delta") is not None:
            check_delta(options["delta"])
        parse_enum(Conversion, options.get("conversion", Conversion.IMPROVED), "conversion")

    def validate_for_data(
        self,
        options: Mapping[str, Any],
        *,
        record_shape: tuple[int, ...],
        n_train: int,
        epochs: int,
        batch_size: int,
    ) -> None:
        """Poisson sampling needs B <= |D_train| (after the ``max_train`` cap)."""
        if batch_size > n_train:
            raise ValueError(
                f"{self.name.value}: --batch-size {batch_size} exceeds |D_train| = {n_train} "
                f"(after the max-train cap); choose a batch size of at most {n_train}"
            )
        check_batch(n_train=n_train, batch_size=batch_size, epochs=epochs)

    def prepare(self, cell: CellConfig, data: CellData, ctx: Context) -> Prepared:
        self.validate_options(dict(cell.options), batch_size=cell.profile.batch_size)
        return super().prepare(cell, data, ctx)

    def train(
        self, model: ConditionalConvVAE, prepared: Prepared, cell: CellConfig, ctx: Context
    ) -> TrainHistory:
        settings = vae_settings(cell, ctx)
        clip_norm, source = self.clip_norm(model, prepared, cell, settings)
        z, z_source = self.noise_multiplier(cell, n_train=len(prepared.train[0]))
        dp = DPSettings(
            noise_multiplier=z,
            clip_norm=clip_norm,
            noise_seed=derive_seed(cell.seed, Purpose.DP_NOISE, cell.config_hash),
        )
        history = self._train(model, prepared, cell, ctx, settings, dp)
        history.extra.update({"clip_norm_source": source, "noise_multiplier_source": z_source})
        return history

    def _train(
        self,
        model: ConditionalConvVAE,
        prepared: Prepared,
        cell: CellConfig,
        ctx: Context,
        settings: VAETrainSettings,
        dp: DPSettings,
    ) -> TrainHistory:
        return train_dp_vae(
            model, prepared.train, prepared.val, settings, dp, progress=ctx.progress
        )

    def clip_norm(
        self,
        model: ConditionalConvVAE,
        prepared: Prepared,
        cell: CellConfig,
        settings: VAETrainSettings,
    ) -> tuple[float, str]:
        """(C, where it came from): the option's number, the default, or the median heuristic."""
        raw = cell.option("clip_norm")
        if raw is None:
            return DEFAULT_CLIP_NORM, f"default {DEFAULT_CLIP_NORM:g}"
        value = parse_clip_norm(raw)
        if value is not None:
            return value, "given"
        warm = replace(settings, seed=derive_seed(cell.seed, Purpose.TRAIN, "clip-warm-up"))
        epochs = min(MEDIAN_WARMUP_EPOCHS, settings.epochs)
        return median_gradient_norm(model, prepared.train, warm, epochs=epochs), MEDIAN_SOURCE

    def noise_multiplier(self, cell: CellConfig, *, n_train: int) -> tuple[float, str]:
        """(z, where it came from): the grid value, or calibrated to ``--target-epsilon``."""
        target = cell.option("target_epsilon")
        if target is None:
            return float(cell.param_value), "grid"
        z = noise_multiplier_for_epsilon(
            target_epsilon=target,
            n_train=n_train,
            batch_size=cell.profile.batch_size,
            epochs=cell.profile.epochs,
            delta=self.delta(cell, n_train),
            conversion=self.conversion(cell),
        )
        return z, f"target-epsilon {target:g} (grid value {cell.param_value} ignored)"

    @staticmethod
    def delta(cell: CellConfig, n_train: int) -> float:
        value = cell.option("delta")
        return 1.0 / n_train if value is None else float(value)

    @staticmethod
    def conversion(cell: CellConfig) -> Conversion:
        return parse_enum(Conversion, cell.option("conversion", Conversion.IMPROVED), "conversion")

    def claim(self, cell: CellConfig, data: CellData, history: TrainHistory) -> PrivacyClaim:
        n_train = len(data.train[0])
        check_steps(history, n_train=n_train, cell=cell)
        claim = cdp_claim(
            n_train=n_train,
            batch_size=cell.profile.batch_size,
            epochs=cell.profile.epochs,
            noise_multiplier=history.extra["noise_multiplier"],
            delta=self.delta(cell, n_train),
            conversion=self.conversion(cell),
        )
        return with_extra(claim, run_facts(history))


def check_steps(history: TrainHistory, *, n_train: int, cell: CellConfig) -> None:
    """The loop must have run the number of releases the accountant counts."""
    expected = dp_sgd_steps(
        n_train=n_train, batch_size=cell.profile.batch_size, epochs=cell.profile.epochs
    )
    if history.extra.get("steps") != expected:
        raise RuntimeError(
            f"training ran {history.extra.get('steps')!r} noisy steps but the "
            f"accountant counts {expected}; the claim would be wrong"
        )


def run_facts(history: TrainHistory) -> dict[str, float | str]:
    """What the row's privacy notes should show about how the run was trained."""
    keys = (
        "clip_norm",
        "clip_norm_source",
        "noise_multiplier_source",
        "mean_batch_size",
        "grad_sample_mode",
        "clip_norm_2",
        "alpha",
        "partitions",
        "divergence",
    )
    return {k: history.extra[k] for k in keys if k in history.extra}
