"""Term-wise DP-Adam (PriVAE, Takahashi et al., Algorithm 1 and Eq. 13-16).

The loss splits into the sample-wise term phi(x_i) = rec + beta * KL(q(z|x_i) || N(0, I)) and the
batch-wise term psi(s_j) = alpha * MMD(q(z) on s_j, p(z)) (or alpha * KL(p(z) || q_{s_j}(z)),
``Divergence.KL_PRIOR``) over b disjoint partitions s_j of the batch. Each step releases

    g = (sum_i clip_C1(grad phi(x_i)) + N(0, (s C1)^2 I)) / B
      + (sum_j clip_C2(grad psi(s_j)) + N(0, (s C2)^2 I)) / b

and hands g to Adam (``models.dp.train_dp_vae`` with a :class:`PartitionedBatchTerm`).
With C2 = 0 or alpha = 0 there is no batch-wise release and the run is standard DP-Adam,
bit for bit.

Notes:
    Partitions are fixed per record and independent of every other record: record i's partition
    is a keyed hash of (seed, i) modulo b (:func:`partition_assignment`), neither positional
    chunks of the sampled batch nor a balanced permutation of D_train (both move other records'
    partitions when one record is added or removed; see ``audit.privacy.termwise_accounting``).
    Adding or
    removing one record then changes its own clipped phi-gradient (by <= C1) and only its own
    partition's clipped psi-gradient (by <= 2 C2): PriVAE's Lemma 2 counts C1 + C2. Partition
    sizes are therefore not balanced; a partition with fewer than two records in a batch (the
    unbiased MMD needs two) contributes the zero gradient, which lies in the C2 ball, so the
    2 C2 bound still holds when a record's arrival or departure crosses that threshold.
    psi depends on the encoder only; its gradient on the decoder's parameters is the constant 0
    for every batch, so its noise goes on the encoder's coordinates only (sensitivity 0 elsewhere).
    phi's KL stays against N(0, I) for both divergences, so that C2 = 0 is DP-Adam and D_gen
    (decoded from z ~ N(0, I)) matches what phi trains; the sparse prior enters through psi.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum
from itertools import chain

import torch
from torch import nn

from dpvae_core.digests import bucket_assignment, record_bucket
from dpvae_core.progress import ProgressFactory, null_progress
from models.divergences import (
    Divergence,
    kl_prior_aggregate_at,
    mmd,
    model_prior,
    sample_prior,
)
from models.dp import (
    AuditHook,
    BatchTermRun,
    ClippedSum,
    DPSettings,
    GradSampleMode,
    PerExampleGradients,
    clip_and_sum,
    quiet_backward_hooks,
    train_dp_vae,
)
from models.training import Pair, TrainHistory, VAETrainSettings
from models.vae import ConditionalConvVAE

#: PriVAE, Section 5.1: weight of the MMD term.
#: The key of a record's partition hash (:func:`record_partition`).
PARTITION_TAG = "termwise-partition"
DEFAULT_ALPHA = 100.0
#: Partitions b per batch: PriVAE uses B/b = 16 records per partition at B = 256; at our B = 32,
#: b = 4 keeps 8 records per partition, enough for a two-sample MMD, and divides psi's noise by 4.
DEFAULT_PARTITIONS = 4
#: C2 / C1 when --clip-norm-2 is not given (PriVAE, Section 5.1: C1 = 0.05, C2 = 0.005).
DEFAULT_CLIP_RATIO = 0.1


class PartitionGradients(str, Enum):
    """How the per-partition gradients of psi are computed (both exact; see
    :class:`PartitionedBatchTerm`). ENGINE, the run's per-example engine with one group per
    partition, is the default: with book-keeping (``bk``) it is one encoder pass and one product
    per layer and partition. On the 64x64 VAE at b = 4, batch 32 (benchmarks/bench_dp_epoch.py)
    term-wise bk/engine ran at 1.66x a non-private epoch, bk/autograd at 1.88x; with Opacus's
    ew the engine route was the slower one."""

    AUTOGRAD = "autograd"
    ENGINE = "engine"


@dataclass(frozen=True)
class TermwiseSettings:
    """The batch-wise term: divergence, its weight alpha, b partitions, clip norm C2, the seed
    of the partition assignment and the prior samples, and how per-partition gradients are
    computed."""

    divergence: Divergence
    alpha: float
    partitions: int
    clip_norm: float
    seed: int
    gradients: PartitionGradients = PartitionGradients.ENGINE

    def __post_init__(self) -> None:
        object.__setattr__(self, "divergence", Divergence(self.divergence))
        object.__setattr__(self, "gradients", PartitionGradients(self.gradients))
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise ValueError(f"alpha must be a finite number >= 0, got {self.alpha!r}")
        if not (math.isfinite(self.clip_norm) and self.clip_norm >= 0):
            raise ValueError(f"clip norm C2 must be a finite number >= 0, got {self.clip_norm!r}")
        if not isinstance(self.partitions, int) or self.partitions < 1:
            raise ValueError(f"partitions must be a positive integer, got {self.partitions!r}")

    @property
    def active(self) -> bool:
        """Whether a batch-wise release happens at all (alpha > 0 and C2 > 0)."""
        return self.alpha > 0 and self.clip_norm > 0


def record_partition(index: int, partitions: int, *, seed: int) -> int:
    """Partition of the D_train record at ``index``: SHA-256 of (seed, index), modulo b
    (:func:`dpvae_core.digests.record_bucket`: i.i.d. uniform over 0..b-1 across indices)."""
    return record_bucket(PARTITION_TAG, index, partitions, seed=seed)


def partition_assignment(n_train: int, partitions: int, *, seed: int) -> torch.Tensor:
    """Partition (n_train,) int64 of every D_train record: :func:`record_partition` of each index.

    Fixed for the whole run and independent of the data and of every other record: adding or
    removing a record moves no other record's partition. Sizes are not balanced.
    """
    return bucket_assignment(PARTITION_TAG, n_train, partitions, seed=seed, what="partitions")


class PartitionDivergence(nn.Module):
    """psi(s_j) = alpha * D(s_j, prior[j]) for each of b partitions -> (b,).

    D is the MMD between z = mu + sigma * noise (the step's reparameterisation noise; its first
    sample where the model draws several) and the partition's prior samples, or, for
    ``Divergence.KL_PRIOR``, KL(p || q_{s_j}) estimated at them (no noise needed).
    ``prior`` (b, m, d) holds m prior samples per partition. A partition with fewer records
    than the divergence needs (``Divergence.min_records``) contributes 0.
    """

    def __init__(
        self,
        vae: ConditionalConvVAE,
        *,
        alpha: float,
        partitions: int,
        divergence: Divergence = Divergence.MMD,
    ) -> None:
        super().__init__()
        self.vae, self.alpha, self.partitions = vae, alpha, partitions
        self.divergence = Divergence(divergence)
        self.target_prior = model_prior(vae) if self.divergence is Divergence.KL_PRIOR else None

    def _term(
        self, mu: torch.Tensor, logvar: torch.Tensor, noise: torch.Tensor, prior: torch.Tensor
    ) -> torch.Tensor:
        if self.target_prior is not None:
            return self.alpha * kl_prior_aggregate_at(prior, mu, logvar, prior=self.target_prior)
        if noise.ndim == 3:
            noise = noise[:, 0]
        return self.alpha * mmd(mu + torch.exp(0.5 * logvar) * noise, prior)

    def partition_loss(
        self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor, prior: torch.Tensor
    ) -> torch.Tensor:
        """psi of one partition (enough records) against its prior samples (m, d): a scalar."""
        mu, logvar = self.vae.encode(x, y)
        return self._term(mu, logvar, noise, prior)

    def forward(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        noise: torch.Tensor,
        prior: torch.Tensor,
        partition: torch.Tensor,
    ) -> torch.Tensor:
        mu, logvar = self.vae.encode(x, y)
        counts = torch.bincount(partition, minlength=self.partitions).tolist()
        out = []
        for j, count in enumerate(counts):
            if count < self.divergence.min_records:
                out.append((mu * 0).sum())
            else:
                mask = partition == j
                out.append(self._term(mu[mask], logvar[mask], noise[mask], prior[j]))
        return torch.stack(out)


def encoder_parameters(vae: ConditionalConvVAE) -> list[nn.Parameter]:
    """The parameters q(z | x, y) depends on (conv stack, mu and log-variance heads)."""
    return list(chain(vae.encoder.parameters(), vae.fc_mu.parameters(), vae.fc_logvar.parameters()))


class PartitionedBatchTerm:
    """PriVAE's batch-wise release (Eq. 15) as a ``models.dp.BatchTerm``.

    Per-partition gradients of psi with respect to the encoder's parameters (the only ones psi
    reaches; the decoder's entries are zeros), by ``settings.gradients``:
    AUTOGRAD, one ordinary backward pass per partition; or ENGINE, the run's grad-sample mode
    clipping per group (a partition is one 'example'): with ``bk`` each partition's gradient
    is formed directly, with Opacus's modes per-record gradients are summed per partition
    (ghost clipping cannot clip per partition, so GHOST runs use hooks here). Each step draws
    ``prior_samples`` = max(2, ceil(B / b)) prior samples per partition from a seeded
    generator: a data-independent count, so that the randomness one partition sees does not
    depend on the other partitions' sizes.
    """

    def __init__(
        self,
        vae: ConditionalConvVAE,
        settings: TermwiseSettings,
        *,
        n_train: int,
        batch_size: int,
        mode: GradSampleMode,
    ) -> None:
        self.settings = settings
        self.prior_samples = max(2, math.ceil(batch_size / settings.partitions))
        self.clip_norm = settings.clip_norm
        self.denominator = settings.partitions
        self._gen = torch.Generator().manual_seed(settings.seed)
        self._assignment = partition_assignment(n_train, settings.partitions, seed=settings.seed)
        self._vae = vae
        self._module = PartitionDivergence(
            vae,
            alpha=settings.alpha,
            partitions=settings.partitions,
            divergence=settings.divergence,
        )
        reachable = {id(p) for p in encoder_parameters(vae)}
        self._params = [p for p in vae.parameters() if p.requires_grad]
        self._mask = [id(p) in reachable for p in self._params]
        self._encoder = [p for p, on in zip(self._params, self._mask, strict=True) if on]
        self._engine = None
        if settings.gradients is PartitionGradients.ENGINE:
            mode = GradSampleMode.HOOKS if mode is GradSampleMode.GHOST else mode
            self._engine = PerExampleGradients(self._module, mode, params=self._encoder)

    def clipped_sum(
        self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor, index: torch.Tensor
    ) -> ClippedSum:
        part = self._assignment[index].to(x.device)
        b, m, d = self.settings.partitions, self.prior_samples, self._vae.latent_dim
        prior = sample_prior(
            self.settings.divergence,
            b * m,
            d,
            generator=self._gen,
            device=x.device,
            mixture=self._module.target_prior,
        ).view(b, m, d)
        if self._engine is None:
            grads, values = self._partition_gradients(x, y, noise, prior, part)
            summed, norms = clip_and_sum(grads, clip_norm=self.clip_norm)
        else:
            out = self._engine.clipped_sum(
                x, y, noise, prior, part, clip_norm=self.clip_norm, groups=part, num_groups=b
            )
            summed, norms, values = out.grads, out.norms, out.values
        grads_iter = iter(summed)
        full = [
            next(grads_iter) if on else p.new_zeros(p.shape)
            for p, on in zip(self._params, self._mask, strict=True)
        ]
        return ClippedSum(full, norms, values)

    def _partition_gradients(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        noise: torch.Tensor,
        prior: torch.Tensor,
        part: torch.Tensor,
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Per-partition gradients (b, *p.shape) of the encoder's parameters, and psi (b,)."""
        b = self.settings.partitions
        grads = [p.new_zeros((b, *p.shape)) for p in self._encoder]
        values = x.new_zeros(b)
        for j, count in enumerate(torch.bincount(part, minlength=b).tolist()):
            if count < self.settings.divergence.min_records:
                continue
            mask = part == j
            psi = self._module.partition_loss(x[mask], y[mask], noise[mask], prior[j])
            with quiet_backward_hooks():
                rows = torch.autograd.grad(psi, self._encoder)
            for g, row in zip(grads, rows, strict=True):
                g[j] = row
            values[j] = psi.detach()
        return grads, values

    def noise_mask(self) -> list[bool]:
        return list(self._mask)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()


def train_termwise_vae(
    model: ConditionalConvVAE,
    train: Pair,
    val: Pair,
    settings: VAETrainSettings,
    dp: DPSettings,
    termwise: TermwiseSettings,
    *,
    progress: ProgressFactory = null_progress,
    audit_hook: AuditHook | None = None,
) -> TrainHistory:
    """Term-wise DP-Adam: DP-Adam on phi (clip C1 = ``dp.clip_norm``, noise multiplier s =
    ``dp.noise_multiplier``) plus the batch-wise release of psi (clip C2, the same s).

    Without an active batch term (alpha = 0 or C2 = 0) this is ``train_dp_vae`` exactly.
    ``audit_hook`` (audit/test only) reaches the per-example term's clipped sum, as in
    :func:`~models.dp.dp_adam.train_dp_vae`.
    """
    term = None
    if termwise.active:
        term = PartitionedBatchTerm(
            model,
            termwise,
            n_train=len(train[0]),
            batch_size=settings.batch_size,
            mode=dp.grad_sample_mode,
        )
    history = train_dp_vae(
        model,
        train,
        val,
        settings,
        dp,
        batch_term=term,
        progress=progress,
        audit_hook=audit_hook,
    )
    history.dp = replace(
        history.dp,
        batch_term=BatchTermRun(
            clip_norm_2=termwise.clip_norm if termwise.active else 0.0,
            alpha=termwise.alpha,
            partitions=termwise.partitions,
            divergence=termwise.divergence.value,
        ),
    )
    return history
