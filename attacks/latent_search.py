"""Latent search against a released decoder: GAN-Leaks' partial black-box attack (Chen et al. 2020).

For record x (label y) the attacker finds the latent that best reconstructs it,

    z* = argmin_z  ||x - D(z, y)||_2^2 + lambda (||z||_2^2 - d)^2          (Chen et al., Eq. 5-6)

where d = latent_dim (the squared norm a standard normal latent concentrates on). The search
starts from the best of k draws from the prior N(0, I) and runs Adam for a fixed number of steps.
Scores (higher = more likely a member):

* ``raw``: -MSE(x, D(z*, y)), the mean over the record's values of the squared error;
* ``calibrated`` (with reference models): the same search under each reference decoder, and
  -(MSE_target - mean_r MSE_ref,r) (Chen et al., Section 5.4: a record that any decoder of this
  kind reconstructs well is not evidence of membership); ``calibrated-nonprivate`` the same
  against the release's non-private reference models, where it has them
  (:meth:`attacks.threat.Release.reference_sets`).

Each record's prior draws are the first k x d float32 standard normals of
:func:`~attacks.reconstruction.record_noise_rng` (seed, record index), and Adam's updates are
elementwise, so a record's search does not depend on which records share its batch (beyond
floating-point differences in the decoder's batched arithmetic). L-BFGS would couple the records
of a batch through its line search, so it is not offered.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from attacks.attack import (
    Attack,
    AttackData,
    AttackResult,
    AttackSettings,
    ProgressFn,
    Variant,
    calibration_variant,
    check_positive_ints,
    check_seed,
    eval_mode,
)
from attacks.distances import Distance
from attacks.reconstruction import record_noise_rng
from attacks.threat import Capability, LatentDecoder, Release

logger = logging.getLogger(__name__)

GAN_LEAKS_NORM_PENALTY = 1e-3
"""lambda of the norm regulariser (GAN-Leaks' partial black-box setting, LAMBDA3 = 0.001)."""


@dataclass(frozen=True, kw_only=True)
class LatentSearchAttack(Attack):
    """GAN-Leaks' latent search against a decoder; see the module docstring.

    Attributes:
        seed: root of the per-record prior draws.
        device: where decoding and the search run; the decoders must already live there.
        n_starts: prior draws per record, k; the search starts from the best one.
        n_steps: Adam steps per record.
        lr: Adam's learning rate.
        norm_penalty: lambda of the norm regulariser (0 turns it off).
        batch_size: records searched together; the decoder sees batch_size x n_starts latents
            when choosing the starts and batch_size while searching.

    Notes:
        Needs the decoder only (e.g. dp2vae's release); calibrates when reference models (any
        object with ``decode`` and ``latent_dim``) are given. Cost: per decoder, n x (k + 2 x
        n_steps + 1) decoded latents (forward and backward passes).
    """

    name: ClassVar[str] = "latent-search"
    needs: ClassVar[frozenset[Capability]] = frozenset({Capability.DECODER})
    uses: ClassVar[frozenset[Capability]] = frozenset({Capability.REFERENCE_MODELS})

    seed: int
    device: torch.device | str = "cpu"
    n_starts: int = 16
    n_steps: int = 100
    lr: float = 0.05
    norm_penalty: float = GAN_LEAKS_NORM_PENALTY
    batch_size: int = 64

    def __post_init__(self) -> None:
        check_seed(self.seed)
        check_positive_ints(
            n_starts=self.n_starts, n_steps=self.n_steps, batch_size=self.batch_size
        )
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr!r}")
        if not self.norm_penalty >= 0:
            raise ValueError(f"norm_penalty must be non-negative, got {self.norm_penalty!r}")
        object.__setattr__(self, "device", torch.device(self.device))

    @classmethod
    def from_settings(
        cls, settings: AttackSettings, *, seed: int, device: torch.device | str
    ) -> LatentSearchAttack:
        """``n_steps`` = ``settings.attack_samples`` Adam steps per record (the profile's N:
        quick 20, standard 100, paper 300), the other knobs at their defaults."""
        return cls(seed=seed, device=device, n_steps=settings.attack_samples)

    def _run(
        self, release: Release, data: AttackData, progress: ProgressFn | None
    ) -> list[AttackResult]:
        target = self.search_errors(release.decoder, data, progress=progress)
        results = [self._result(-target, Variant.RAW, data)]
        for models, nonprivate in release.reference_sets():
            refs = [self.search_errors(ref, data) for ref in models]
            variant = calibration_variant(Variant.CALIBRATED, nonprivate=nonprivate)
            results.append(self._result(np.mean(refs, axis=0) - target, variant, data))
        return results

    def _result(self, scores: np.ndarray, variant: Variant, data: AttackData) -> AttackResult:
        return AttackResult(
            attack=self.name,
            distance=Distance.MSE,
            variant=variant,
            scores=scores,
            is_member=data.is_member,
            n_samples=self.n_starts,
        )

    def search_errors(
        self, decoder: LatentDecoder, data: AttackData, *, progress: ProgressFn | None = None
    ) -> np.ndarray:
        """(n,) float64 MSE(x, D(z*, y)) of every record after the search under ``decoder``."""
        errors = np.empty(data.n_records, dtype=np.float64)
        with eval_mode(decoder):
            for start in range(0, data.n_records, self.batch_size):
                stop = min(start + self.batch_size, data.n_records)
                x = data.x[start:stop].to(self.device)
                y = data.y[start:stop].to(self.device)
                errors[start:stop] = self._search(decoder, x, y, first_index=start)
                if progress is not None:
                    progress(stop - start)
        return errors

    def objective(
        self, decoder: LatentDecoder, z: torch.Tensor, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(squared error summed over values (B,), objective (B,)) of latents z (B, d)."""
        recon = decoder.decode(z, y)
        if recon.shape != x.shape:
            raise ValueError(
                f"decode returned shape {tuple(recon.shape)}, expected the records' shape "
                f"{tuple(x.shape)}"
            )
        error = (x - recon).pow(2).flatten(1).sum(1)
        penalty = (z.pow(2).sum(1) - z.shape[1]).pow(2)
        return error, error + self.norm_penalty * penalty

    def starts(
        self, decoder: LatentDecoder, x: torch.Tensor, y: torch.Tensor, *, first_index: int
    ) -> torch.Tensor:
        """(B, d) the best of each record's k prior draws by the objective."""
        d, k = decoder.latent_dim, self.n_starts
        draws = np.stack(
            [
                record_noise_rng(self.seed, first_index + i).standard_normal((k, d), np.float32)
                for i in range(x.shape[0])
            ]
        )
        z = torch.from_numpy(draws).to(self.device)
        with torch.no_grad():
            _, value = self.objective(
                decoder,
                z.flatten(0, 1),
                x.repeat_interleave(k, dim=0),
                y.repeat_interleave(k),
            )
        best = value.view(x.shape[0], k).argmin(dim=1)
        return z[torch.arange(x.shape[0], device=z.device), best]

    def _search(
        self, decoder: LatentDecoder, x: torch.Tensor, y: torch.Tensor, *, first_index: int
    ) -> np.ndarray:
        z = self.starts(decoder, x, y, first_index=first_index)
        adam = _Adam(z, lr=self.lr)
        with torch.enable_grad():
            for _ in range(self.n_steps):
                z_var = z.detach().requires_grad_(True)
                _, value = self.objective(decoder, z_var, x, y)
                (grad,) = torch.autograd.grad(value.sum(), [z_var])
                z = adam.step(z, grad)
        with torch.no_grad():
            error, _ = self.objective(decoder, z, x, y)
        return (error / x[0].numel()).double().cpu().numpy()


class _Adam:
    """Adam (Kingma and Ba 2015, Algorithm 1; torch.optim.Adam's defaults), elementwise.

    Written out rather than taken from ``torch.optim`` so that it is plainly elementwise: each
    coordinate's update reads only its own gradient history, so a record's search does not depend
    on the other records of its batch. (It also avoids torch.optim's seconds-long first import.)
    """

    BETA1, BETA2, EPS = 0.9, 0.999, 1e-8

    def __init__(self, z: torch.Tensor, *, lr: float) -> None:
        self.lr, self.t = lr, 0
        self.m = torch.zeros_like(z)
        self.v = torch.zeros_like(z)

    def step(self, z: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        """The next iterate (a new tensor) from z and its gradient."""
        self.t += 1
        self.m.mul_(self.BETA1).add_(grad, alpha=1 - self.BETA1)
        self.v.mul_(self.BETA2).addcmul_(grad, grad, value=1 - self.BETA2)
        m_hat = self.m / (1 - self.BETA1**self.t)
        v_hat = self.v / (1 - self.BETA2**self.t)
        return z.detach() - self.lr * m_hat / (v_hat.sqrt() + self.EPS)
