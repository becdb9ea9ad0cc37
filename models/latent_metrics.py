"""Latent-space metrics of PriVAE's sparse-prior task (Section 5.1, Figure 1a and 1c).

Sparsity: the mean Hoyer measure of the dimension-normalised codes (PriVAE, Eq. 17; Hurley
and Rickard 2009), as Mathieu et al.'s (2019) ``compute_sparsity(zs_mean, norm=True)`` computes
it on the encoder means. MMD(q(z), p(z)): the dimension-wise Cauchy-kernel MMD of Section 5.1
(:func:`models.divergences.mmd`, scales {0.2, 0.4, 1, 2, 4, 10}) between codes z ~ q(z | x),
one per record, and as many prior samples, averaged over batches. PriVAE does not say how
its Figure 1c value is computed beyond following [24]; Mathieu et al.'s ``analyse.py`` reports
the regulariser itself on test batches of the run's batch size (and divides the sum over
batches by the number of records, a further 1/B factor not reproduced here).
"""

from __future__ import annotations

import contextlib
import math

import torch

from dpvae_core.validation import check_positive_int
from models.divergences import CAUCHY_SCALES, Divergence, mmd, model_prior, sample_prior

#: PriVAE, Section 5.1: the batch size B = 256 (the batches the MMD is evaluated on).
DEFAULT_MMD_BATCH = 256


def hoyer(y: torch.Tensor) -> torch.Tensor:
    """Hoyer's measure (sqrt(d) - ||y||_1 / ||y||_2) / (sqrt(d) - 1) of each row of y (n, d).

    1 for a vector with one non-zero entry, 0 for one whose entries all have the same absolute
    value; scale invariant. d >= 2. A zero row has no defined value and gives NaN.
    """
    if y.ndim != 2 or y.shape[1] < 2:
        raise ValueError(
            f"Hoyer's measure needs rows of d >= 2 entries, got shape {tuple(y.shape)}"
        )
    d = y.shape[1]
    ratio = y.abs().sum(1) / y.pow(2).sum(1).sqrt()
    return (math.sqrt(d) - ratio) / (math.sqrt(d) - 1)


def hoyer_sparsity(codes: torch.Tensor, *, normalise: bool = True) -> float:
    """PriVAE's Sparsity (Eq. 17): the mean over records of Hoyer(z_bar_i).

    ``codes`` (n, d) are the records' latent codes (Mathieu et al.: the encoder means).
    With ``normalise`` each dimension is divided by its standard deviation over the records,
    z_bar_{i,d} = z_{i,d} / sigma_d, so that shrinking a dimension towards 0 does not count as
    sparsity; the sample standard deviation (n - 1) is used, as in the reference code (the
    choice does not matter: Hoyer's measure is scale invariant). Raises when a dimension has
    zero spread (the normalisation is undefined) or a code is zero.
    """
    codes = codes.detach()
    if normalise:
        if len(codes) < 2:
            raise ValueError(f"normalising needs at least 2 codes, got {len(codes)}")
        std = codes.std(0)
        flat = (std == 0).nonzero().flatten().tolist()
        if flat:
            raise ValueError(
                f"latent dimensions {flat} are constant over the records; their normalisation "
                "z / sigma(z) is undefined (pass normalise=False to skip it)"
            )
        codes = codes / std
    values = hoyer(codes)
    if torch.isnan(values).any():
        raise ValueError("a latent code is the zero vector; Hoyer's measure is undefined there")
    return float(values.mean())


def latent_mmd(
    codes: torch.Tensor,
    prior_samples: torch.Tensor,
    *,
    batch_size: int | None = DEFAULT_MMD_BATCH,
    scales: tuple[float, ...] = CAUCHY_SCALES,
) -> float:
    """MMD^2(q(z), p(z)) with the Cauchy-kernel sum: the mean of the unbiased estimate over
    consecutive batches of ``batch_size`` codes, each against as many prior samples.

    ``codes`` (n, d): one sample z ~ q(z | x_i) per record (the aggregate posterior q(z));
    ``prior_samples`` (n, d): as many draws from p(z). ``batch_size=None`` uses one batch of all
    n (memory n^2 d). A trailing batch with fewer than 2 records is left out. Close to 0 when
    q(z) = p(z) (and can then be slightly negative); the kernel values lie in (0, d*len(scales)].
    """
    if codes.shape != prior_samples.shape or codes.ndim != 2:
        raise ValueError(
            f"codes and prior_samples must both be (n, d), got {tuple(codes.shape)} and "
            f"{tuple(prior_samples.shape)}"
        )
    size = len(codes) if batch_size is None else check_positive_int("batch_size", batch_size)
    pairs = [
        (a, b)
        for a, b in zip(codes.detach().split(size), prior_samples.split(size), strict=True)
        if len(a) >= 2
    ]
    if not pairs:
        raise ValueError(f"the MMD needs a batch of at least 2 codes, got {len(codes)} codes")
    return float(torch.stack([mmd(a, b, scales=scales) for a, b in pairs]).mean())


def latent_summary(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, *, seed: int, batch: int = 512
) -> dict[str, float]:
    """PriVAE's Section 5.1 metrics of ``model``'s codes of the records (x, y):
    ``latent_hoyer`` (:func:`hoyer_sparsity` of the encoder means), ``latent_mmd`` (
    :func:`latent_mmd` of one z ~ q(z | x) per record against as many draws of the model's own
    prior, :func:`models.divergences.model_prior`) and ``latent_mmd_sparse`` (the same against
    PriVAE's sparse prior). Draws come from a generator seeded with ``seed``. A metric that is
    undefined for these codes (a constant dimension, a one-dimensional latent space, fewer than
    two records) is NaN."""
    device = next(model.parameters()).device
    with torch.inference_mode():
        parts = [
            model.encode(xb.to(device), yb.to(device))
            for xb, yb in zip(x.split(batch), y.split(batch), strict=True)
        ]
    mu = torch.cat([m for m, _ in parts]).cpu().double()
    logvar = torch.cat([v for _, v in parts]).cpu().double()
    gen = torch.Generator().manual_seed(seed)
    z = mu + torch.exp(0.5 * logvar) * torch.randn(mu.shape, generator=gen, dtype=mu.dtype)
    n, d = mu.shape
    out = {"latent_hoyer": math.nan, "latent_mmd": math.nan, "latent_mmd_sparse": math.nan}
    if n < 2:
        return out
    if d >= 2:
        with contextlib.suppress(ValueError):  # a constant dimension or a zero code: undefined
            out["latent_hoyer"] = hoyer_sparsity(mu)
    own = model_prior(model).sample(n, generator=gen, dtype=mu.dtype)
    out["latent_mmd"] = latent_mmd(z, own)
    sparse = sample_prior(Divergence.SPARSE, n, d, generator=gen).to(mu.dtype)
    out["latent_mmd_sparse"] = latent_mmd(z, sparse)
    return out
