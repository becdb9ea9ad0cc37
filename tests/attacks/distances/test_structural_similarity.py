"""SSIM against scikit-image pair by pair, through whichever path runs on a CPU."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attacks.distances import Distance, ssim, ssim_to_records

from .reference import (
    flat_pairs,
    random_pairs,
    reference_ssim,
    reference_ssim_to_records,
    structured_pairs,
)

SIZES = [(7, 7), (8, 8), (25, 25), (64, 64)]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("make_pairs", [random_pairs, structured_pairs])
def test_ssim_matches_scikit_image(size, channels, batch, make_pairs) -> None:
    recon, target = make_pairs(np.random.default_rng(0), (batch, channels, *size))
    ours = ssim(torch.from_numpy(recon), torch.from_numpy(target))
    assert ours.dtype == torch.float64 and ours.shape == (batch,)
    np.testing.assert_allclose(ours.numpy(), reference_ssim(recon, target), rtol=0, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(0, 3),
    channels=st.sampled_from([1, 3]),
    height=st.integers(7, 20),
    width=st.integers(7, 20),
    structured=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_ssim_matches_scikit_image_on_any_shape(
    batch, channels, height, width, structured, seed
) -> None:
    make_pairs = structured_pairs if structured else random_pairs
    recon, target = make_pairs(np.random.default_rng(seed), (batch, channels, height, width))
    ours = ssim(torch.from_numpy(recon), torch.from_numpy(target)).numpy()
    assert ours.shape == (batch,)
    if batch:
        np.testing.assert_allclose(ours, reference_ssim(recon, target), rtol=0, atol=1e-5)


@pytest.mark.parametrize("channels", [1, 3])
def test_ssim_is_exact_where_variances_cancel(channels) -> None:
    """float64 throughout: flat bright regions lose nothing (float32 sums lose about 1e-4)."""
    recon, target = flat_pairs(np.random.default_rng(3), (4, channels, 24, 30))
    ours = ssim(torch.from_numpy(recon), torch.from_numpy(target)).numpy()
    np.testing.assert_allclose(ours, reference_ssim(recon, target), rtol=0, atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(
    n_records=st.integers(0, 3),
    n_samples=st.integers(0, 4),
    channels=st.sampled_from([1, 3]),
    height=st.integers(7, 16),
    width=st.integers(7, 16),
    make_pairs=st.sampled_from([random_pairs, structured_pairs, flat_pairs]),
    seed=st.integers(0, 2**32 - 1),
)
def test_ssim_to_records_matches_scikit_image_on_any_shape(
    n_records, n_samples, channels, height, width, make_pairs, seed
) -> None:
    rng = np.random.default_rng(seed)
    image = (channels, height, width)
    records = make_pairs(rng, (max(n_records, 1), *image))[1][:n_records]
    recon = np.empty((n_records, n_samples, *image), dtype=np.float32)
    for samples in recon:
        samples[:] = make_pairs(rng, (max(n_samples, 1), *image))[0][:n_samples]
    ours = ssim_to_records(torch.from_numpy(recon), torch.from_numpy(records))
    assert ours.dtype == torch.float64 and ours.shape == (n_records, n_samples)
    if ours.numel():
        expected = reference_ssim_to_records(recon, records)
        np.testing.assert_allclose(ours.numpy(), expected, rtol=0, atol=1e-5)


def test_ssim_pairwise_equals_ssim_to_records() -> None:
    recon, target = random_pairs(np.random.default_rng(5), (6, 3, 10, 11))
    recon_t, target_t = torch.from_numpy(recon), torch.from_numpy(target)
    per_record = ssim_to_records(recon_t.view(2, 3, 3, 10, 11), target_t[::3])
    repeated = ssim(recon_t, target_t[::3].repeat_interleave(3, dim=0))
    np.testing.assert_allclose(per_record.flatten().numpy(), repeated.numpy(), rtol=0, atol=1e-12)


def test_ssim_gives_torch_its_thread_count_back() -> None:
    before = torch.get_num_threads()
    recon, target = random_pairs(np.random.default_rng(6), (2, 1, 8, 8))
    try:
        torch.set_num_threads(2)
        ssim(torch.from_numpy(recon), torch.from_numpy(target))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_first_ssim_call_keeps_a_single_thread_process_single_threaded() -> None:
    """The SSIM kernel must not change torch's thread count; in a fresh process, where a threading
    runtime started by the first call (numba's OpenMP layer did) would reset it."""
    code = (
        "import torch; torch.set_num_threads(1)\n"
        "from attacks.distances import ssim_to_records\n"
        "ssim_to_records(torch.rand(2, 3, 3, 16, 16), torch.rand(2, 3, 16, 16))\n"
        "print(torch.get_num_threads())\n"
    )
    env = {**os.environ, "NUMBA_NUM_THREADS": "2"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.split()[-1] == "1", done.stdout + done.stderr


def test_ssim_of_identical_images_is_one() -> None:
    images = torch.rand(5, 3, 16, 12, generator=torch.Generator().manual_seed(1))
    images[0] = 0.25  # a constant image: zero variances, SSIM still 1
    np.testing.assert_allclose(ssim(images, images.clone()).numpy(), 1.0, rtol=0, atol=1e-12)


def test_ssim_refuses_series_and_says_to_use_mse() -> None:
    series = torch.zeros(4, 500, 12)
    with pytest.raises(ValueError, match=r"SSIM applies to images only.*'mse'"):
        ssim(series, series)
    with pytest.raises(ValueError, match="images only"):
        Distance.SSIM.check_records(series)
    Distance.MSE.check_records(series)


def test_ssim_refuses_images_smaller_than_its_window() -> None:
    small = torch.zeros(2, 1, 6, 30)
    with pytest.raises(ValueError, match="at least 7x7.*6x30"):
        ssim(small, small)
