"""The likelihood attack: the VAE's importance-weighted log-likelihood of each record, with offline
LiRA calibration against reference VAEs.

Raw score (higher = more likely a member): the IWAE bound (Burda et al. 2016, Eq. 8)

    log p(x | y) >= log (1/K) sum_k p(x | z_k, y) p(z_k) / q(z_k | x, y),   z_k ~ q(z | x, y),

with p(z) = N(0, I), q = N(mu, diag(exp(logvar))) from the encoder, and the decoder likelihood the
VAE was trained with: ``bernoulli`` (the conv VAE's summed binary cross-entropy, means clamped to
[1e-6, 1 - 1e-6] as in training: log p = sum x log m + (1 - x) log(1 - m)) or ``gaussian``
(N(m, sigma^2 I) with ``gaussian_std`` sigma; the series VAE's MSE loss is this up to scale). K = 1
is the negative of the per-record loss at beta = 1 in expectation (the ELBO).

Calibrated, with the raw scores s_1..s_R of the record under R reference VAEs trained without it
(offline LiRA, Carlini et al. 2022, Section 4.2 and Eq. 4: fit N(mu_ref, sigma_ref^2) to them and
score the one-sided test statistic (s - mu_ref) / sigma_ref, whose p-value under the OUT Gaussian
is monotone in it):

* ``calibrated``: s - mu_ref (R >= 1). It ranks records exactly as offline LiRA with one
  variance for all records (Carlini et al.'s fixed-variance variant for few reference models):
  dividing by one constant changes no ranking, so no separate global-variance row is written.
* ``lira-offline``: (s - mu_ref) / sigma_ref (R >= 2), sigma_ref each record's own sample standard
  deviation where R >= :data:`LIRA_PER_RECORD_MIN_MODELS`, else (the fallback for few reference
  models) the root mean per-record variance, one sigma for all records, which then ranks as
  ``calibrated`` does.
* ``calibrated-nonprivate``, ``lira-offline-nonprivate``: the same two against the release's
  non-private reference models, where it has them (:meth:`attacks.threat.Release.reference_sets`).

Carlini et al. rescale a classifier's confidence by a logit first so that it is Gaussian; a
log-likelihood is used as it is.

Latent noise: record i's K x d standard normals are the first draws of
:func:`~attacks.reconstruction.record_noise_rng` (seed, i), the same under every model, so scores
do not depend on the chunking and the reference models see the same noise as the target.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

import numpy as np
import torch

from attacks.attack import (
    Attack,
    AttackData,
    AttackResult,
    AttackSettings,
    Measure,
    ProgressFn,
    Variant,
    calibration_variant,
    check_positive_ints,
    check_seed,
    eval_mode,
)
from attacks.reconstruction import DEFAULT_MAX_DECODED, ChunkPlan, record_noise_rng
from attacks.threat import Capability, LatentGenerativeModel, Release
from dpvae_core.records import Modality

logger = logging.getLogger(__name__)

BERNOULLI_CLAMP = 1e-6
"""Decoder means are clamped to [c, 1 - c], as in ``models.vae.vae_loss_terms``."""
LIRA_MIN_STD = 1e-6
"""Floor of sigma_ref, so that a record every reference model scores alike stays finite."""
LIRA_PER_RECORD_MIN_MODELS = 4
"""Fewest reference models from which ``lira-offline`` fits each record's own variance (below,
one pooled variance). Measured on digits, quick profile, mech none, seeds 0-4, MI AP of
per-record vs pooled variance: R = 2: 0.615 vs 0.676; 4: 0.716 vs 0.709; 8: 0.749 vs 0.708;
16: 0.775 vs 0.739 (a per-record variance from two scores is too noisy to divide by). Carlini et
al. likewise use one global variance when they have few shadow models."""
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class Likelihood(Enum):
    """The decoder's likelihood p(x | z, y)."""

    BERNOULLI = "bernoulli"
    GAUSSIAN = "gaussian"

    @property
    def measure(self) -> Measure:
        """The row's distance column for this likelihood."""
        return Measure.IWAE_BERNOULLI if self is Likelihood.BERNOULLI else Measure.IWAE_GAUSSIAN


@dataclass(frozen=True, kw_only=True)
class LikelihoodAttack(Attack):
    """Importance-weighted log-likelihood MI attack, offline-LiRA calibrated; see the module docs.

    Attributes:
        seed: root of the latent noise.
        device: where encoding and decoding run; the models must already live there.
        n_importance: importance samples per record, K.
        likelihood: ``bernoulli`` (images in [0, 1]) or ``gaussian`` (series).
        gaussian_std: sigma of the Gaussian likelihood.
        max_decoded: decoded records held at once (as in the reconstruction attack).

    Notes:
        Needs the whole VAE (encoder and decoder). Reference models must be VAEs too (encode and
        decode) trained on reference records; the raw variant is always returned,
        ``calibrated`` when R >= 1 and ``lira-offline`` when R >= 2 (and their ``-nonprivate``
        labels for the non-private reference set).
    """

    name: ClassVar[str] = "likelihood"
    needs: ClassVar[frozenset[Capability]] = frozenset({Capability.ENCODER, Capability.DECODER})
    uses: ClassVar[frozenset[Capability]] = frozenset({Capability.REFERENCE_MODELS})

    seed: int
    device: torch.device | str = "cpu"
    n_importance: int = 64
    likelihood: Likelihood = Likelihood.BERNOULLI
    gaussian_std: float = 1.0
    max_decoded: int = DEFAULT_MAX_DECODED

    def __post_init__(self) -> None:
        check_seed(self.seed)
        check_positive_ints(n_importance=self.n_importance, max_decoded=self.max_decoded)
        try:
            likelihood = Likelihood(self.likelihood)
        except ValueError:
            valid = ", ".join(item.value for item in Likelihood)
            raise ValueError(
                f"unknown likelihood {self.likelihood!r}; valid likelihoods: {valid}"
            ) from None
        if not self.gaussian_std > 0:
            raise ValueError(f"gaussian_std must be positive, got {self.gaussian_std!r}")
        object.__setattr__(self, "likelihood", likelihood)
        object.__setattr__(self, "device", torch.device(self.device))

    @classmethod
    def from_settings(
        cls, settings: AttackSettings, *, seed: int, device: torch.device | str
    ) -> LikelihoodAttack:
        """K = ``settings.attack_samples`` importance samples per record (the profile's N), and
        the likelihood the target VAE trains with: ``bernoulli`` for images, ``gaussian`` for
        series and points."""
        likelihood = (
            Likelihood.BERNOULLI if settings.modality is Modality.IMAGE else Likelihood.GAUSSIAN
        )
        return cls(
            seed=seed, device=device, n_importance=settings.attack_samples, likelihood=likelihood
        )

    def _run(
        self, release: Release, data: AttackData, progress: ProgressFn | None
    ) -> list[AttackResult]:
        for models, nonprivate in release.reference_sets():
            label = "nonprivate_reference_models" if nonprivate else "reference_models"
            for k, ref in enumerate(models):
                if not callable(getattr(ref, "encode", None)):
                    raise ValueError(
                        f"the likelihood attack needs reference VAEs with an encoder; "
                        f"{label}[{k}] ({type(ref).__name__}) has no encode"
                    )
        raw = self.log_likelihoods(release.model, data, progress=progress)
        results = [self._result(raw, Variant.RAW, data)]
        for models, nonprivate in release.reference_sets():
            refs = np.stack([self.log_likelihoods(ref, data) for ref in models])
            for variant, scores in lira_offline(raw, refs).items():
                variant = calibration_variant(variant, nonprivate=nonprivate)
                results.append(self._result(scores, variant, data))
        return results

    def _result(self, scores: np.ndarray, variant: Variant, data: AttackData) -> AttackResult:
        return AttackResult(
            attack=self.name,
            distance=self.likelihood.measure,
            variant=variant,
            scores=scores,
            is_member=data.is_member,
            n_samples=self.n_importance,
        )

    def log_likelihoods(
        self, model: LatentGenerativeModel, data: AttackData, *, progress: ProgressFn | None = None
    ) -> np.ndarray:
        """(n,) float64 IWAE estimates of log p(x | y) under ``model``, in nats."""
        plan = ChunkPlan.from_budget(n_samples=self.n_importance, max_decoded=self.max_decoded)
        out = np.empty(data.n_records, dtype=np.float64)
        with eval_mode(model), torch.inference_mode():
            for start in range(0, data.n_records, plan.records_per_chunk):
                stop = min(start + plan.records_per_chunk, data.n_records)
                x = data.x[start:stop].to(self.device)
                y = data.y[start:stop].to(self.device)
                out[start:stop] = self._chunk(model, x, y, plan, first_index=start)
                if progress is not None:
                    progress(stop - start)
        return out

    def _chunk(
        self,
        model: LatentGenerativeModel,
        x: torch.Tensor,
        y: torch.Tensor,
        plan: ChunkPlan,
        *,
        first_index: int,
    ) -> np.ndarray:
        mu, logvar = model.encode(x, y)
        mu, logvar = mu.double(), logvar.double()
        std = torch.exp(0.5 * logvar)
        n_rec, dim = mu.shape
        streams = [record_noise_rng(self.seed, first_index + i) for i in range(n_rec)]
        total = torch.full((n_rec,), -math.inf, dtype=torch.float64, device=mu.device)
        for n_chunk in plan.sample_chunks(self.n_importance):
            noise = np.stack([s.standard_normal((n_chunk, dim), np.float32) for s in streams])
            eps = torch.from_numpy(noise).to(mu.device).double()
            z = mu[:, None, :] + std[:, None, :] * eps
            recon = model.decode(z.flatten(0, 1).to(x.dtype), y.repeat_interleave(n_chunk))
            if recon.shape[1:] != x.shape[1:]:
                raise ValueError(
                    f"model.decode returned records of shape {tuple(recon.shape[1:])}, "
                    f"expected {tuple(x.shape[1:])}"
                )
            log_px = self._log_px(recon.reshape(n_rec, n_chunk, -1).double(), x.flatten(1).double())
            log_pz = -0.5 * z.pow(2).sum(2) - dim * _HALF_LOG_2PI
            log_qz = -0.5 * eps.pow(2).sum(2) - 0.5 * logvar.sum(1)[:, None] - dim * _HALF_LOG_2PI
            total = torch.logaddexp(total, torch.logsumexp(log_px + log_pz - log_qz, dim=1))
        return (total - math.log(self.n_importance)).cpu().numpy()

    def _log_px(self, means: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """(R, S) log p(x | z) of decoder means (R, S, D) for records x (R, D), float64."""
        if self.likelihood is Likelihood.BERNOULLI:
            # sum_d x log m + (1 - x) log(1 - m) = sum_d x (log m - log(1 - m)) + sum_d log(1 - m):
            # one product over the values instead of four elementwise passes (2.7x, equal to
            # 4e-16 relative)
            m = means.clamp(BERNOULLI_CLAMP, 1 - BERNOULLI_CLAMP)
            log_m, log_rest = torch.log(m), torch.log1p(-m)
            return torch.einsum("rsd,rd->rs", log_m - log_rest, x) + log_rest.sum(2)
        target = x[:, None, :]
        sigma = self.gaussian_std
        per_value = -0.5 * ((target - means) / sigma).pow(2) - math.log(sigma) - _HALF_LOG_2PI
        return per_value.sum(2)


def lira_offline(target: np.ndarray, reference: np.ndarray) -> dict[Variant, np.ndarray]:
    """Offline LiRA statistics of target scores (n,) against reference scores (R, n).

    Returns ``calibrated`` (s - mean) and, when R >= 2, ``lira-offline`` ((s - mean) / std, std
    with ddof 1, per record where R >= :data:`LIRA_PER_RECORD_MIN_MODELS`, else pooled:
    sqrt(mean over records of the per-record variance); floored at :data:`LIRA_MIN_STD`).
    """
    if reference.ndim != 2 or reference.shape[1] != target.shape[0] or reference.shape[0] < 1:
        raise ValueError(
            f"reference scores must be (R >= 1, {target.shape[0]}), got {reference.shape}"
        )
    mean = reference.mean(axis=0)
    stats = {Variant.CALIBRATED: target - mean}
    n_models = reference.shape[0]
    if n_models == 1:
        return stats
    var = reference.var(axis=0, ddof=1)
    if n_models < LIRA_PER_RECORD_MIN_MODELS:
        var = np.full_like(var, var.mean())
    stats[Variant.LIRA] = (target - mean) / np.maximum(np.sqrt(var), LIRA_MIN_STD)
    return stats
