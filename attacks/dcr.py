"""Distance to closest record (DCR), the privacy check synthetic-data tools report, as a
baseline beside the membership-inference attacks.

For each generated sample, the Euclidean distance (on raw values) to the closest member
(training record) and to the closest non-member (holdout record). If the generator had not seen
the members, every record would be as likely as any other to be a sample's nearest, so the share
of samples whose nearest record is a member would be ``n_members / (n_members + n_non_members)``
(one half for equal sets); the check *passes* where a one-sided binomial test does not find the
share above that (SDMetrics' DCROverfittingProtection, SynthEval's DCR and the DOMIAS paper's
baseline read the same share). The binomial test treats the samples as independent; given the
records they are not (each record's neighbourhood takes a share of all of them), so with many
samples against few records it rejects more often than ``alpha`` under the null (9 % measured at
300 samples against 50 + 50 records). It looks at the samples only: a release can pass it and still
leak membership through its model or through the samples' density, which the attacks measure
("The DCR delusion", 2025).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from scipy.stats import binomtest

from attacks.monte_carlo import squared_distances

#: Significance of the binomial test behind ``passes``.
DCR_ALPHA = 0.05


@dataclass(frozen=True)
class DcrResult:
    """The DCR baseline of one set of samples.

    Attributes:
        n_samples, n_members, n_non_members: the sets' sizes.
        share_closer_to_members: share of samples whose nearest record is a member (a tie
            counts as a member: the check's conservative side).
        expected_share: that share for a generator that never saw the members.
        p_value: one-sided binomial p-value of the share against ``expected_share``.
        passes: ``p_value >= alpha`` (the test finds no excess of member neighbours).
        median_dcr_members, median_dcr_non_members: median over samples of the distance to the
            closest member, and to the closest non-member.
        alpha: the test's significance level.
    """

    n_samples: int
    n_members: int
    n_non_members: int
    share_closer_to_members: float
    expected_share: float
    p_value: float
    passes: bool
    median_dcr_members: float
    median_dcr_non_members: float
    alpha: float = DCR_ALPHA

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def closest_distances(
    samples: torch.Tensor, records: torch.Tensor, *, chunk: int = 512
) -> np.ndarray:
    """(n_samples,) float64 Euclidean distance from each sample to its closest record."""
    flat = records.flatten(1)
    out = np.empty(samples.shape[0], dtype=np.float64)
    for start in range(0, samples.shape[0], chunk):
        block = samples[start : start + chunk].flatten(1)
        nearest = squared_distances(block, flat).min(dim=1).values.clamp_min(0)
        out[start : start + len(block)] = nearest.sqrt().cpu().numpy()
    return out


def dcr_baseline(
    samples: torch.Tensor,
    members: torch.Tensor,
    non_members: torch.Tensor,
    *,
    alpha: float = DCR_ALPHA,
) -> DcrResult:
    """DCR of ``samples`` (n, *shape) against ``members`` and ``non_members`` (same shape)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if min(len(samples), len(members), len(non_members)) < 1:
        raise ValueError("DCR needs at least one sample, one member and one non-member")
    to_members = closest_distances(samples, members)
    to_non_members = closest_distances(samples, non_members)
    closer = int((to_members <= to_non_members).sum())
    expected = len(members) / (len(members) + len(non_members))
    p_value = float(binomtest(closer, len(samples), expected, alternative="greater").pvalue)
    return DcrResult(
        n_samples=len(samples),
        n_members=len(members),
        n_non_members=len(non_members),
        share_closer_to_members=closer / len(samples),
        expected_share=expected,
        p_value=p_value,
        passes=p_value >= alpha,
        median_dcr_members=float(np.median(to_members)),
        median_dcr_non_members=float(np.median(to_non_members)),
        alpha=alpha,
    )
