"""DOMIAS: density-ratio membership inference on synthetic data (van Breugel et al. 2023).

The attacker holds D_gen and reference records from the population. A generator that overfits
puts more mass near its training records than the population does, so the score is

    log p_gen(f(x)) - log p_ref(f(x))                        (van Breugel et al., Eq. 2, in logs)

with p_gen and p_ref Gaussian kernel density estimates (``scipy.stats.gaussian_kde``, bandwidth by
Scott's rule, n^(-1 / (d + 4)) times the data's covariance, as in the authors' KDE variant) on D_gen
and on the reference records, and f a PCA embedding fitted on the reference records (images are too
high-dimensional for a KDE; the paper's tabular data needed none). The log-ratio replaces the
paper's p_gen / (p_ref + 1e-10) for numerical stability; it ranks records identically wherever
p_ref is not tiny. The densities are unconditional: labels are ignored.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from scipy.stats import gaussian_kde

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
from attacks.features import Features, pca_features
from attacks.threat import Capability, Records, Release

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class DomiasAttack(Attack):
    """DOMIAS with Gaussian KDEs in a PCA embedding of the reference records.

    Attributes:
        seed: seeds the PCA solver (the attack has no other randomness).
        device: accepted for the uniform constructor; the KDEs run in scipy on the CPU.
        pca_components: PCA dimensions d (capped by the reference records' count and dimension).
            Both D_gen and the reference set need more than d records, or the KDE's covariance
            is singular.
        record_chunk: attacked records evaluated at once (scipy holds a chunk x m block).

    Notes:
        Needs D_gen and reference records; never the model.
    """

    name: ClassVar[str] = "domias"
    needs: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.SAMPLES, Capability.REFERENCE_RECORDS}
    )

    seed: int
    device: torch.device | str = "cpu"
    pca_components: int = 10
    record_chunk: int = 1024

    def __post_init__(self) -> None:
        check_seed(self.seed)
        check_positive_ints(pca_components=self.pca_components, record_chunk=self.record_chunk)
        object.__setattr__(self, "device", torch.device(self.device))

    def _run(
        self, release: Release, data: AttackData, progress: ProgressFn | None
    ) -> list[AttackResult]:
        samples, reference = release.samples, release.reference
        for label, records in (("samples", samples), ("reference records", reference)):
            if records.record_shape != tuple(data.x.shape[1:]):
                raise ValueError(
                    f"{label} have record shape {records.record_shape}, the attacked records "
                    f"{tuple(data.x.shape[1:])}"
                )
        project = pca_features(reference, n_components=self.pca_components, seed=self.seed)
        scores = log_density_ratio(
            data.x, samples, reference, project, record_chunk=self.record_chunk, progress=progress
        )
        return [
            AttackResult(
                attack=self.name,
                distance=Measure.PCA_KDE,
                variant=Variant.LOG_RATIO,
                scores=scores,
                is_member=data.is_member,
                n_samples=len(samples),
            )
        ]


def fit_kde(records: Records, project: Features, *, label: str) -> gaussian_kde:
    """Scott's-rule Gaussian KDE of the projected records (refuses too few of them)."""
    points = project(records.x).cpu().numpy()
    if points.shape[0] <= points.shape[1]:
        raise ValueError(
            f"DOMIAS needs more {label} than PCA dimensions for a kernel density estimate, got "
            f"{points.shape[0]} records in {points.shape[1]} dimensions; lower pca_components"
        )
    return gaussian_kde(points.T, bw_method="scott")


def log_density_ratio(
    x: torch.Tensor,
    samples: Records,
    reference: Records,
    project: Features,
    *,
    record_chunk: int,
    progress: ProgressFn | None = None,
) -> np.ndarray:
    """(n,) float64 log p_gen(f(x)) - log p_ref(f(x)) for records x (n, *shape).

    Generated samples whose projections lie in a lower-dimensional subspace (a collapsed or
    diverged generator: identical or saturated images) have no density to estimate; every
    score is then NaN, with a warning, as for a diverged model's other scores
    (:meth:`attacks.attack.Attack.run_release` ranks them and says so), instead of an error
    that would end the sweep. Degenerate reference records, the population's, still raise.
    """
    try:
        p_gen = fit_kde(samples, project, label="generated samples")
    except np.linalg.LinAlgError:
        logger.warning(
            "DOMIAS: the generated samples' projections lie in a lower-dimensional subspace "
            "(a collapsed generator?); no density to estimate, every score NaN"
        )
        if progress is not None:
            progress(x.shape[0])
        return np.full(x.shape[0], np.nan)
    p_ref = fit_kde(reference, project, label="reference records")
    out = np.empty(x.shape[0], dtype=np.float64)
    for start in range(0, x.shape[0], record_chunk):
        stop = min(start + record_chunk, x.shape[0])
        points = project(x[start:stop]).cpu().numpy().T
        out[start:stop] = p_gen.logpdf(points) - p_ref.logpdf(points)
        if progress is not None:
            progress(stop - start)
    return out
