"""The compiled CPU kernel (numba) against scikit-image and against the torch path it replaced."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attacks.distances import ssim, ssim_numba, ssim_to_records, ssim_torch, structural_similarity

from .reference import blurred, reference_ssim_to_records

KERNEL_TOLERANCE = 1e-5
"""The issue's bound on |ours - scikit-image| for every pair; both paths stay near 1e-15."""


@pytest.fixture(params=["numba", "torch"])
def ssim_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test once through the compiled kernel and once through the torch path."""
    monkeypatch.setattr(structural_similarity, "SSIM_NUMBA", request.param == "numba")
    return request.param


def assert_matches_scikit_image(recon: np.ndarray, records: np.ndarray) -> None:
    """ssim_to_records (R, S, ...) and ssim on the flattened pairs, both against scikit-image."""
    expected = reference_ssim_to_records(recon, records)
    recon_t, records_t = torch.from_numpy(recon), torch.from_numpy(records)
    per_record = ssim_to_records(recon_t, records_t).numpy()
    np.testing.assert_allclose(per_record, expected, rtol=0, atol=KERNEL_TOLERANCE)
    flat = recon_t.flatten(0, 1)
    pairwise = ssim(flat, records_t.repeat_interleave(recon.shape[1], dim=0)).numpy()
    np.testing.assert_allclose(pairwise, expected.ravel(), rtol=0, atol=KERNEL_TOLERANCE)


def test_numba_kernel_is_the_cpu_path() -> None:
    """numba is a dependency: CPU tensors must not fall back to the slower torch path."""
    assert ssim_numba.numba is not None and structural_similarity.SSIM_NUMBA


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("size", [(7, 7), (8, 8), (25, 25), (64, 64), (13, 40), (40, 9)])
def test_kernel_matches_scikit_image_on_random_images(ssim_path, channels, size) -> None:
    rng = np.random.default_rng(11)
    records = rng.random((3, channels, *size)).astype(np.float32)
    noise = rng.normal(0.0, 0.15, (3, 5, channels, *size))
    recon = np.clip(records[:, None] + noise, 0.0, 1.0).astype(np.float32)
    assert_matches_scikit_image(recon, records)


@pytest.mark.parametrize("channels", [1, 3])
def test_kernel_matches_scikit_image_on_flat_and_constant_images(ssim_path, channels) -> None:
    """Constant images (zero variances), near-constant bright ones, exact 0 and 1 everywhere."""
    rng = np.random.default_rng(12)
    shape = (channels, 16, 20)
    records = np.stack(
        [
            np.full(shape, 0.987654321),
            np.clip(0.9 + rng.normal(0.0, 1e-4, shape), 0, 1),
            np.zeros(shape),
            np.ones(shape),
        ]
    ).astype(np.float32)
    recon = np.stack(
        [
            records,  # identical
            np.clip(records + rng.normal(0.0, 1e-4, records.shape), 0, 1),  # barely off
            np.broadcast_to(np.float32(0.5), records.shape),  # another constant
            1.0 - records,  # inverted
            rng.random(records.shape),  # noise
        ],
        axis=1,
    ).astype(np.float32)
    expected = reference_ssim_to_records(recon, records)
    ours = ssim_to_records(torch.from_numpy(recon), torch.from_numpy(records)).numpy()
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-10)
    np.testing.assert_allclose(ours[:, 0], 1.0, rtol=0, atol=1e-12)  # identical pairs
    assert_matches_scikit_image(recon, records)


def test_kernel_matches_scikit_image_on_lfw_faces(ssim_path) -> None:
    """25x25 greyscale faces of scikit-image's LFW subset, reconstructed as blurred copies."""
    from skimage.data import lfw_subset

    rng = np.random.default_rng(13)
    faces = lfw_subset()[:12, None].astype(np.float32)  # (12, 1, 25, 25) in [0, 1]
    recon = np.stack([blurred(faces, rng) for _ in range(4)], axis=1)
    assert_matches_scikit_image(recon, faces)


def test_kernel_matches_scikit_image_on_digits(ssim_path) -> None:
    """8x8 digits (scaled to [0, 1]): one 2x2 interior window, many exact zeros."""
    from sklearn.datasets import load_digits

    rng = np.random.default_rng(14)
    digits = (load_digits().images[:10, None] / 16.0).astype(np.float32)
    recon = np.stack([blurred(digits, rng), digits, np.roll(digits, 1, axis=-1)], axis=1)
    assert_matches_scikit_image(recon, digits)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize(("n_records", "n_samples"), [(1, 1), (1, 9), (3, 1), (3, 5), (5, 2)])
def test_kernel_splits_pairs_across_threads_exactly(
    threads: int, n_records: int, n_samples: int
) -> None:
    """Tasks cut the R x S pairs anywhere, even inside a record; every pair is scored once."""
    rng = np.random.default_rng(15)
    records = rng.random((n_records, 3, 9, 11)).astype(np.float32)
    recon = blurred(np.repeat(records[:, None], n_samples, axis=1), rng)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        ours = ssim_to_records(torch.from_numpy(recon), torch.from_numpy(records)).numpy()
    finally:
        torch.set_num_threads(before)
    expected = reference_ssim_to_records(recon, records)
    np.testing.assert_allclose(ours, expected, rtol=0, atol=KERNEL_TOLERANCE)


def test_kernel_agrees_with_the_torch_path() -> None:
    """The two implementations of one formula differ by rounding only."""
    rng = np.random.default_rng(16)
    records = rng.random((4, 3, 64, 64)).astype(np.float32)
    recon = blurred(np.repeat(records[:, None], 6, axis=1), rng)
    recon_t, records_t = torch.from_numpy(recon), torch.from_numpy(records)
    kernel = ssim_to_records(recon_t, records_t)
    reference = ssim_torch.ssim_to_records_torch(recon_t, records_t)
    torch.testing.assert_close(kernel, reference, rtol=0, atol=1e-12)
    lone = ssim(recon_t[:, 0], records_t)
    torch.testing.assert_close(lone, reference[:, 0], rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("recon_dtype", "records_dtype"),
    [
        (torch.float64, torch.float64),
        (torch.float32, torch.float64),
        (torch.float16, torch.float16),
        (torch.bfloat16, torch.float32),
    ],
)
def test_kernel_accepts_other_dtypes(recon_dtype, records_dtype) -> None:
    """float64 runs as it is; other dtypes and mixed pairs are scored in float64."""
    rng = np.random.default_rng(17)
    records = torch.from_numpy(rng.random((2, 1, 10, 12))).to(records_dtype)
    recon = (records.double()[:, None] + 0.1 * torch.rand(2, 3, 1, 10, 12)).clamp(0, 1)
    recon = recon.to(recon_dtype)
    ours = ssim_to_records(recon, records).numpy()
    expected = reference_ssim_to_records(recon.double().numpy(), records.double().numpy())
    np.testing.assert_allclose(ours, expected, rtol=0, atol=KERNEL_TOLERANCE)


def test_kernel_takes_views_and_tensors_that_require_grad() -> None:
    rng = np.random.default_rng(18)
    base = torch.from_numpy(rng.random((3, 4, 2, 20, 18)).astype(np.float32))
    recon = base.permute(1, 0, 2, 4, 3)[:, ::2]  # (4, 2, 2, 18, 20), not contiguous
    records = base[0, :, :, :, :].permute(0, 1, 3, 2).clone().requires_grad_(True)
    ours = ssim_to_records(recon, records)
    expected = reference_ssim_to_records(recon.numpy(), records.detach().numpy())
    np.testing.assert_allclose(ours.numpy(), expected, rtol=0, atol=KERNEL_TOLERANCE)
