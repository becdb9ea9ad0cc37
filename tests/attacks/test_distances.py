"""Distances: the vectorised SSIM against scikit-image pair by pair, MSE against a naive loop."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from skimage.metrics import structural_similarity

from attacks import distances
from attacks.distances import (
    Distance,
    available_distances,
    get_distance,
    mse,
    mse_to_records,
    ssim,
    ssim_to_records,
)

SIZES = [(7, 7), (8, 8), (25, 25), (64, 64)]


def reference_ssim(recon: np.ndarray, target: np.ndarray) -> np.ndarray:
    """scikit-image's SSIM, one pair at a time, in float64 (the obviously correct slow path)."""
    return np.array(
        [
            structural_similarity(
                a.astype(np.float64),
                b.astype(np.float64),
                win_size=7,
                data_range=1.0,
                channel_axis=0,
            )
            for a, b in zip(recon, target, strict=True)
        ]
    )


def reference_mse(recon: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Mean squared error, one pair at a time."""
    diffs = recon.astype(np.float64) - target.astype(np.float64)
    return np.array([np.mean(diff**2) for diff in diffs])


def random_pairs(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Uniform targets and reconstructions = targets + Gaussian noise, clipped to [0, 1]."""
    target = rng.random(shape)
    recon = np.clip(target + rng.normal(0.0, 0.2, size=shape), 0.0, 1.0)
    return recon.astype(np.float32), target.astype(np.float32)


def structured_pairs(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Smooth gradients, stripes and a step edge, reconstructed as a blurred, shifted copy."""
    _, channels, height, width = shape
    rows, cols = np.meshgrid(np.linspace(0, 1, height), np.linspace(0, 1, width), indexing="ij")
    base = np.stack(
        [
            rows,
            0.5 + 0.5 * np.sin(2 * np.pi * 3 * cols),
            (rows + cols > 1).astype(float),
        ]
    )
    target = np.broadcast_to(base[:channels], shape) * rng.uniform(0.5, 1.0, (shape[0], 1, 1, 1))
    recon = 0.5 * target + 0.5 * np.roll(target, 1, axis=-1) + 0.05
    return np.clip(recon, 0, 1).astype(np.float32), target.astype(np.float32)


def flat_pairs(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Near-constant bright images and flat halves: where var = E[x^2] - E[x]^2 cancels."""
    batch, channels, height, width = shape
    level = rng.uniform(0.6, 1.0, (batch, 1, 1, 1))
    target = level + rng.normal(0.0, 1e-4, shape)
    target[..., : width // 2] = 0.123456789  # an exactly flat half
    recon = target + rng.normal(0.0, 1e-4, shape)
    recon[-1] = 0.987654321  # a constant image
    return np.clip(recon, 0, 1).astype(np.float32), np.clip(target, 0, 1).astype(np.float32)


def reference_ssim_to_records(recon: np.ndarray, records: np.ndarray) -> np.ndarray:
    """(R, S) scikit-image SSIM of every sample recon[r, s] against records[r]."""
    flat_records = np.repeat(records, recon.shape[1], axis=0)
    flat = reference_ssim(recon.reshape(-1, *records.shape[1:]), flat_records)
    return flat.reshape(recon.shape[:2])


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
    monkeypatch.setattr(distances, "SSIM_NUMBA", False)  # blocks belong to the torch path
    monkeypatch.setattr(distances, "SSIM_BLOCK_ELEMENTS", block_pairs * 3 * 8 * 9)
    blocked = ssim_to_records(torch.from_numpy(recon), torch.from_numpy(records)).numpy()
    expected = reference_ssim_to_records(recon, records)
    np.testing.assert_allclose(blocked, expected, rtol=0, atol=1e-5)


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


def test_empty_batch_gives_empty_result() -> None:
    empty = torch.zeros(0, 3, 8, 8)
    assert ssim(empty, empty).shape == (0,)
    assert mse(empty, empty).shape == (0,)


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
    monkeypatch.setattr(distances, "MSE_BLOCK_ELEMENTS", 3 * 2 * 5)  # 1 record, 3 + 1 samples
    blocked = mse_to_records(torch.from_numpy(recon), torch.from_numpy(records)).numpy()
    np.testing.assert_allclose(blocked, whole, rtol=1e-12)


@pytest.mark.parametrize("distance", list(Distance))
def test_to_records_equals_pairwise_on_repeated_records(distance: Distance) -> None:
    recon, target = random_pairs(np.random.default_rng(8), (6, 1, 9, 9))
    recon_t, records = torch.from_numpy(recon), torch.from_numpy(target[::2])
    per_record = distance.to_records(recon_t.view(3, 2, 1, 9, 9), records)
    pairwise = distance.pairwise(recon_t, records.repeat_interleave(2, dim=0))
    np.testing.assert_allclose(per_record.flatten().numpy(), pairwise.numpy(), atol=1e-12)


@pytest.mark.parametrize("distance", list(Distance))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_distances_leave_their_inputs_alone(distance: Distance, dtype: torch.dtype) -> None:
    recon, target = (
        torch.from_numpy(a).to(dtype) for a in random_pairs(np.random.default_rng(9), (4, 1, 8, 8))
    )
    before = recon.clone(), target.clone()
    distance.pairwise(recon, target)
    distance.to_records(recon.view(2, 2, 1, 8, 8), target[::2])
    torch.testing.assert_close((recon, target), before, rtol=0, atol=0)


@pytest.mark.parametrize("distance", list(Distance))
def test_to_records_refuses_mismatched_shapes(distance: Distance) -> None:
    with pytest.raises(ValueError, match=r"recon must be \(R, S, \*shape\) for records"):
        distance.to_records(torch.zeros(2, 3, 1, 8, 8), torch.zeros(3, 1, 8, 8))
    with pytest.raises(ValueError, match=r"got recon \(2, 1, 8, 8\) and records \(2, 1, 8, 8\)"):
        distance.to_records(torch.zeros(2, 1, 8, 8), torch.zeros(2, 1, 8, 8))


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


@pytest.mark.parametrize("distance", [mse, ssim])
def test_distances_refuse_mismatched_shapes(distance) -> None:
    with pytest.raises(ValueError, match="same shape"):
        distance(torch.zeros(2, 1, 8, 8), torch.zeros(3, 1, 8, 8))


def test_get_distance_by_name_and_passthrough() -> None:
    assert get_distance("mse") is Distance.MSE
    assert get_distance("ssim") is Distance.SSIM
    assert get_distance(Distance.SSIM) is Distance.SSIM
    assert available_distances() == ["mse", "ssim"]


def test_get_distance_quotes_the_bad_name_and_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown distance 'l1'; valid distances: mse, ssim"):
        get_distance("l1")


def test_scores_are_higher_for_closer_reconstructions() -> None:
    means = np.array([0.1, 0.3])
    np.testing.assert_array_equal(Distance.MSE.score(means), [-0.1, -0.3])
    np.testing.assert_array_equal(Distance.SSIM.score(means), [0.1, 0.3])


def test_ssim_blocks_agree_with_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    recon, target = random_pairs(np.random.default_rng(2), (5, 3, 8, 9))
    monkeypatch.setattr(distances, "SSIM_NUMBA", False)  # blocks belong to the torch path
    monkeypatch.setattr(distances, "SSIM_BLOCK_ELEMENTS", 2 * 3 * 8 * 9)  # blocks of 2, 2, 1
    blocked = ssim(torch.from_numpy(recon), torch.from_numpy(target)).numpy()
    np.testing.assert_allclose(blocked, reference_ssim(recon, target), rtol=0, atol=1e-5)


# The compiled CPU kernel (numba) against scikit-image and against the torch path it replaced.

KERNEL_TOLERANCE = 1e-5
"""The issue's bound on |ours - scikit-image| for every pair; both paths stay near 1e-15."""


@pytest.fixture(params=["numba", "torch"])
def ssim_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test once through the compiled kernel and once through the torch path."""
    monkeypatch.setattr(distances, "SSIM_NUMBA", request.param == "numba")
    return request.param


def blurred(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A VAE-like reconstruction: a 3x3 box blur of each image plus a little noise, in [0, 1]."""
    padded = np.pad(images, [(0, 0)] * (images.ndim - 2) + [(1, 1), (1, 1)], mode="edge")
    height, width = images.shape[-2:]
    blur = sum(padded[..., i : i + height, j : j + width] for i in range(3) for j in range(3)) / 9.0
    return np.clip(blur + rng.normal(0.0, 0.02, images.shape), 0.0, 1.0).astype(np.float32)


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
    assert distances.numba is not None and distances.SSIM_NUMBA


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
    reference = distances._ssim_to_records_torch(recon_t, records_t)
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
