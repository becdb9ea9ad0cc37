"""``dp2vae``: DP2-VAE (the DP2-VAE paper, Algorithms 1 and 2): K non-private encoders pre-trained
on disjoint subsets of D_train, a fresh decoder trained by DP-Adam on batches of one uniformly
chosen subset; only the decoder is released.

Options (:class:`Dp2Options`): ``subsets`` (K; default one subset per
:data:`RECORDS_PER_SUBSET` records, at least 2 — the DP2-VAE paper uses K = 1000 on 60000 records),
``max_batch_size`` (B_max, the cap of a stage-2 batch; default B), ``pretrain_epochs``,
``clip_norm``, ``target_epsilon``, ``delta``, ``conversion``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch

from attacks.threat import ReleaseKind
from audit.config import CellConfig
from audit.mechanisms.cdp import CdpEpsilonParams, with_extra
from audit.mechanisms.dp_adam_options import DpAdamOptions, parse_clip_norm
from audit.mechanisms.mechanism import (
    Accounted,
    CellData,
    Context,
    Mechanism,
    Prepared,
    Trained,
    describe_claim,
    training_seed,
    vae_settings,
)
from audit.options import (
    AccountingParams,
    option,
    positive_int,
)
from audit.privacy.claim import Conversion, PrivacyClaim
from audit.privacy.dp2vae_accounting import dp2vae_claim, dp2vae_noise_for_epsilon
from dpvae_core.records import Modality
from dpvae_core.schedule import dp_sgd_steps
from dpvae_core.seeding import Purpose, derive_seed
from models.dp import DEFAULT_CLIP_NORM, DPSettings
from models.dp.dp2vae_loop import Dp2Settings, train_dp2vae
from models.dp.dp2vae_subsets import subset_assignment
from models.training import TrainHistory
from models.vae import ConditionalConvVAE

#: Records per subset of the default K (the DP2-VAE paper: 60000 records in K = 1000 subsets).
RECORDS_PER_SUBSET = 60
#: Stage-1 epochs per subset by default (non-private pre-training of each encoder).
DEFAULT_PRETRAIN_EPOCHS = 5


def positive_clip_norm(value: object) -> float:
    """A positive clip norm (the median heuristic is not offered for DP2-VAE)."""
    clip = parse_clip_norm(value)
    if not isinstance(clip, float):
        raise ValueError(f"dp2vae: clip norm must be a positive number, got {value!r}")
    return clip


def default_subsets(n_train: int) -> int:
    """K for |D_train| = ``n_train``: one subset per :data:`RECORDS_PER_SUBSET` records, at
    least 2 (and at most ``n_train``)."""
    return min(n_train, max(2, round(n_train / RECORDS_PER_SUBSET)))


@dataclass(frozen=True)
class Dp2Options(DpAdamOptions):
    """The options of ``dp2vae`` (each None: the default named in its help)."""

    mechanism: ClassVar[str] = "dp2vae"
    subsets: int | None = option(
        f"number K of disjoint subsets, one encoder each (default |D_train| / "
        f"{RECORDS_PER_SUBSET}, at least 2)",
        positive_int("subsets"),
        cli_type=int,
    )
    max_batch_size: int | None = option(
        "cap B_max of a stage-2 batch (default: the batch size B); the valid bound grows with it",
        positive_int("max_batch_size"),
        cli_type=int,
    )
    pretrain_epochs: int | None = option(
        f"stage-1 epochs per subset (default {DEFAULT_PRETRAIN_EPOCHS})",
        positive_int("pretrain_epochs"),
        cli_type=int,
    )
    clip_norm: float | None = option(
        f"per-example clip norm C of the decoder gradients (default {DEFAULT_CLIP_NORM:g})",
        positive_clip_norm,
    )


@dataclass(frozen=True)
class Dp2EpsilonParams(CdpEpsilonParams):
    """``benchmark.py epsilon --mech dp2vae``: a DP-Adam schedule, K and B_max."""

    mechanism: ClassVar[str] = "dp2vae"
    subsets: int | None = option(
        "number K of disjoint subsets (default |D_train| / 60, at least 2)",
        positive_int("subsets"),
        "K",
        cli_type=int,
    )
    max_batch_size: int | None = option(
        "cap B_max of a stage-2 batch (default B)",
        positive_int("max_batch_size"),
        "B_MAX",
        cli_type=int,
    )


class Dp2Vae(Mechanism):
    """``dp2vae``: the decoder of the DP2-VAE paper's two-stage training, released alone.

    Notes:
        The ``epsilon`` column is the valid bound of
        :mod:`audit.privacy.dp2vae_accounting` (add/remove adjacency; a step's sensitivity
        2 B_max C, because the subset's non-private encoder moves every latent code of the batch
        when one record changes; selection of the record's subset with probability 1/K, amplified
        by joint convexity). The DP2-VAE paper's Theorem 3.1 value is in the notes, labelled: it is
        not a bound for this code.
    """

    name = "dp2vae"
    param_name = "noise_multiplier"
    param_symbol = "z"
    param_label = "noise multiplier z"
    param_description = "the decoder's DP-Adam noise multiplier z"
    accounting_help = "DP2-VAE's decoder (a DP-Adam schedule, K subsets and B_max)"
    default_grid = (1.0, 8.0, 64.0)
    options_type = Dp2Options
    accounting_type = Dp2EpsilonParams
    per_example_gradients = True
    release = ReleaseKind.DECODER_ONLY
    modalities = frozenset({Modality.IMAGE, Modality.SERIES})
    modality_reason = (
        "it splits the conv and LSTM VAEs into encoder and decoder; choose none, cdp or "
        "cdp-termwise"
    )

    def settings(self, cell: CellConfig, n_train: int) -> Dp2Settings:
        opts = self.options_of(cell)
        return Dp2Settings(
            subsets=default_subsets(n_train) if opts.subsets is None else opts.subsets,
            pretrain_epochs=opts.pretrain_epochs or DEFAULT_PRETRAIN_EPOCHS,
            max_batch_size=opts.max_batch_size,
        )

    def delta(self, cell: CellConfig, n_train: int) -> float:
        value = self.options_of(cell).delta
        return 1.0 / n_train if value is None else value

    def noise_multiplier(self, cell: CellConfig, *, n_train: int) -> tuple[float, str]:
        """(sigma, where it came from): the grid value, or calibrated to ``--target-epsilon``."""
        opts = self.options_of(cell)
        if opts.target_epsilon is None:
            return float(cell.param_value), "grid"
        dp2 = self.settings(cell, n_train)
        sigma = dp2vae_noise_for_epsilon(
            target_epsilon=opts.target_epsilon,
            n_train=n_train,
            subsets=dp2.subsets,
            steps=dp_sgd_steps(
                n_train=n_train, batch_size=cell.profile.batch_size, epochs=cell.profile.epochs
            ),
            max_batch_size=dp2.max_batch_size or cell.profile.batch_size,
            delta=self.delta(cell, n_train),
            conversion=opts.conversion or Conversion.IMPROVED,
        )
        source = f"target-epsilon {opts.target_epsilon:g} (grid value {cell.param_value} ignored)"
        return sigma, source

    def canary_sample_rate(self, cell: CellConfig, n_train: int) -> float | None:
        """A record's per-step chance in stage 2: its subset is chosen (1/K), then a Poisson
        coin at min(1, B / |D_k|); the smallest over the run's subsets (the largest |D_k| of the
        assignment :meth:`train` will draw)."""
        k = self.settings(cell, n_train).subsets
        seed = training_seed(cell)  # vae_settings(cell).seed, as train uses
        largest = int(torch.bincount(subset_assignment(n_train, k, seed=seed)).max())
        return min(1.0, cell.profile.batch_size / largest) / k

    def train(
        self, model: ConditionalConvVAE, prepared: Prepared, cell: CellConfig, ctx: Context
    ) -> Trained:
        n_train = len(prepared.train[0])
        opts = self.options_of(cell)
        sigma, source = self.noise_multiplier(cell, n_train=n_train)
        dp = DPSettings(
            noise_multiplier=sigma,
            clip_norm=opts.clip_norm or DEFAULT_CLIP_NORM,
            noise_seed=derive_seed(cell.seed, Purpose.DP_NOISE, cell.noise_key),
        )
        settings = replace(vae_settings(cell, ctx), device="cpu")
        record = train_dp2vae(
            model.cpu(),
            prepared.train,
            settings,
            dp,
            self.settings(cell, n_train),
            progress=ctx.progress,
            audit_hook=ctx.audit_hook,
        )
        model.to(ctx.device)
        history = TrainHistory(train_loss=list(record.train_loss), dp=record)
        return Trained(history=history, notes={"noise_multiplier_source": source})

    def claim(self, cell: CellConfig, data: CellData, trained: Trained) -> PrivacyClaim:
        record = trained.history.dp
        n_train = len(data.train[0])
        expected = dp_sgd_steps(
            n_train=n_train, batch_size=cell.profile.batch_size, epochs=cell.profile.epochs
        )
        if record is None or record.steps != expected:
            ran = None if record is None else record.steps
            raise RuntimeError(
                f"dp2vae ran {ran!r} decoder steps, the accountant counts {expected}"
            )
        claim = dp2vae_claim(
            n_train=n_train,
            subsets=record.subsets,
            steps=record.steps,
            noise_multiplier=record.noise_multiplier,
            max_batch_size=record.max_batch_size,
            delta=self.delta(cell, n_train),
            conversion=self.options_of(cell).conversion or Conversion.IMPROVED,
        )
        facts: dict[str, Any] = {
            "clip_norm": record.clip_norm,
            **trained.notes,
            "subsets": record.subsets,
            "subset_sizes": "/".join(map(str, record.subset_sizes)),
            "truncated_batches": record.truncated_batches,
            "mean_batch_size": record.mean_batch_size,
            "released": "the decoder only (stage-2 DP-Adam); the encoders stay private",
        }
        return with_extra(claim, facts)

    def account(self, params: AccountingParams) -> Accounted:
        """Both epsilons of a schedule: the paper's (notes) and the valid one (last line)."""
        params = self.typed_params(params)
        steps = dp_sgd_steps(
            n_train=params.n_train, batch_size=params.batch_size, epochs=params.epochs
        )
        k = default_subsets(params.n_train) if params.subsets is None else params.subsets
        schedule = {
            "n_train": params.n_train,
            "subsets": k,
            "steps": steps,
            "max_batch_size": params.max_batch_size or params.batch_size,
            "delta": 1 / params.n_train if params.delta is None else params.delta,
            "conversion": params.conversion or Conversion.IMPROVED,
        }
        sigma = params.noise_multiplier
        if params.target_epsilon is not None:
            sigma = dp2vae_noise_for_epsilon(target_epsilon=params.target_epsilon, **schedule)
        claim = dp2vae_claim(noise_multiplier=sigma, **schedule)
        lines = [f"mechanism: {self.name}", *describe_claim(claim)]
        if params.target_epsilon is None:
            return Accounted(tuple(lines), claim.epsilon)
        lines.append(f"noise multiplier for target epsilon {params.target_epsilon:g}:")
        return Accounted(tuple(lines), sigma)
