"""The float64 torch SSIM path in blocks: agrees with scikit-image and with one pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attacks.distances import ssim, ssim_to_records, ssim_torch, structural_similarity

from .reference import random_pairs, reference_ssim, reference_ssim_to_records


@pytest.mark.parametrize(
    ("n_samples", "block_pairs"),
    [(2, 5), (7, 3), (7, 1)],  # 2 records a block (last: 1); 1 record, samples 3+3+1; 1 a block
)
def test_ssim_to_records_blocks_agree_with_scikit_image(
    monkeypatch: pytest.MonkeyPatch, n_samples: int, block_pairs: int
) -> None:
    rng = np.random.default_rng(4)
    records = random_pairs(rng, (5, 3, 8, 9))[1]
    recon = np.stack([random_pairs(rng, (n_samples, 3, 8, 9))[0] for _ in records])
    monkeypatch.setattr(
        structural_similarity, "SSIM_NUMBA", False
    )  # blocks belong to the torch path
    monkeypatch.setattr(ssim_torch, "SSIM_BLOCK_ELEMENTS", block_pairs * 3 * 8 * 9)
    blocked = ssim_to_records(torch.from_numpy(recon), torch.from_numpy(records)).numpy()
    expected = reference_ssim_to_records(recon, records)
    np.testing.assert_allclose(blocked, expected, rtol=0, atol=1e-5)


def test_ssim_blocks_agree_with_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    recon, target = random_pairs(np.random.default_rng(2), (5, 3, 8, 9))
    monkeypatch.setattr(
        structural_similarity, "SSIM_NUMBA", False
    )  # blocks belong to the torch path
    monkeypatch.setattr(ssim_torch, "SSIM_BLOCK_ELEMENTS", 2 * 3 * 8 * 9)  # blocks of 2, 2, 1
    blocked = ssim(torch.from_numpy(recon), torch.from_numpy(target)).numpy()
    np.testing.assert_allclose(blocked, reference_ssim(recon, target), rtol=0, atol=1e-5)
