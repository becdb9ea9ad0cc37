"""Feature maps of records for the sample-based attacks: raw values, or PCA on reference records."""

from __future__ import annotations

from collections.abc import Callable

import torch
from sklearn.decomposition import PCA

from attacks.threat import Records

Features = Callable[[torch.Tensor], torch.Tensor]
"""Records (k, *shape) -> features (k, d) float64, on the records' device."""


def flat_features(x: torch.Tensor) -> torch.Tensor:
    """Records (k, *shape) as (k, D) float64 rows."""
    return x.flatten(1).to(torch.float64)


def pca_features(reference: Records, *, n_components: int, seed: int) -> Features:
    """The projection onto the first principal components of the reference records (float64).

    ``n_components`` is capped at min(n_ref, D). sklearn's randomized SVD (Halko et al. 2011),
    seeded with ``seed`` mod 2**32 (sklearn takes 32 bits): a full SVD of 2000 reference images
    of 64x64x3 costs minutes, the randomized one seconds, and its leading components agree to
    within its power iterations.
    """
    flat = reference.x.flatten(1).to(torch.float64).cpu().numpy()
    k = min(n_components, *flat.shape)
    pca = PCA(n_components=k, svd_solver="randomized", random_state=seed % 2**32).fit(flat)
    mean = torch.from_numpy(pca.mean_)
    components = torch.from_numpy(pca.components_)

    def project(x: torch.Tensor) -> torch.Tensor:
        rows = x.flatten(1).to(torch.float64)
        return (rows - mean.to(rows.device)) @ components.to(rows.device).T

    return project
