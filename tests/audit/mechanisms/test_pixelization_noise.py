"""Fan's pixelization in torch, against a naive loop and brute force; the claim is in
tests/audit/privacy."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.mechanisms.laplace_noise import sample_laplace
from audit.mechanisms.pixelization_noise import block_means, pixelize
from audit.privacy import pixelization_epsilon, pixelization_scale, valid_block_sizes

from .stats import Z_THRESHOLD, laplace_variance_z


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _naive_pixelize(x, *, eps_i, block, neighborhood, generator):
    """Obviously correct loop version: same noise draws (same shape, same generator)."""
    batch, channels, height, width = x.shape
    noise = sample_laplace(
        (batch, channels, height // block, width // block),
        scale=neighborhood / (block * block * eps_i),
        generator=generator,
        dtype=x.dtype,
    )
    out = torch.empty_like(x)
    for n in range(batch):
        for c in range(channels):
            for i in range(height // block):
                for j in range(width // block):
                    pixels = x[n, c, i * block : (i + 1) * block, j * block : (j + 1) * block]
                    value = min(1.0, max(0.0, float(pixels.mean() + noise[n, c, i, j])))
                    out[n, c, i * block : (i + 1) * block, j * block : (j + 1) * block] = value
    return out


def _block_noise(eps_i=100.0, block=2, neighborhood=4, n_images=2000, seed=0):
    """Noise added to each block of mid-grey images, where clipping cannot bite (|noise| < 0.5)."""
    x = torch.full((n_images, 3, 8, 8), 0.5)
    out = pixelize(x, eps_i=eps_i, block=block, neighborhood=neighborhood, generator=_gen(seed))
    noise = out[..., ::block, ::block] - 0.5
    assert noise.abs().max() < 0.5  # scale 0.01: P(|noise| >= 0.5) = e^-50 per block
    return noise


@pytest.mark.statistical
def test_noise_variance_matches_laplace():
    noise = _block_noise()  # 2000 * 3 * 16 = 96000 blocks
    assert abs(laplace_variance_z(noise, scale=4 / (4 * 100.0))) < Z_THRESHOLD


@pytest.mark.statistical
@pytest.mark.parametrize("wrong_factor", [0.9, 1.1])
def test_variance_check_rejects_a_wrong_scale(wrong_factor):
    noise = _block_noise()
    assert abs(laplace_variance_z(noise, scale=wrong_factor * 4 / (4 * 100.0))) > Z_THRESHOLD


def test_matches_naive_loop():
    x = torch.rand((2, 3, 6, 6), generator=_gen(1))
    fast = pixelize(x, eps_i=3.0, block=3, neighborhood=6, generator=_gen(2))
    slow = _naive_pixelize(x, eps_i=3.0, block=3, neighborhood=6, generator=_gen(2))
    torch.testing.assert_close(fast, slow)


@pytest.mark.parametrize("batch", [0, 1])
def test_tiny_batches(batch):
    x = torch.rand((batch, 1, 4, 4), generator=_gen())
    out = pixelize(x, eps_i=10.0, block=2, neighborhood=4, generator=_gen())
    assert out.shape == x.shape
    if batch:
        torch.testing.assert_close(
            out, _naive_pixelize(x, eps_i=10.0, block=2, neighborhood=4, generator=_gen())
        )


def test_seeded_and_reproducible():
    x = torch.rand((2, 3, 8, 8), generator=_gen())
    a = pixelize(x, eps_i=1.0, block=2, neighborhood=8, generator=_gen(5))
    b = pixelize(x, eps_i=1.0, block=2, neighborhood=8, generator=_gen(5))
    c = pixelize(x, eps_i=1.0, block=2, neighborhood=8, generator=_gen(6))
    assert torch.equal(a, b) and not torch.equal(a, c)


@settings(max_examples=60, deadline=None)
@given(
    eps_i=st.floats(min_value=1e-6, max_value=1e6, allow_nan=False),
    seed=st.integers(0, 2**31 - 1),
    neighborhood=st.integers(1, 256),
)
def test_output_never_leaves_unit_interval(eps_i, seed, neighborhood):
    x = torch.rand((2, 3, 8, 8), generator=_gen(seed))
    out = pixelize(x, eps_i=eps_i, block=2, neighborhood=neighborhood, generator=_gen(seed + 1))
    assert out.min() >= 0 and out.max() <= 1


@settings(max_examples=30, deadline=None)
@given(height=st.integers(1, 24), width=st.integers(1, 24), data=st.data())
def test_shapes_preserved_for_every_valid_block(height, width, data):
    sizes = valid_block_sizes(height, width)
    assert sizes == tuple(b for b in range(1, 25) if height % b == 0 and width % b == 0)
    block = data.draw(st.sampled_from(sizes))
    x = torch.rand((2, 3, height, width), generator=_gen())
    out = pixelize(x, eps_i=10.0, block=block, neighborhood=4, generator=_gen())
    assert out.shape == x.shape and out.dtype == x.dtype
    # constant within each block
    assert torch.equal(
        out, out[..., ::block, ::block].repeat_interleave(block, -2).repeat_interleave(block, -1)
    )


def test_block_that_does_not_tile_lists_valid_sizes():
    x = torch.rand((1, 3, 12, 18), generator=_gen())
    with pytest.raises(
        ValueError,
        match=r"block 4 does not tile a 12x18 image; valid block sizes: "
        r"1, 2, 3, 6",
    ):
        pixelize(x, eps_i=1.0, block=4, neighborhood=4, generator=_gen())


@pytest.mark.parametrize("eps_i", [0.0, -1.0, math.nan, math.inf])
def test_bad_epsilon(eps_i):
    x = torch.rand((1, 1, 4, 4), generator=_gen())
    with pytest.raises(ValueError, match=f"eps_i must be a finite number > 0, got {eps_i!r}"):
        pixelize(x, eps_i=eps_i, block=2, neighborhood=4, generator=_gen())


@pytest.mark.parametrize(
    ("x", "message"),
    [
        (torch.rand(4, 4), "shape"),
        (torch.full((1, 1, 2, 2), 1.5), "in \\[0, 1\\]"),
        (torch.zeros((1, 1, 2, 2), dtype=torch.int64), "float"),
    ],
)
def test_bad_images(x, message):
    with pytest.raises(ValueError, match=message):
        pixelize(x, eps_i=1.0, block=1, neighborhood=1, generator=_gen())


def _binary_images(channels: int, height: int, width: int) -> torch.Tensor:
    """Every image with pixels in {0, 1}: the vertices of [0, 1]^(C H W), where the convex L1
    distance of block means reaches its maximum."""
    n = channels * height * width
    codes = torch.arange(2**n).unsqueeze(1)
    bits = (codes >> torch.arange(n)) & 1
    return bits.float().view(-1, channels, height, width)


@pytest.mark.parametrize(
    "channels, height, width, block, neighborhood",
    [(1, 2, 2, 1, 1), (1, 2, 2, 2, 2), (2, 2, 2, 1, 2), (1, 2, 4, 2, 3), (1, 2, 4, 1, 8)],
)
def test_epsilon_is_brute_force_l1_sensitivity_over_scale(
    channels, height, width, block, neighborhood
):
    x = _binary_images(channels, height, width)
    means = block_means(x, block=block).flatten(1)
    sensitivity = torch.cdist(means, means, p=1).max().item()  # over ALL pairs of images
    scale = pixelization_scale(eps_i=0.7, block=block, neighborhood=neighborhood)
    expected = sensitivity / scale
    assert pixelization_epsilon(
        eps_i=0.7,
        channels=channels,
        height=height,
        width=width,
        block=block,
        neighborhood=neighborhood,
    ) == pytest.approx(expected, rel=1e-6)
