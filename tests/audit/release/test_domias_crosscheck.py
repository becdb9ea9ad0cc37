"""The suite's DOMIAS attack against the authors' ``domias`` package on the same records and
samples (skipped where the optional extra ``crosscheck`` is not installed): the AUCs agree
within the AUC's sampling standard error (Hanley and McNeil) at these counts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from attacks import Records
from audit.release import ReleaseAttackConfig, attack_arrays
from audit.release.crosscheck import domias_package_auc, hanley_mcneil_se

pytest.importorskip("domias.baselines", reason="the optional extra crosscheck (domias)")


def _digits(seed: int) -> tuple[np.ndarray, ...]:
    x = (load_digits().images / 16.0).astype(np.float32)[:, None]
    idx = np.random.default_rng(seed).permutation(len(x))
    return x[idx[:150]], x[idx[150:300]], x[idx[300:900]]


@pytest.mark.parametrize("leak", [0.0, 1.0])
def test_domias_package_and_ours_agree(leak: float) -> None:
    """leak 1: the samples are noisy copies of the members (AUC far above 1/2); leak 0: fresh
    reference-like draws (AUC near 1/2). A suite DOMIAS scoring log p_G alone (Eq. 1, no
    reference density) lands outside the band in one of the two cases (checked by hand: 0.037
    apart, band 0.021)."""
    members, non_members, pool = _digits(seed=3)
    rng = np.random.default_rng(4)
    source = members if leak else pool[300:]
    noise = rng.normal(0, 0.05, (300, 1, 8, 8)).astype(np.float32)
    samples = np.clip(source[rng.integers(0, len(source), 300)] + noise, 0, 1)
    reference = pool[:300]
    config = ReleaseAttackConfig(attacks=("domias",), seed=5)
    attacked = attack_arrays(
        (members, None),
        (non_members, None),
        reference=(reference, None),
        samples=(samples, None),
        config=config,
    )
    ours = next(row for row in attacked.rows if row.attack == "domias").mi_auc
    zeros = torch.zeros(300, dtype=torch.int64)
    theirs = domias_package_auc(
        torch.from_numpy(members),
        torch.from_numpy(non_members),
        Records(torch.from_numpy(reference), zeros),
        Records(torch.from_numpy(samples), zeros),
        seed=5,
    )
    assert abs(ours - theirs.auc) <= theirs.band, (ours, theirs)
    assert (ours > 0.75) == bool(leak)


@pytest.mark.parametrize(("n_pos", "n_neg"), [(10, 10), (150, 150), (30, 200)])
def test_hanley_mcneil_at_chance_is_the_mann_whitney_null_variance(n_pos, n_neg) -> None:
    # At A = 1/2, Q1 = Q2 = 1/3 and Eq. 2 reduces to Var(U / (n_pos n_neg)) under the null,
    # (n_pos + n_neg + 1) / (12 n_pos n_neg) (the Mann-Whitney statistic's exact variance).
    exact = ((n_pos + n_neg + 1) / (12 * n_pos * n_neg)) ** 0.5
    assert hanley_mcneil_se(0.5, n_pos, n_neg) == pytest.approx(exact, rel=1e-12)
