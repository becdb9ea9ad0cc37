"""``cdp-termwise``: term-wise DP-Adam (paper 004, Algorithm 1) with a batch-wise MMD term.

Options: those of ``cdp`` (``clip_norm`` is C1) plus ``clip_norm_2`` (C2, default
``DEFAULT_CLIP_RATIO * C1``), ``divergence`` (mmd or sparse, default mmd), ``alpha`` (default
100), ``partitions`` (b, default 4) and ``termwise_accounting`` (stacked, the only value
accepted: composed is refused because both terms share one Poisson batch; see
``audit.privacy.termwise``). C2 = 0 or alpha = 0 trains and accounts standard
DP-Adam.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audit.config import CellConfig, MechanismName
from audit.mechanisms.base import CellData, Context, Prepared
from audit.mechanisms.cdp import CentralDP, check_steps, run_facts, with_extra
from audit.privacy.claim import PrivacyClaim
from audit.privacy.termwise import (
    PARTITION_SENSITIVITY_SHARED,
    TermwiseAccounting,
    check_run_accounting,
    termwise_claim,
    termwise_noise_for_epsilon,
)
from core.seeding import Purpose, derive_seed
from core.validation import check_non_negative, check_positive_int, parse_enum
from models.divergences import Divergence
from models.dp_training import DPSettings
from models.termwise import (
    DEFAULT_ALPHA,
    DEFAULT_CLIP_RATIO,
    DEFAULT_PARTITIONS,
    TermwiseSettings,
    train_termwise_vae,
)
from models.training import TrainHistory, VAETrainSettings
from models.vae import ConditionalConvVAE


def partition_sensitivity(*, n_train: int, partitions: int) -> float:
    """k in units of C2: 2 for every run. Partitions are drawn per record independently
    (:func:`models.termwise.partition_assignment`), so any partition may hold several records
    whatever b and N_train are, and adding or removing one record moves its partition's clipped
    gradient anywhere in the C2 ball. The arguments are checked, not used."""
    check_positive_int("n_train", n_train)
    check_positive_int("partitions", partitions)
    return PARTITION_SENSITIVITY_SHARED


class TermwiseDP(CentralDP):
    """``cdp-termwise``: sample-wise clip C1, per-partition clip C2, one noise multiplier s.

    Notes:
        The claim (``audit.privacy.termwise.termwise_claim``) accounts both releases of every
        step stacked (one sampled Gaussian at s / sqrt(1 + k^2) on the shared batch), with k from
        :func:`partition_sensitivity`; its method names the accounting, and its extra holds paper
        004's own kappa-based epsilon for comparison.
    """

    name = MechanismName.CDP_TERMWISE
    option_names = (
        "clip_norm",
        "clip_norm_2",
        "target_epsilon",
        "delta",
        "conversion",
        "divergence",
        "alpha",
        "partitions",
        "termwise_accounting",
    )

    def validate_options(self, options: Mapping[str, Any], *, batch_size: int) -> None:
        self._check_common(options)
        if options.get("clip_norm_2") is not None:
            check_non_negative("clip norm C2 (--clip-norm-2)", options["clip_norm_2"])
        if options.get("alpha") is not None:
            check_non_negative("alpha", options["alpha"])
        if options.get("partitions") is not None:
            check_positive_int("partitions", options["partitions"])
        parse_enum(Divergence, options.get("divergence", Divergence.MMD.value), "divergence")
        check_run_accounting(options.get("termwise_accounting", TermwiseAccounting.STACKED))

    def _train(
        self,
        model: ConditionalConvVAE,
        prepared: Prepared,
        cell: CellConfig,
        ctx: Context,
        settings: VAETrainSettings,
        dp: DPSettings,
    ) -> TrainHistory:
        c2 = cell.option("clip_norm_2")
        termwise = TermwiseSettings(
            divergence=parse_enum(Divergence, cell.option("divergence", "mmd"), "divergence"),
            alpha=float(cell.option("alpha", DEFAULT_ALPHA)),
            partitions=int(cell.option("partitions", DEFAULT_PARTITIONS)),
            clip_norm=DEFAULT_CLIP_RATIO * dp.clip_norm if c2 is None else float(c2),
            seed=derive_seed(cell.seed, Purpose.TRAIN, "termwise", cell.config_hash),
        )
        return train_termwise_vae(
            model, prepared.train, prepared.val, settings, dp, termwise, progress=ctx.progress
        )

    @staticmethod
    def has_batch_term(cell: CellConfig) -> bool:
        """Whether the run releases a batch-wise term (alpha > 0 and C2 > 0); known up front
        because the default C2 is a positive multiple of C1."""
        c2 = cell.option("clip_norm_2")
        return float(cell.option("alpha", DEFAULT_ALPHA)) > 0 and (c2 is None or float(c2) > 0)

    @staticmethod
    def accounting(cell: CellConfig) -> TermwiseAccounting:
        return check_run_accounting(cell.option("termwise_accounting", TermwiseAccounting.STACKED))

    def noise_multiplier(self, cell: CellConfig, *, n_train: int) -> tuple[float, str]:
        target = cell.option("target_epsilon")
        if target is None:
            return float(cell.param_value), "grid"
        s = termwise_noise_for_epsilon(
            target_epsilon=target,
            n_train=n_train,
            batch_size=cell.profile.batch_size,
            epochs=cell.profile.epochs,
            delta=self.delta(cell, n_train),
            batch_clip_norm=1.0 if self.has_batch_term(cell) else 0.0,
            accounting=self.accounting(cell),
            conversion=self.conversion(cell),
            partition_sensitivity=partition_sensitivity(
                n_train=n_train, partitions=int(cell.option("partitions", DEFAULT_PARTITIONS))
            ),
        )
        return s, f"target-epsilon {target:g} (grid value {cell.param_value} ignored)"

    def claim(self, cell: CellConfig, data: CellData, history: TrainHistory) -> PrivacyClaim:
        n_train = len(data.train[0])
        check_steps(history, n_train=n_train, cell=cell)
        claim = termwise_claim(
            n_train=n_train,
            batch_size=cell.profile.batch_size,
            epochs=cell.profile.epochs,
            noise_multiplier=history.extra["noise_multiplier"],
            batch_clip_norm=history.extra["clip_norm_2"],
            delta=self.delta(cell, n_train),
            accounting=self.accounting(cell),
            conversion=self.conversion(cell),
            partition_sensitivity=partition_sensitivity(
                n_train=n_train, partitions=int(history.extra["partitions"])
            ),
        )
        return with_extra(claim, run_facts(history))
