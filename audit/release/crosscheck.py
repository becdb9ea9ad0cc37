"""Cross-check of the DOMIAS attack against the authors' own package (``domias`` on PyPI, the
optional extra ``crosscheck``): the package's KDE density ratio (``domias.baselines.kde_baseline``,
Eq. 2 of van Breugel et al. 2023 with scipy's Gaussian KDE, Scott's bandwidth, for p_G and p_R:
the estimator ``evaluate_performance(density_estimator="kde")`` scores its ``domias`` row with)
and its AUC (``compute_metrics_baseline``), on the same members, non-members, reference records
and samples, in the same PCA features as the suite's attack.

What is not matched: the package scores p_G / (p_R + 1e-20) where the suite scores
log p_G - log p_R (the same order wherever p_R >> 1e-20 and neither density underflows).
``evaluate_performance`` itself is not called: it fits the generator itself and imports ``ctgan``
(undeclared by the package; installing it would replace this environment's pandas).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attacks import Records
from attacks.domias import DomiasAttack
from attacks.features import pca_features
from dpvae_core.seeding import Purpose, derive_seed


@dataclass(frozen=True)
class DomiasCrossCheck:
    """The package's DOMIAS AUC on the same inputs, and the sampling band of an AUC there.

    Attributes:
        auc: the package's ROC AUC of its DOMIAS score (KDE for p_G and p_R).
        band: the standard error of an AUC at these counts and this AUC (Hanley and McNeil
            1982, Eq. 2): the sampling noise two AUCs of one attack would differ by on fresh
            records.
    """

    auc: float
    band: float


def hanley_mcneil_se(auc: float, n_pos: int, n_neg: int) -> float:
    """Standard error of a ROC AUC (Hanley and McNeil 1982, Eq. 2)."""
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    var = (auc * (1 - auc) + (n_pos - 1) * (q1 - auc**2) + (n_neg - 1) * (q2 - auc**2)) / (
        n_pos * n_neg
    )
    return math.sqrt(max(var, 0.0))


def domias_package_auc(
    members: torch.Tensor,
    non_members: torch.Tensor,
    reference: Records,
    samples: Records,
    *,
    seed: int,
) -> DomiasCrossCheck:
    """The ``domias`` package's AUC on these records, projected as the suite's DOMIAS attack of
    a release attack with root ``seed`` projects them (PCA on the reference records, its seed)."""
    from domias.baselines import compute_metrics_baseline, kde_baseline

    project = pca_features(
        reference,
        n_components=DomiasAttack.pca_components,
        seed=derive_seed(seed, Purpose.ATTACK),
    )

    def features(x: torch.Tensor) -> np.ndarray:
        return project(x).cpu().numpy()

    x_test = np.concatenate([features(members), features(non_members)])
    y_test = np.concatenate([np.ones(len(members)), np.zeros(len(non_members))]).astype(bool)
    _, ratio = kde_baseline(x_test, features(samples.x), features(reference.x))
    _, auc = compute_metrics_baseline(ratio, y_test)
    auc = float(auc)
    return DomiasCrossCheck(auc=auc, band=hanley_mcneil_se(auc, len(members), len(non_members)))
