"""``cdp-termwise``: term-wise DP-Adam (PriVAE, Algorithm 1) with a batch-wise divergence term.

Options (:class:`TermwiseOptions`): those of ``cdp`` but ``microbatch`` (``clip_norm`` is C1) plus
``clip_norm_2`` (C2, default ``DEFAULT_CLIP_RATIO * C1``), ``divergence`` (mmd, sparse or
kl-prior, default mmd), ``alpha`` (default 100), ``partitions`` (b, default 4) and
``termwise_accounting`` (stacked, the only value accepted: composed is refused because both
terms share one Poisson batch; see ``audit.privacy.termwise_accounting``). C2 = 0 or alpha = 0
trains and accounts standard DP-Adam.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from audit.config import CellConfig
from audit.mechanisms.cdp import CdpEpsilonParams, CentralDP, ran_dp, run_facts, with_extra
from audit.mechanisms.dp_adam_options import ClippedAdamOptions
from audit.mechanisms.mechanism import CellData, Context, Prepared, Trained
from audit.options import non_negative_float, option, positive_int
from audit.privacy.claim import PrivacyClaim
from audit.privacy.termwise_accounting import (
    PARTITION_SENSITIVITY_SHARED,
    TermwiseAccounting,
    check_run_accounting,
    termwise_claim,
    termwise_noise_for_epsilon,
)
from dpvae_core.seeding import Purpose, derive_seed
from dpvae_core.validation import check_positive_int
from models.divergences import Divergence
from models.dp import DPSettings
from models.dp.termwise_loop import (
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
    (:func:`models.dp.termwise_loop.partition_assignment`), so any partition may hold several
    records whatever b and N_train are, and adding or removing one record moves its partition's
    clipped gradient anywhere in the C2 ball. The arguments are checked, not used."""
    check_positive_int("n_train", n_train)
    check_positive_int("partitions", partitions)
    return PARTITION_SENSITIVITY_SHARED


def accounting_value(value: object) -> TermwiseAccounting:
    """The accounting named by ``value``: stacked, the only one accepted (composed is refused)."""
    return check_run_accounting(value)


@dataclass(frozen=True)
class TermwiseOptions(ClippedAdamOptions):
    """The options of ``cdp-termwise``: those of ``cdp`` but ``microbatch`` (it clips the
    sample-wise term per record; ``clip_norm`` is C1) and the batch term's."""

    mechanism: ClassVar[str] = "cdp-termwise"
    clip_norm_2: float | None = option(
        f"clip norm C2 of the batch-wise divergence term (default {DEFAULT_CLIP_RATIO:g} * C1)",
        non_negative_float("clip norm C2 (--clip-norm-2)"),
        cli_type=float,
    )
    partitions: int | None = option(
        f"number b of disjoint batch partitions (default {DEFAULT_PARTITIONS})",
        positive_int("partitions"),
        cli_type=int,
    )
    termwise_accounting: TermwiseAccounting | None = option(
        "stacked, the only value accepted (both terms share one Poisson batch: one sampled "
        "Gaussian on the stacked pair, noise multiplier s/sqrt(5) for the partition sensitivity "
        "2*C2); composed is refused, it is no bound for a shared batch",
        accounting_value,
    )


@dataclass(frozen=True)
class TermwiseEpsilonParams(CdpEpsilonParams):
    """``benchmark.py epsilon --mech cdp-termwise``: a cdp schedule and the batch term's."""

    mechanism: ClassVar[str] = "cdp-termwise"
    termwise_accounting: TermwiseAccounting | None = option(
        "stacked (the default and the only value accepted): both terms share one Poisson batch, "
        "accounted as one sampled Gaussian on the stacked pair with noise multiplier "
        "s/sqrt(1+K^2), s/sqrt(5) at the default K = 2; composed (two independently sampled "
        "Gaussians) is refused, it is no bound for a shared batch",
        accounting_value,
    )
    partition_sensitivity: float | None = option(
        "sensitivity of the batch-wise term in units of C2, in [1, 2]: 2 (default) when a "
        "partition can hold several records, 1 when each holds at most one",
        float,
        "K",
        cli_type=float,
    )

    def termwise(self) -> dict[str, object]:
        """The batch term's accounting arguments."""
        k = self.partition_sensitivity
        return {
            "batch_clip_norm": 1.0,  # any C2 > 0: the accounting depends only on C2 > 0
            "accounting": self.termwise_accounting or TermwiseAccounting.STACKED,
            "partition_sensitivity": PARTITION_SENSITIVITY_SHARED if k is None else k,
        }


class TermwiseDP(CentralDP):
    """``cdp-termwise``: sample-wise clip C1, per-partition clip C2, one noise multiplier s.

    Notes:
        The claim (``audit.privacy.termwise_accounting.termwise_claim``) accounts both releases of
        every step stacked (one sampled Gaussian at s / sqrt(1 + k^2) on the shared batch), with k
        from :func:`partition_sensitivity`; its method names the accounting, and its extra holds
        PriVAE's own kappa-based epsilon for comparison.
    """

    name = "cdp-termwise"
    accounting_help = "term-wise DP-Adam of PriVAE"
    options_type = TermwiseOptions
    accounting_type = TermwiseEpsilonParams

    def solve_noise(self, *, params: CdpEpsilonParams, **schedule: Any) -> float:
        return termwise_noise_for_epsilon(**schedule, **self.typed_params(params).termwise())

    def schedule_claim(self, *, params: CdpEpsilonParams, **schedule: Any) -> PrivacyClaim:
        return termwise_claim(**schedule, **self.typed_params(params).termwise())

    def _check_objective(self, options: ClippedAdamOptions, *, batch_size: int) -> None:
        """Any divergence: the batch-wise term has its own clip norm and noise (every value was
        checked when the options were built)."""
        return None

    def _train(
        self,
        model: ConditionalConvVAE,
        prepared: Prepared,
        cell: CellConfig,
        ctx: Context,
        settings: VAETrainSettings,
        dp: DPSettings,
    ) -> TrainHistory:
        opts = self.typed(self.options_of(cell))
        c2 = opts.clip_norm_2
        termwise = TermwiseSettings(
            divergence=opts.divergence or Divergence.MMD,
            alpha=DEFAULT_ALPHA if opts.alpha is None else opts.alpha,
            partitions=self.partitions(cell),
            clip_norm=DEFAULT_CLIP_RATIO * dp.clip_norm if c2 is None else c2,
            seed=derive_seed(cell.seed, Purpose.TRAIN, "termwise", cell.noise_key),
        )
        return train_termwise_vae(
            model,
            prepared.train,
            prepared.val,
            settings,
            dp,
            termwise,
            progress=ctx.progress,
            audit_hook=ctx.audit_hook,
        )

    def partitions(self, cell: CellConfig) -> int:
        value = self.typed(self.options_of(cell)).partitions
        return DEFAULT_PARTITIONS if value is None else value

    def has_batch_term(self, cell: CellConfig) -> bool:
        """Whether the run releases a batch-wise term (alpha > 0 and C2 > 0); known up front
        because the default C2 is a positive multiple of C1."""
        opts = self.typed(self.options_of(cell))
        alpha = DEFAULT_ALPHA if opts.alpha is None else opts.alpha
        return alpha > 0 and (opts.clip_norm_2 is None or opts.clip_norm_2 > 0)

    def accounting(self, cell: CellConfig) -> TermwiseAccounting:
        value = self.typed(self.options_of(cell)).termwise_accounting
        return check_run_accounting(TermwiseAccounting.STACKED if value is None else value)

    def calibrate(self, cell: CellConfig, *, target_epsilon: float, n_train: int) -> float:
        """The noise multiplier s whose stacked term-wise claim is ``target_epsilon``."""
        return termwise_noise_for_epsilon(
            target_epsilon=target_epsilon,
            n_train=n_train,
            batch_size=cell.profile.batch_size,
            epochs=cell.profile.epochs,
            delta=self.delta(cell, n_train),
            batch_clip_norm=1.0 if self.has_batch_term(cell) else 0.0,
            accounting=self.accounting(cell),
            conversion=self.conversion(cell),
            partition_sensitivity=partition_sensitivity(
                n_train=n_train, partitions=self.partitions(cell)
            ),
        )

    def claim(self, cell: CellConfig, data: CellData, trained: Trained) -> PrivacyClaim:
        n_train = len(data.train[0])
        run = ran_dp(trained, n_train=n_train, cell=cell)
        if run.batch_term is None:
            raise RuntimeError(
                "the term-wise loop recorded no batch term; the claim would be wrong"
            )
        claim = termwise_claim(
            n_train=n_train,
            batch_size=cell.profile.batch_size,
            epochs=cell.profile.epochs,
            noise_multiplier=run.noise_multiplier,
            batch_clip_norm=run.batch_term.clip_norm_2,
            delta=self.delta(cell, n_train),
            accounting=self.accounting(cell),
            conversion=self.conversion(cell),
            partition_sensitivity=partition_sensitivity(
                n_train=n_train, partitions=run.batch_term.partitions
            ),
        )
        return with_extra(claim, run_facts(trained))
