"""Batch-wise divergences D(q(z), p(z)) for term-wise DP training (PriVAE, Section 5.1).

The regulariser is a dimension-wise MMD with a sum of Cauchy (inverse multiquadratic) kernels,

    k(a, b) = sum_d sum_l  s_l / (s_l + (a_d - b_d)^2),   s_l in {0.2, 0.4, 1, 2, 4, 10},

between the latent codes of a partition and as many samples of the prior. PriVAE prints the
denominator as ``s_{l=1} + (x_d - y_d)^2``, a typo: the code of Mathieu et al. (2019, the
experiments PriVAE follows) uses ``C / (C + d^2)`` with ``C = 2 * scale`` for scales
{.1, .2, .5, 1, 2, 5}, i.e. exactly C = s_l above.
"""

from __future__ import annotations

import math
from enum import Enum

import torch

from models.priors import GaussianMixturePrior, diagonal_gaussian_log_prob

#: PriVAE, Section 5.1: the scales s_l of the Cauchy kernel sum.
CAUCHY_SCALES: tuple[float, ...] = (0.2, 0.4, 1.0, 2.0, 4.0, 10.0)
#: PriVAE, Section 5.1: share gamma of "off" coordinates in the sparse prior.
SPARSE_GAMMA = 0.8
#: PriVAE, Section 5.1: variance sigma_0^2 of the spike at zero in the sparse prior.
SPARSE_SPIKE_VARIANCE = 0.05


class Divergence(str, Enum):
    """The batch-wise term: its divergence and target prior.

    MMD: the Cauchy-kernel MMD to p(z) = N(0, I), the prior D_gen is decoded from.
    SPARSE: the Cauchy-kernel MMD to PriVAE's sparse prior,
    prod_d (1 - gamma) N(z_d; 0, 1) + gamma N(z_d; 0, sigma_0^2) (Section 5.1).
    KL_PRIOR: KL(p(z) || q_s(z)) to the model's own prior (its ``prior`` attribute, a
    :class:`~models.priors.GaussianMixturePrior`; N(0, I) for a model without one), estimated
    at fixed prior draws by :func:`kl_prior_aggregate_at` (Section 5.2, the clustering task).
    """

    MMD = "mmd"
    SPARSE = "sparse"
    KL_PRIOR = "kl-prior"

    @property
    def min_records(self) -> int:
        """Records a partition needs for the term to be defined: 2 for the unbiased MMD, 1 for
        the KL estimator (an aggregate posterior of one record is still a density)."""
        return 1 if self is Divergence.KL_PRIOR else 2


def model_prior(model: object) -> GaussianMixturePrior:
    """The prior p(z) of ``model`` as a mixture: its ``prior`` attribute, or N(0, I) (one
    component at 0 with standard deviation 1) for a model without one."""
    prior = getattr(model, "prior", None)
    if prior is not None:
        return prior
    return GaussianMixturePrior(torch.zeros(1, model.latent_dim), std=1.0)  # type: ignore[attr-defined]


def cauchy_kernel(
    a: torch.Tensor, b: torch.Tensor, *, scales: tuple[float, ...] = CAUCHY_SCALES
) -> torch.Tensor:
    """Gram matrix (n, m) of the dimension-wise Cauchy kernel sum between a (n, d) and b (m, d).

    k(a, a) = d * len(scales); every entry lies in (0, d * len(scales)].
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(
            f"expected (n, d) and (m, d) tensors, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    sq = (a[:, None, :] - b[None, :, :]).pow(2)
    return sum(s / (s + sq) for s in scales).sum(-1)


def mmd(
    a: torch.Tensor, b: torch.Tensor, *, scales: tuple[float, ...] = CAUCHY_SCALES
) -> torch.Tensor:
    """Unbiased estimate of MMD^2 between samples a (n, d) and b (m, d), n, m >= 2 (a scalar).

    ``mean_{i != j} k(a_i, a_j) + mean_{i != j} k(b_i, b_j) - 2 mean_{i, j} k(a_i, b_j)``, the
    estimator of Mathieu et al.'s ``imq_dim_kernel``. Its expectation is 0 when a and b come from
    the same distribution; single draws can be slightly negative.
    """
    n, m = len(a), len(b)
    if n < 2 or m < 2:
        raise ValueError(f"the unbiased MMD needs at least 2 samples on each side, got {n} and {m}")
    k_aa, k_bb, k_ab = (cauchy_kernel(u, v, scales=scales) for u, v in ((a, a), (b, b), (a, b)))
    diag = a.shape[1] * len(scales)  # k(x, x)
    within_a = (k_aa.sum() - n * diag) / (n * (n - 1))
    within_b = (k_bb.sum() - m * diag) / (m * (m - 1))
    return within_a + within_b - 2 * k_ab.mean()


def sample_prior(
    divergence: Divergence,
    n: int,
    dim: int,
    *,
    generator: torch.Generator,
    device: str | torch.device = "cpu",
    mixture: GaussianMixturePrior | None = None,
) -> torch.Tensor:
    """n samples (n, dim) of the divergence's target prior, drawn on the CPU from ``generator``;
    KL_PRIOR draws from ``mixture`` (the model's prior, :func:`model_prior`; required)."""
    if divergence is Divergence.KL_PRIOR:
        if mixture is None or mixture.dim != dim:
            raise ValueError(f"kl-prior samples need the model's {dim}-dimensional prior")
        return mixture.sample(n, generator=generator, device=device)
    if divergence is Divergence.MMD:
        out = torch.randn(n, dim, generator=generator)
    else:
        spike = torch.rand(n, dim, generator=generator) < SPARSE_GAMMA
        std = torch.where(spike, math.sqrt(SPARSE_SPIKE_VARIANCE), 1.0)
        out = std * torch.randn(n, dim, generator=generator)
    return out.to(device)


def aggregate_posterior_log_prob(
    z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor
) -> torch.Tensor:
    """log q_s(z_j) (m,) of the aggregate posterior of a partition s, at points z (m, d).

    q_s(z) = (1/n) sum_i N(z; mu_i, diag(exp(logvar_i))), the mixture of the n records'
    posteriors q(z | x_i) (mu, logvar: (n, d), n >= 1), by a log-sum-exp over i.
    """
    if mu.ndim != 2 or mu.shape != logvar.shape or len(mu) < 1:
        raise ValueError(
            f"mu and logvar must both be (n, d) with n >= 1, got {tuple(mu.shape)} and "
            f"{tuple(logvar.shape)}"
        )
    if z.ndim != 2 or z.shape[1] != mu.shape[1]:
        raise ValueError(f"z must be (m, {mu.shape[1]}), got {tuple(z.shape)}")
    log_q = diagonal_gaussian_log_prob(z[:, None, :], mu[None], logvar[None])  # (m, n)
    return torch.logsumexp(log_q, dim=1) - math.log(len(mu))


def kl_prior_aggregate_at(
    prior_samples: torch.Tensor,
    mu: torch.Tensor,
    logvar: torch.Tensor,
    *,
    prior: GaussianMixturePrior,
) -> torch.Tensor:
    """KL(p(z) || q_s(z)) estimated at given samples z_j ~ p (m, d): a scalar.

    ``mean_j [log p(z_j) - log q_s(z_j)]`` with q_s the partition's aggregate posterior
    (:func:`aggregate_posterior_log_prob`); Mathieu et al.'s (2019) ``kld_inc``, the estimator
    PriVAE (Section 5.2) prints as ``sum_{j=1}^{|s|} (log p(z_j) - log sum_{i=1}^{|s|}
    q(z_j | x_i))`` with m = |s| prior samples. The printed form is m times this value minus the
    constant m log |s|: the same gradients up to the factor m, which only rescales alpha.
    Unbiased for KL(p || q_s) given the partition (q_s is the mixture over the partition, not
    the population's aggregate posterior). Gradients reach mu and logvar, not the samples.
    """
    if prior_samples.ndim != 2 or len(prior_samples) < 1:
        raise ValueError(
            f"prior_samples must be (m, d) with m >= 1, got {tuple(prior_samples.shape)}"
        )
    log_p = prior.log_prob(prior_samples)
    return (log_p - aggregate_posterior_log_prob(prior_samples, mu, logvar)).mean()


def kl_prior_aggregate(
    mu: torch.Tensor,
    logvar: torch.Tensor,
    *,
    prior: GaussianMixturePrior,
    generator: torch.Generator,
    num_samples: int | None = None,
) -> torch.Tensor:
    """PriVAE's batch-wise KL(p(z) || q(z)) (Section 5.2) of one partition: a scalar.

    Draws ``num_samples`` z_j ~ p from ``generator`` (default: as many as the partition has
    records, |s|, as the paper and Mathieu et al. do) and returns
    :func:`kl_prior_aggregate_at` at them. mu and logvar are the partition's encoder outputs
    (n, d). Unlike the MMD it needs no reparameterised codes of the records.

    Notes:
        Under term-wise DP the number of prior draws must not depend on the data: pass a fixed
        ``num_samples`` (``models.dp.termwise_loop`` uses max(2, ceil(B / b)) per partition), or the
        draws a partition sees shift with the other partitions' sizes.
    """
    m = len(mu) if num_samples is None else num_samples
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"num_samples must be a positive integer, got {num_samples!r}")
    z = prior.sample(m, generator=generator, dtype=mu.dtype).to(mu.device)
    return kl_prior_aggregate_at(z, mu, logvar, prior=prior)
