"""MSE against a naive loop, pairwise and to records, in one pass and in blocks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attacks.distances import mse, mse_to_records, squared_error

from .reference import reference_mse


@settings(max_examples=30, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=0, max_size=3),
    batch=st.integers(0, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_mse_matches_naive_loop_on_any_shape(shape, batch, seed) -> None:
    rng = np.random.default_rng(seed)
    recon, target = (rng.uniform(-1, 1, (batch, *shape)).astype(np.float32) for _ in range(2))
    ours = mse(torch.from_numpy(recon), torch.from_numpy(target))
    assert ours.dtype == torch.float64 and ours.shape == (batch,)
    if batch:
        np.testing.assert_allclose(ours.numpy(), reference_mse(recon, target), rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=0, max_size=3),
    n_records=st.integers(0, 3),
    n_samples=st.integers(0, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_mse_to_records_matches_naive_loop_on_any_shape(shape, n_records, n_samples, seed) -> None:
    rng = np.random.default_rng(seed)
    records = rng.uniform(-1, 1, (n_records, *shape)).astype(np.float32)
    recon = rng.uniform(-1, 1, (n_records, n_samples, *shape)).astype(np.float32)
    ours = mse_to_records(torch.from_numpy(recon), torch.from_numpy(records))
    assert ours.dtype == torch.float64 and ours.shape == (n_records, n_samples)
    for row, samples, record in zip(ours.numpy(), recon, records, strict=True):
        expected = reference_mse(samples, np.repeat(record[None], n_samples, axis=0))
        np.testing.assert_allclose(row, expected, rtol=1e-12)


def test_mse_blocks_agree_with_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    records, recon = rng.random((3, 2, 5)), rng.random((3, 4, 2, 5))
    whole = mse_to_records(torch.from_numpy(recon), torch.from_numpy(records)).numpy()
    monkeypatch.setattr(squared_error, "MSE_BLOCK_ELEMENTS", 3 * 2 * 5)  # 1 record, 3 + 1 samples
    blocked = mse_to_records(torch.from_numpy(recon), torch.from_numpy(records)).numpy()
    np.testing.assert_allclose(blocked, whole, rtol=1e-12)
