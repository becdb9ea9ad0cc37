"""Hilprecht et al.'s Monte-Carlo attack on generated samples (2019, Section 3.1).

The attacker holds D_gen only. For record x (label y) and the generated samples g_1..g_m of its
class (or of all classes), with d_i = ||f(x) - f(g_i)||_2 in a feature space f:

* ``share``: (1/m) sum_i 1[d_i <= eps], the Monte-Carlo estimate of P_gen(U_eps(x));
* ``log-distance``: (1/m) sum_i log(eps / d_i) 1[d_i <= eps], the distance-weighted variant,
  which lets samples deep inside the ball count more (d_i floored at ``eps * 1e-12``);
* ``nearest``: -min_i d_i.

eps is the median heuristic: the median over the attacked records of their nearest-sample
distance (``eps_percentile`` picks another percentile). Features f: raw values (``pixel-l2``) and a
PCA embedding fitted on the reference records (``pca-l2``; never on D_atk, whose membership the
attacker does not know, nor on D_gen).

Samples are streamed ``sample_chunk`` at a time against blocks of ``record_chunk`` records, twice
(nearest distances, then the ball), so memory is flat in m. Every pairwise distance is computed
from its own pair in float64, so scores do not depend on the chunking beyond floating-point
reassociation in the dot product.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from attacks.attack import (
    Attack,
    AttackData,
    AttackResult,
    Measure,
    ProgressFn,
    Variant,
    check_positive_ints,
    check_seed,
)
from attacks.features import Features, flat_features, pca_features
from attacks.threat import Capability, Records, Release

logger = logging.getLogger(__name__)

MEASURES = (Measure.PIXEL_L2, Measure.PCA_L2)
VARIANTS = (Variant.SHARE, Variant.LOG_DISTANCE, Variant.NEAREST)
LOG_DISTANCE_FLOOR = 1e-12
"""d_i is floored at eps times this in the log-distance variant (an exact copy scores 27.6)."""


def squared_distances(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(p, q) squared Euclidean distances between rows of a (p, d) and b (q, d), float64, >= 0."""
    a, b = a.to(torch.float64), b.to(torch.float64)
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return sq.clamp_min_(0.0)


@dataclass(frozen=True, kw_only=True)
class MonteCarloAttack(Attack):
    """The Monte-Carlo MI attack on D_gen (Hilprecht et al. 2019); see the module docstring.

    Attributes:
        seed: seeds the PCA solver (the attack has no other randomness).
        device: where distances run.
        measures: feature spaces (``pixel-l2``, ``pca-l2``); ``pca-l2`` runs only when the release
            holds reference records.
        same_class: compare each record with the samples of its own label only (else all).
        eps_percentile: eps is this percentile (0-100) of the records' nearest-sample distances;
            50 is the median heuristic.
        pca_components: PCA dimensions (capped by the reference records' count and dimension).
        sample_chunk: generated samples compared at once.
        record_chunk: records compared at once; peak memory ~ 8 bytes x sample_chunk x
            record_chunk plus one chunk of samples, independent of m.

    Notes:
        Needs D_gen only (any mechanism, once its synthetic data is published); the PCA variant
        also uses reference records.
    """

    name: ClassVar[str] = "monte-carlo"
    needs: ClassVar[frozenset[Capability]] = frozenset({Capability.SAMPLES})
    uses: ClassVar[frozenset[Capability]] = frozenset({Capability.REFERENCE_RECORDS})

    seed: int
    device: torch.device | str = "cpu"
    measures: tuple[Measure, ...] = MEASURES
    same_class: bool = True
    eps_percentile: float = 50.0
    pca_components: int = 40
    sample_chunk: int = 1024
    record_chunk: int = 1024

    def __post_init__(self) -> None:
        check_seed(self.seed)
        check_positive_ints(
            pca_components=self.pca_components,
            sample_chunk=self.sample_chunk,
            record_chunk=self.record_chunk,
        )
        if not 0.0 <= self.eps_percentile <= 100.0:
            raise ValueError(f"eps_percentile must lie in [0, 100], got {self.eps_percentile!r}")
        measures = tuple(Measure(m) for m in self.measures)
        if not measures or len(set(measures)) != len(measures) or set(measures) - set(MEASURES):
            raise ValueError(
                f"measures must be a non-empty subset of {[m.value for m in MEASURES]} without "
                f"repeats, got {list(self.measures)!r}"
            )
        object.__setattr__(self, "measures", measures)
        object.__setattr__(self, "device", torch.device(self.device))

    def _run(
        self, release: Release, data: AttackData, progress: ProgressFn | None
    ) -> list[AttackResult]:
        samples = release.samples  # present: SAMPLES is in needs
        if samples.record_shape != tuple(data.x.shape[1:]):
            raise ValueError(
                f"samples have record shape {samples.record_shape}, the attacked records "
                f"{tuple(data.x.shape[1:])}"
            )
        self._check_classes(data, samples)
        spaces = {m: self._features(m, release.reference) for m in self.measures}
        spaces = {m: f for m, f in spaces.items() if f is not None}
        scores = monte_carlo_scores(
            data.x,
            data.y,
            samples,
            spaces,
            same_class=self.same_class,
            eps_percentile=self.eps_percentile,
            sample_chunk=self.sample_chunk,
            record_chunk=self.record_chunk,
            device=self.device,
            progress=progress,
        )
        return [
            AttackResult(
                attack=self.name,
                distance=measure,
                variant=variant,
                scores=values,
                is_member=data.is_member,
                n_samples=len(samples),
            )
            for (measure, variant), values in scores.items()
        ]

    def _check_classes(self, data: AttackData, samples: Records) -> None:
        if not self.same_class:
            return
        lacking = sorted(set(data.y.tolist()) - set(samples.y.tolist()))
        if lacking:
            raise ValueError(
                f"D_gen has no samples of labels {lacking}, which attacked records carry; "
                "generate every class or pass same_class=False"
            )

    def _features(self, measure: Measure, reference: Records | None) -> Features | None:
        if measure is Measure.PIXEL_L2:
            return flat_features
        if reference is None:
            logger.info("monte-carlo: no reference records, so no %s variant", measure.value)
            return None
        return pca_features(reference, n_components=self.pca_components, seed=self.seed)


def monte_carlo_scores(
    x: torch.Tensor,
    y: torch.Tensor,
    samples: Records,
    spaces: dict[Measure, Features],
    *,
    same_class: bool,
    eps_percentile: float,
    sample_chunk: int,
    record_chunk: int,
    device: torch.device,
    progress: ProgressFn | None = None,
) -> dict[tuple[Measure, Variant], np.ndarray]:
    """Scores (n,) float64 of records x (n, *shape), labels y (n,), for every space and variant."""
    n = x.shape[0]
    blocks = [slice(s, min(s + record_chunk, n)) for s in range(0, n, record_chunk)]
    counts = _eligible_counts(y, samples.y, same_class=same_class)
    nearest = {m: np.empty(n) for m in spaces}
    for block in blocks:
        for measure, features in spaces.items():
            rows = features(x[block].to(device))
            nearest[measure][block] = _nearest(
                rows,
                y[block],
                samples,
                features,
                same_class,
                sample_chunk=sample_chunk,
                device=device,
            )
    eps = {m: _eps(d, eps_percentile) for m, d in nearest.items()}
    for measure, (value, _) in eps.items():
        logger.info("monte-carlo %s: eps = %.6g", measure.value, value)
    scores: dict[tuple[Measure, Variant], np.ndarray] = {}
    for measure in spaces:
        for variant in VARIANTS:
            scores[measure, variant] = np.empty(n)
        scores[measure, Variant.NEAREST][:] = -np.sqrt(nearest[measure])
    for block in blocks:
        for measure, features in spaces.items():
            rows = features(x[block].to(device))
            inside, log_sum = _ball(
                rows,
                y[block],
                samples,
                features,
                same_class,
                eps[measure],
                sample_chunk=sample_chunk,
                device=device,
            )
            scores[measure, Variant.SHARE][block] = inside / counts[block]
            scores[measure, Variant.LOG_DISTANCE][block] = log_sum / counts[block]
        if progress is not None:
            progress(block.stop - block.start)
    return scores


def _eligible_counts(y: torch.Tensor, sample_y: torch.Tensor, *, same_class: bool) -> np.ndarray:
    """(n,) samples each record is compared with: those of its label, or all."""
    if not same_class:
        return np.full(y.shape[0], float(sample_y.shape[0]))
    labels, counts = np.unique(sample_y.numpy(), return_counts=True)
    per_label = dict(zip(labels.tolist(), counts.tolist(), strict=True))
    return np.array([float(per_label[label]) for label in y.tolist()])


def _eps(nearest_sq: np.ndarray, percentile: float) -> tuple[float, float]:
    """(eps, the squared radius compared with squared distances).

    eps is the percentile of the nearest distances (floored so that it is positive); the squared
    radius is eps^2, raised to any nearest squared distance whose root is <= eps, so that the
    record that sets eps lies inside its own ball despite rounding in sqrt and square.
    """
    nearest = np.sqrt(nearest_sq)
    eps = float(np.percentile(nearest, percentile))
    if eps <= 0:
        eps = float(np.min(nearest[nearest > 0], initial=1.0))
    eps_sq = max(eps * eps, float(np.max(nearest_sq[nearest <= eps], initial=0.0)))
    return eps, eps_sq


def _sample_chunks(
    samples: Records, features: Features, *, sample_chunk: int, device: torch.device
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(features (k, d), labels (k,)) of successive chunks of at most ``sample_chunk`` samples."""
    for start in range(0, len(samples), sample_chunk):
        stop = min(start + sample_chunk, len(samples))
        yield features(samples.x[start:stop].to(device)), samples.y[start:stop].to(device)


def _masked_squared(
    rows: torch.Tensor,
    y: torch.Tensor,
    chunk: torch.Tensor,
    chunk_y: torch.Tensor,
    same_class: bool,
) -> torch.Tensor:
    """(p, k) squared distances, +inf between records and samples of other labels if same_class."""
    sq = squared_distances(rows, chunk)
    if same_class:
        sq.masked_fill_(y.to(sq.device)[:, None] != chunk_y[None, :], float("inf"))
    return sq


def _nearest(
    rows: torch.Tensor,
    y: torch.Tensor,
    samples: Records,
    features: Features,
    same_class: bool,
    *,
    sample_chunk: int,
    device: torch.device,
) -> np.ndarray:
    """(p,) squared distance from each record to its nearest eligible sample."""
    best = torch.full((rows.shape[0],), float("inf"), dtype=torch.float64, device=rows.device)
    for chunk, chunk_y in _sample_chunks(
        samples, features, sample_chunk=sample_chunk, device=device
    ):
        sq = _masked_squared(rows, y, chunk, chunk_y, same_class)
        best = torch.minimum(best, sq.min(dim=1).values)
    return best.cpu().numpy()


def _ball(
    rows: torch.Tensor,
    y: torch.Tensor,
    samples: Records,
    features: Features,
    same_class: bool,
    eps: tuple[float, float],
    *,
    sample_chunk: int,
    device: torch.device,
) -> tuple[np.ndarray, np.ndarray]:
    """(p,) counts of eligible samples with d <= eps, and (p,) sums of log(eps / d) over them.

    Works on squared distances (d <= eps iff d^2 <= eps^2) and takes roots and logs of the hits
    only.
    """
    inside = torch.zeros(rows.shape[0], dtype=torch.float64, device=rows.device)
    log_sum = torch.zeros_like(inside)
    eps_sq, floor_sq = eps[1], (eps[0] * LOG_DISTANCE_FLOOR) ** 2
    for chunk, chunk_y in _sample_chunks(
        samples, features, sample_chunk=sample_chunk, device=device
    ):
        sq = _masked_squared(rows, y, chunk, chunk_y, same_class)
        hit = sq <= eps_sq
        inside += hit.sum(dim=1)
        record, _ = hit.nonzero(as_tuple=True)
        logs = torch.log(eps[0] / sq[hit].clamp_min(floor_sq).sqrt())
        log_sum.index_add_(0, record, logs)
    return inside.cpu().numpy(), log_sum.cpu().numpy()
