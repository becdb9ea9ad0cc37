"""Hilprecht et al.'s reconstruction attack against VAEs (the trade-off paper, Section 2.2, Eq. 1).

For each record x (label y) the attack draws N latents z ~ q(z | x, y) = N(mu, diag(exp(logvar))),
decodes them, and averages a distance d(D(z, y), x) over the N samples:
``score(x) = -(1/N) sum_i MSE(D(z_i), x)`` or ``(1/N) sum_i SSIM(D(z_i), x)``.
A member (a training record) is expected to reconstruct better than a non-member.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from attacks.attack import Attack, AttackData, AttackResult, AttackSettings, ProgressFn
from attacks.distances import Distance, get_distance
from attacks.threat import Capability, LatentGenerativeModel, Release

logger = logging.getLogger(__name__)

PAPER_N_SAMPLES = 300
"""N in the trade-off paper, Eq. 1."""
DEFAULT_MAX_DECODED = 256
"""Decoded records held at once. Peak memory grows with this budget, not with N or the number of
records: for the trade-off paper's 64x64x3 VAE on CPU about 1.5 MB per decoded record (decoder
activations, SSIM's float64 blocks, allocator slack), i.e. about 400 MB at 256
(benchmarks/bench_attack.py). Lower it on a small machine; raise it on a GPU for throughput."""


def record_noise_rng(seed: int, record_index: int) -> np.random.Generator:
    """The noise stream of one record: child ``record_index`` of ``SeedSequence(seed)``.

    Record i's latent noise is the first N x latent_dim standard normals (float32) of this stream,
    in sample-major order, so it depends on the seed and the record's position in D_atk
    only, never on how records and samples are chunked.
    """
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(record_index,)))


@dataclass(frozen=True)
class ChunkPlan:
    """How the N x n decodes are batched: records per chunk x samples per decoder call.

    ``samples_per_chunk`` splits N evenly (e.g. N = 300 under a budget of 256 gives 2 x 150);
    ``records_per_chunk`` fills the rest of the budget (at least 1).
    """

    records_per_chunk: int
    samples_per_chunk: int

    @classmethod
    def from_budget(cls, *, n_samples: int, max_decoded: int) -> ChunkPlan:
        """The plan that decodes at most ``max_decoded`` records per call (and at least one)."""
        n_sample_chunks = math.ceil(n_samples / max_decoded)
        samples_per_chunk = math.ceil(n_samples / n_sample_chunks)
        return cls(
            records_per_chunk=max(1, max_decoded // samples_per_chunk),
            samples_per_chunk=samples_per_chunk,
        )

    def sample_chunks(self, n_samples: int) -> list[int]:
        """Sizes of the successive sample chunks of one record chunk (they sum to n_samples)."""
        starts = range(0, n_samples, self.samples_per_chunk)
        return [min(self.samples_per_chunk, n_samples - start) for start in starts]


@dataclass(frozen=True, kw_only=True)
class ReconstructionAttack(Attack):
    """The trade-off paper's reconstruction MI attack (Hilprecht et al. 2019), streamed and seeded.

    Attributes:
        seed: root of the latent noise (see :func:`record_noise_rng`); the same seed gives
            bit-identical scores on the same device, and scores do not depend on ``max_decoded``
            beyond floating-point reassociation.
        n_samples: latent samples per record, N (paper: 300).
        distances: distances scored from the same decoded samples in one pass (any sequence of
            :class:`Distance` or names; stored as a tuple). SSIM applies to images only.
        device: where encoding, decoding and distances run; the model must already live there.
        max_decoded: decoded records held at once; bounds peak memory independently of N.

    Two entry points: ``run(model, data)`` (results keyed by :class:`Distance`, as before) and
    ``run_release(release, data)`` (the common attack interface, keyed by
    :class:`~attacks.attack.ResultKey`, variant ``mean``); both give the same results.

    Notes:
        The attacker uses the encoder and the decoder (white-box access to both halves of the
        VAE); it does not apply to a mechanism that releases the decoder only (the DP2-VAE paper).
    """

    name: ClassVar[str] = "reconstruction"
    needs: ClassVar[frozenset[Capability]] = frozenset({Capability.ENCODER, Capability.DECODER})

    seed: int
    n_samples: int = PAPER_N_SAMPLES
    distances: tuple[Distance, ...] = (Distance.MSE,)
    device: torch.device | str = "cpu"
    max_decoded: int = DEFAULT_MAX_DECODED

    def __post_init__(self) -> None:
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        for label, value in (("n_samples", self.n_samples), ("max_decoded", self.max_decoded)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be a positive integer, got {value!r}")
        if isinstance(self.distances, (str, Distance)):
            raise ValueError(
                f"distances must be a sequence, e.g. ('mse', 'ssim'), got {self.distances!r}"
            )
        distances = tuple(get_distance(distance) for distance in self.distances)
        if not distances or len(set(distances)) != len(distances):
            raise ValueError(
                f"distances must be non-empty and without repeats, got {list(self.distances)!r}"
            )
        object.__setattr__(self, "distances", distances)
        object.__setattr__(self, "device", torch.device(self.device))

    @classmethod
    def from_settings(
        cls, settings: AttackSettings, *, seed: int, device: torch.device | str
    ) -> ReconstructionAttack:
        """N = ``settings.attack_samples`` latent samples per record, scored with every one of
        ``settings.distances``."""
        return cls(
            seed=seed,
            device=device,
            n_samples=settings.attack_samples,
            distances=settings.distances,
        )

    @property
    def plan(self) -> ChunkPlan:
        """How decodes are batched under ``max_decoded``."""
        return ChunkPlan.from_budget(n_samples=self.n_samples, max_decoded=self.max_decoded)

    def run(
        self,
        model: LatentGenerativeModel,
        data: AttackData,
        *,
        progress: ProgressFn | None = None,
    ) -> dict[Distance, AttackResult]:
        """Score every record of ``data`` with every distance; see the module docstring.

        Returns:
            One :class:`AttackResult` per distance, in the order of ``distances``, with scores
            (n,) aligned with ``data``: -mean MSE, or mean SSIM, over the N samples.
        """
        for distance in self.distances:
            distance.check_records(data.x)
        logger.info(
            "reconstruction attack: %d records x %d samples, %s, chunks of %d records x %d samples",
            data.n_records,
            self.n_samples,
            "/".join(distance.value for distance in self.distances),
            self.plan.records_per_chunk,
            self.plan.samples_per_chunk,
        )
        was_training = model.training
        model.train(False)
        try:
            with torch.inference_mode():
                means = self._mean_distances(model, data, progress)
        finally:
            model.train(was_training)
        return {
            distance: AttackResult(
                attack=self.name,
                distance=distance,
                scores=distance.score(means[k]),
                is_member=data.is_member,
                n_samples=self.n_samples,
            )
            for k, distance in enumerate(self.distances)
        }

    def _run(
        self, release: Release, data: AttackData, progress: ProgressFn | None
    ) -> list[AttackResult]:
        """:meth:`run` on the released VAE (the entry point of :meth:`Attack.run_release`)."""
        return list(self.run(release.model, data, progress=progress).values())

    def _mean_distances(
        self, model: LatentGenerativeModel, data: AttackData, progress: ProgressFn | None
    ) -> np.ndarray:
        """(n_distances, n) float64 mean distances over the N samples of each record."""
        means = np.empty((len(self.distances), data.n_records), dtype=np.float64)
        mu, std = self._posteriors(model, data)
        step = self.plan.records_per_chunk
        for start in range(0, data.n_records, step):
            stop = min(start + step, data.n_records)
            x = data.x[start:stop].to(self.device)
            y = data.y[start:stop].to(self.device)
            posterior = (mu[start:stop], std[start:stop])
            means[:, start:stop] = self._score_chunk(model, x, y, posterior, first_index=start)
            if progress is not None:
                progress(stop - start)
        return means

    def _posteriors(
        self, model: LatentGenerativeModel, data: AttackData
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(mu, std) of q(z | x, y) for every record, each (n, latent_dim) on the device.

        Encoded ``max_decoded`` records at a time, ahead of the decoding: a chunk holds as few as
        one record when N is large, and one encoder call per record costs more than its
        arithmetic.
        """
        mus, stds = [], []
        for start in range(0, data.n_records, self.max_decoded):
            stop = min(start + self.max_decoded, data.n_records)
            mu, logvar = model.encode(
                data.x[start:stop].to(self.device), data.y[start:stop].to(self.device)
            )
            mus.append(mu)
            stds.append(torch.exp(0.5 * logvar))
        return torch.cat(mus), torch.cat(stds)

    def _score_chunk(
        self,
        model: LatentGenerativeModel,
        x: torch.Tensor,
        y: torch.Tensor,
        posterior: tuple[torch.Tensor, torch.Tensor],
        *,
        first_index: int,
    ) -> np.ndarray:
        """(n_distances, R) mean distances for a chunk of R records x (R, *shape), labels y (R,),
        whose posteriors are ``(mu, std)``, each (R, latent_dim)."""
        mu, std = posterior
        streams = [record_noise_rng(self.seed, first_index + i) for i in range(x.shape[0])]
        totals = torch.zeros(len(self.distances), x.shape[0], dtype=torch.float64, device=x.device)
        for n_chunk in self.plan.sample_chunks(self.n_samples):
            noise = _draw_noise(streams, n_samples=n_chunk, latent_dim=mu.shape[1]).to(mu)
            z = torch.addcmul(mu.unsqueeze(1), std.unsqueeze(1), noise).flatten(0, 1)
            recon = model.decode(z, y.repeat_interleave(n_chunk))
            expected = (x.shape[0] * n_chunk, *x.shape[1:])
            if recon.shape != expected:
                raise ValueError(
                    f"model.decode returned shape {tuple(recon.shape)}, expected the records' "
                    f"shape {expected}"
                )
            recon = recon.view(x.shape[0], n_chunk, *x.shape[1:])
            for k, distance in enumerate(self.distances):
                totals[k] += distance.to_records(recon, x).sum(dim=1)
        return (totals / self.n_samples).cpu().numpy()


def _draw_noise(
    streams: list[np.random.Generator], *, n_samples: int, latent_dim: int
) -> torch.Tensor:
    """(R, n_samples, latent_dim) float32 standard normals, the next draws of each stream."""
    noise = np.empty((len(streams), n_samples, latent_dim), dtype=np.float32)
    for stream, rows in zip(streams, noise, strict=True):
        stream.standard_normal(dtype=np.float32, out=rows)
    return torch.from_numpy(noise)
