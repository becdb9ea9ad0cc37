"""Black-box audits of the local randomizers on worst-case neighbouring inputs.

Each audit draws M independent outputs of the REAL mechanism code on each of two inputs,
reduces every output to its likelihood-ratio statistic (a monotone function of the log
likelihood ratio, so that thresholding it is the Neyman-Pearson test), picks the threshold on the
first half of the draws and bounds the test's error rates with Clopper-Pearson on the second half
(:func:`audit.empirical.bounds.threshold_test_bound`).

- ldp, images: :func:`audit.mechanisms.pixelization_noise.pixelize` on black against white (the
  any-two-records claim) and on black against black with m pixels white (Fan's m-neighbourhood);
- ldp, series: :func:`audit.mechanisms.laplace_noise.laplace_perturb_series`, one value at -1
  and +1;
- vae-ldp: the release ``z = mu + sigma e`` of :meth:`models.perturbation.NoiseBound.perturb`,
  with encoder means at the opposite corners (+3, ..., +3) and (-3, ..., -3).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import numpy as np
import torch
from scipy import stats
from torch import nn

from audit.empirical.bounds import (
    CONFIDENCE,
    ThresholdBound,
    epsilon_from_rates,
    threshold_ceiling,
    threshold_test_bound,
)
from audit.mechanisms.laplace_noise import laplace_perturb_series
from audit.mechanisms.pixelization_noise import pixelize
from audit.privacy.claim import GaussianConversion
from audit.privacy.vae_ldp_accounting import MEAN_BOUND, vae_ldp_claim
from dpvae_core.seeding import torch_generator
from dpvae_core.validation import check_positive, check_positive_int
from models.perturbation import NoiseBound

#: M, the draws per input, by profile (the design's quick / standard / paper).
DRAWS = {"quick": 10**4, "standard": 10**5, "paper": 10**6}
#: Output values generated at once (bounds memory at M = 10^6 for 64x64x3 images).
CHUNK_VALUES = 2**22
#: Candidate thresholds tried on the selection half.
N_CANDIDATES = 2001

#: (input index 0 or 1, number of draws, generator) -> (n,) float64 statistics.
Statistic = Callable[[int, int, torch.Generator], np.ndarray]


class Pattern(str, Enum):
    """Which neighbouring images the pixelization audit compares."""

    ANY_TWO = "any-two"  # black against white: every pixel differs
    NEIGHBOURHOOD = "m-neighbourhood"  # black against black with m pixels white


@dataclass(frozen=True)
class LocalAudit:
    """One local-randomizer audit: the claim it tests, the bound, and how it was obtained.

    ``claim`` is the epsilon the audited pair is covered by (``claim_kind`` names it);
    ``claims`` holds every claim of the mechanism at this parameter, labelled. ``ceiling`` is the
    bound with no test errors at these M (the most the audit could prove). ``delta_from``: where
    the audit's delta came from, where the mechanism chose it (empty: given, or pure DP).
    """

    mechanism: str
    pair: str
    claim_kind: str
    claim: float
    claims: dict[str, float]
    bound: ThresholdBound
    ceiling: float
    draws: int
    threshold: float
    seconds: float
    delta_from: str = ""

    @property
    def epsilon(self) -> float:
        return self.bound.epsilon


def _counts(s0: np.ndarray, s1: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, ...]:
    """(false positives: s0 >= t, false negatives: s1 < t) for each threshold t."""
    fp = len(s0) - np.searchsorted(np.sort(s0), thresholds, side="left")
    fn = np.searchsorted(np.sort(s1), thresholds, side="left")
    return fp, fn


def choose_threshold(s0: np.ndarray, s1: np.ndarray, *, delta: float, confidence: float) -> float:
    """The threshold t (guess input 1 when the statistic is >= t) with the largest
    Clopper-Pearson bound on these draws; candidates are observed values (so point masses,
    e.g. from clipping, are candidates themselves)."""
    pooled = np.concatenate([s0, s1])
    candidates = np.unique(np.quantile(pooled, np.linspace(0, 1, N_CANDIDATES), method="lower"))
    fp, fn = _counts(s0, s1, candidates)
    each = 1 - (1 - confidence) / 2
    fpr = np.where(fp >= len(s0), 1.0, stats.beta.ppf(each, fp + 1, np.maximum(len(s0) - fp, 1)))
    fnr = np.where(fn >= len(s1), 1.0, stats.beta.ppf(each, fn + 1, np.maximum(len(s1) - fn, 1)))
    eps = [epsilon_from_rates(fpr=a, fnr=b, delta=delta) for a, b in zip(fpr, fnr, strict=True)]
    return float(candidates[int(np.argmax(eps))])


def draw_statistics(
    statistic: Statistic, which: int, draws: int, *, per_draw: int, gen: torch.Generator
) -> np.ndarray:
    """``draws`` statistics of input ``which`` in chunks of at most CHUNK_VALUES output values."""
    chunk = max(1, CHUNK_VALUES // max(per_draw, 1))
    out = [statistic(which, min(chunk, draws - s), gen) for s in range(0, draws, chunk)]
    return np.concatenate(out) if out else np.zeros(0)


def threshold_audit(
    statistic: Statistic,
    *,
    draws: int,
    per_draw: int,
    seed: int,
    tag: str,
    delta: float = 0.0,
    confidence: float = CONFIDENCE,
) -> tuple[ThresholdBound, float]:
    """(bound, threshold) from ``draws`` outputs per input; the first half picks the threshold,
    the second half, independent of it, gives the Clopper-Pearson bound."""
    check_positive_int("draws", draws)
    if draws < 2:
        raise ValueError(f"draws must be >= 2 (half picks the threshold), got {draws!r}")
    s = [
        draw_statistics(
            statistic, w, draws, per_draw=per_draw, gen=torch_generator(seed, "audit", tag, w)
        )
        for w in (0, 1)
    ]
    half = draws // 2
    t = choose_threshold(s[0][:half], s[1][:half], delta=delta, confidence=confidence)
    e0, e1 = s[0][half:], s[1][half:]
    fp, fn = (int(c[0]) for c in _counts(e0, e1, np.array([t])))
    bound = threshold_test_bound(
        false_positives=fp,
        negatives=len(e0),
        false_negatives=fn,
        positives=len(e1),
        delta=delta,
        confidence=confidence,
    )
    return bound, t


def pixelization_claims(
    *, eps_i: float, shape: tuple[int, int, int], neighborhood: int
) -> dict[str, float]:
    """Both claims of Fan's pixelization for (C, H, W) images, labelled.

    - ``any-two``: ``C * eps_i * H * W / m``. Each channel's block means move by at most 1 per
      block between ANY two images, an L1 change of (H/b)(W/b) against the scale m/(b^2 eps_i):
      H W eps_i / m per channel (64x64x3, m = 64: 192 eps_i). This is what the ``epsilon``
      column of every other mechanism means.
    - ``m-neighbourhood``: ``C * eps_i``, for images differing in at most m pixels (Fan 2018).
    """
    c, h, w = shape
    eps = check_positive("eps_i", eps_i)
    m = check_positive_int("neighborhood", neighborhood)
    return {Pattern.ANY_TWO.value: c * eps * h * w / m, Pattern.NEIGHBOURHOOD.value: c * eps}


def pixelization_pair(
    shape: tuple[int, int, int], *, block: int, neighborhood: int, pattern: Pattern
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x0, x1, mask): black, and white (any-two) or black with m pixels white, as whole b x b
    blocks in raster order over every channel's first blocks (m-neighbourhood; m // b^2 blocks, so
    the pair is within Fan's neighbourhood). ``mask`` (C, H, W) marks the differing pixels."""
    c, h, w = shape
    x0 = torch.zeros(1, c, h, w, dtype=torch.float64)
    if pattern is Pattern.ANY_TWO:
        return x0, torch.ones_like(x0), torch.ones(c, h, w, dtype=torch.bool)
    blocks = neighborhood // (block * block)
    if blocks < 1 or blocks > (h // block) * (w // block):
        raise ValueError(
            f"m-neighbourhood audit needs 1 <= m / b^2 <= blocks per channel, got m={neighborhood}"
            f", b={block} on {h}x{w}"
        )
    grid = torch.zeros((h // block) * (w // block), dtype=torch.bool)
    grid[:blocks] = True
    per_channel = grid.reshape(h // block, w // block)
    per_channel = per_channel.repeat_interleave(block, 0).repeat_interleave(block, 1)
    mask = per_channel.expand(c, h, w).clone()
    return x0, mask.to(torch.float64)[None], mask


def audit_pixelization(
    *,
    eps_i: float,
    shape: tuple[int, int, int],
    block: int = 1,
    neighborhood: int | None = None,
    pattern: Pattern | str = Pattern.ANY_TWO,
    draws: int = DRAWS["quick"],
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> LocalAudit:
    """Audit :func:`pixelize` on the ``pattern`` pair of (C, H, W) images.

    Statistic: the sum of the released pixels over the differing pixels. Per differing block the
    released value y is the block mean plus Laplace(s) noise clipped to [0, 1]; for means 0 and 1
    the clipped law has point masses 1/2 and e^{-1/s}/2 at 0 and 1 and density on (0, 1), and the
    log likelihood ratio (white over black) is (2y - 1)/s at every y, the point masses included.
    The sum is therefore an increasing function of the exact log likelihood ratio: clipping is
    handled, not avoided. The claim compared is the pattern's own (:func:`pixelization_claims`).
    """
    pattern = Pattern(pattern)
    c, h, w = shape
    m = round(math.sqrt(h * w)) if neighborhood is None else neighborhood
    claims = pixelization_claims(eps_i=eps_i, shape=shape, neighborhood=m)
    x0, x1, mask = pixelization_pair(shape, block=block, neighborhood=m, pattern=pattern)
    inputs = (x0.float(), x1.float())

    def statistic(which: int, n: int, gen: torch.Generator) -> np.ndarray:
        x = inputs[which].expand(n, c, h, w)
        y = pixelize(x, eps_i=eps_i, block=block, neighborhood=m, generator=gen)
        return y.to(torch.float64)[:, mask].sum(dim=1).numpy()

    start = time.perf_counter()
    bound, t = threshold_audit(
        statistic,
        draws=draws,
        per_draw=c * h * w,
        seed=seed,
        tag=f"pixelization-{pattern.value}",
        confidence=confidence,
    )
    return LocalAudit(
        mechanism="ldp-pixelization",
        pair="black vs white" if pattern is Pattern.ANY_TWO else f"black vs {m} pixels white",
        claim_kind=pattern.value,
        claim=claims[pattern.value],
        claims=claims,
        bound=bound,
        ceiling=threshold_ceiling(draws_per_input=draws - draws // 2, confidence=confidence),
        draws=draws,
        threshold=t,
        seconds=time.perf_counter() - start,
    )


def laplace_achievable(*, eps_i: float, draws: int, confidence: float = CONFIDENCE) -> float:
    """The bound the series audit reaches when its counts equal their expectations.

    The best test guesses +1 only when the released value is clipped to +1: FPR = e^{-eps}/2,
    FNR = 1/2, whose ratio (1 - FNR)/FPR is exactly e^eps; only the Clopper-Pearson widths on
    n = M/2 draws stand between the bound and eps_i (about ``eps_i - 1.96 (sqrt((1-p)/(n p)) +
    sqrt(1/n))`` for p = e^{-eps}/2). At eps_i = 1 that is 0.913, 0.973 and 0.991 eps_i at
    M = 10^4, 10^5 and 10^6.
    """
    n = draws - draws // 2
    return threshold_test_bound(
        false_positives=round(n * math.exp(-eps_i) / 2),
        negatives=n,
        false_negatives=round(n / 2),
        positives=n,
        confidence=confidence,
    ).epsilon


def audit_laplace_series(
    *, eps_i: float, draws: int = DRAWS["quick"], seed: int = 0, confidence: float = CONFIDENCE
) -> LocalAudit:
    """Audit :func:`laplace_perturb_series` on one measurement at -1 and at +1 (range [-1, 1]).

    Statistic: the released value y itself. The clipped Laplace(2/eps_i) laws have point masses
    at -1 and +1 and the log likelihood ratio is eps_i * y on [-1, 1], point masses included.
    The claim, eps_i per measurement, is tight (:func:`laplace_achievable`).
    """
    eps = check_positive("eps_i", eps_i)
    values = (-1.0, 1.0)

    def statistic(which: int, n: int, gen: torch.Generator) -> np.ndarray:
        x = torch.full((n, 1, 1), values[which], dtype=torch.float64)
        y = laplace_perturb_series(x, eps_i=eps, generator=gen, bounds=(-1.0, 1.0))
        return y.reshape(n).numpy()

    start = time.perf_counter()
    bound, t = threshold_audit(
        statistic, draws=draws, per_draw=1, seed=seed, tag="laplace", confidence=confidence
    )
    return LocalAudit(
        mechanism="ldp-laplace",
        pair="one value at -1 vs +1",
        claim_kind="per-measurement",
        claim=eps,
        claims={"per-measurement": eps},
        bound=bound,
        ceiling=threshold_ceiling(draws_per_input=draws - draws // 2, confidence=confidence),
        draws=draws,
        threshold=t,
        seconds=time.perf_counter() - start,
    )


class _Corners(nn.Module):
    """Encoder at a corner of [-3, 3]^d and identity decoder (the host of :class:`_CornerRelease`).

    Records are (d,) vectors of +-1: raw mean 1e3 * x (tanh saturates, mu = 3 * sign(x)), raw
    log-variance -30 (the floor sigma is what the release uses).
    """

    def __init__(self, latent_dim: int) -> None:
        super().__init__()
        self.latent_dim = latent_dim
        self._anchor = nn.Parameter(torch.zeros(()), requires_grad=False)

    @property
    def record_shape(self) -> tuple[int]:
        return (self.latent_dim,)

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return 1e3 * x, torch.full_like(x, -30.0)

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return z


class _CornerRelease(NoiseBound, _Corners):
    """VAE-LDP's real release transform on :class:`_Corners`: :meth:`NoiseBound.perturb` then
    returns the released latent z itself."""

    def __init__(self, *, latent_dim: int, sigma: float) -> None:
        super().__init__(latent_dim)
        self._set_noise_bound(sigma, MEAN_BOUND)


def audit_vae_ldp(
    *,
    mechanism: str,
    sigma: float,
    latent_dim: int,
    delta: float,
    draws: int = DRAWS["quick"],
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> LocalAudit:
    """Audit VAE-LDP's Gaussian release with encoder means at (+3, ..., +3) and (-3, ..., -3).

    The release runs through :meth:`NoiseBound.perturb` (noise std exactly sigma) with a host
    whose encoder reaches the corners and whose decoder is the identity; decoding is
    post-processing, so auditing z is the strongest black-box view. Statistic: the projection of
    z on the means' difference (the sum of z's coordinates), the exact log likelihood ratio up
    to an increasing affine map. Claim: the analytic Gaussian mechanism's eps (Balle and Wang
    2018) at ``delta``; the classic formula's value is in ``claims``. The bound uses the same
    delta. ``mechanism``: the audited mechanism's name (the audit's label, and the tag of its
    draws).
    """
    claim = vae_ldp_claim(
        sigma=sigma, latent_dim=latent_dim, delta=delta, conversion=GaussianConversion.ANALYTIC
    )
    release = _CornerRelease(latent_dim=latent_dim, sigma=sigma)
    labels = torch.zeros(0, dtype=torch.long)

    def statistic(which: int, n: int, gen: torch.Generator) -> np.ndarray:
        x = torch.full((n, latent_dim), 1.0 if which else -1.0, dtype=torch.float64)
        z = release.perturb(x, labels.new_zeros(n), generator=gen, batch_size=max(n, 1))
        return z.sum(dim=1).numpy()

    start = time.perf_counter()
    bound, t = threshold_audit(
        statistic,
        draws=draws,
        per_draw=latent_dim,
        seed=seed,
        tag=mechanism,
        delta=delta,
        confidence=confidence,
    )
    return LocalAudit(
        mechanism=mechanism,
        pair="encoder means at (-3,...,-3) vs (+3,...,+3)",
        claim_kind="analytic-gaussian",
        claim=float(claim.extra["epsilon_analytic"]),
        claims={
            "analytic-gaussian": float(claim.extra["epsilon_analytic"]),
            "classic-formula": float(claim.extra["epsilon_classic"]),
        },
        bound=bound,
        ceiling=threshold_ceiling(
            draws_per_input=draws - draws // 2, delta=delta, confidence=confidence
        ),
        draws=draws,
        threshold=t,
        seconds=time.perf_counter() - start,
    )
