"""Input canary designs."""

from __future__ import annotations

import pytest
import torch

from audit.empirical.input_canaries import BLOCKS, InputDesign, input_canaries
from dpvae_core.seeding import torch_generator
from tests.audit.empirical.fixtures import tiny_data


def test_uniform_noise_is_the_earlier_draw() -> None:
    x, y = input_canaries(tiny_data(), 30, 4, design=InputDesign.UNIFORM_NOISE, tag="t")
    gen = torch_generator(4, "t", "input-canaries")  # the generator's order before designs
    assert torch.equal(x, torch.rand((30, 1, 8, 8), generator=gen))
    assert torch.equal(y, torch.randint(10, (30,), generator=gen))


def test_blocks_are_flat_binary_blocks() -> None:
    x, y = input_canaries(tiny_data(), 50, 0, design="blocks", tag="t")
    assert x.shape == (50, 1, 8, 8) and set(x.unique().tolist()) <= {0.0, 1.0}
    # nearest upsampling: pixel i comes from block floor(i * BLOCKS / 8); every pixel of a block
    # holds the block's one value
    block = [i * BLOCKS // 8 for i in range(8)]
    small = torch.full((50, 1, BLOCKS, BLOCKS), -1.0)
    for i in range(8):
        for j in range(8):
            small[:, :, block[i], block[j]] = x[:, :, i, j]
    assert torch.equal(torch.nn.functional.interpolate(small, size=(8, 8), mode="nearest"), x)
    assert len({tuple(r.flatten().tolist()) for r in x}) == 50  # distinct canaries
    assert int(y.min()) >= 0 and int(y.max()) < 10


def test_blocks_refuse_series() -> None:
    from dataclasses import replace

    data = tiny_data()
    series = replace(data, train=(torch.zeros(4, 20, 3), data.train[1][:4]))
    with pytest.raises(ValueError, match="blocks canaries are images"):
        input_canaries(series, 5, 0, design="blocks", tag="t")


def test_patches_light_disjoint_blocks_of_a_grid() -> None:
    x, _ = input_canaries(tiny_data(), 9, 0, design="patches", tag="t")
    assert set(x.unique().tolist()) == {0.0, 1.0}
    lit = x.flatten(1) > 0
    assert bool(lit.any(1).all()) and int((lit.sum(0) > 1).sum()) == 0  # each pixel: <= 1 canary
    assert int(lit.sum()) == 64  # a 3 x 3 grid covers the 8 x 8 image
    with pytest.raises(ValueError, match="need a 9 x 9 grid"):
        input_canaries(tiny_data(), 70, 0, design="patches", tag="t")


def test_marked_mean_differs_from_the_validation_mean_in_its_block_only() -> None:
    data = tiny_data()
    mean = data.val[0].mean(0)
    x, _ = input_canaries(data, 16, 0, design="marked-mean", tag="t")
    changed = (x - mean).abs().flatten(1) > 0
    assert int((changed.sum(0) > 1).sum()) == 0 and bool(changed.any(1).all())
    # the flipped block is at the far end of the range from the mean
    far = (mean < 0.5).float().flatten()
    assert torch.equal(x.flatten(1)[changed], far.expand(16, -1)[changed])


def test_mean_blocks_are_the_mean_plus_a_signed_pattern() -> None:
    data = tiny_data()
    mean = data.val[0].mean(0)
    x, y = input_canaries(data, 20, 0, design="mean-blocks", tag="t")
    assert x.shape == (20, 1, 8, 8) and float(x.min()) >= 0 and float(x.max()) <= 1
    up, down = (mean + 0.5).clamp(0, 1), (mean - 0.5).clamp(0, 1)
    assert bool(((x == up) | (x == down)).all())  # every pixel: the mean moved by +-0.5
    assert 0.3 < float((x == up).float().mean()) < 0.7  # signs drawn at random
    assert int(y.max()) < 10


def test_label_slot_canaries_have_their_own_labels_outside_the_real_classes() -> None:
    from audit.empirical.input_canaries import label_slot_classes

    data = tiny_data()
    x, y = input_canaries(data, 12, 0, design="label-slot", tag="t")
    assert torch.equal(y, torch.arange(10, 22))  # canary j: label 10 + j, no real record's
    assert int(data.train[1].max()) < 10 and int(data.val[1].max()) < 10
    blocks, _ = input_canaries(data, 12, 0, design="blocks", tag="t")
    assert torch.equal(x, blocks)  # the images are the blocks design's
    assert label_slot_classes(10, 12, InputDesign.LABEL_SLOT) == 22
    assert label_slot_classes(10, 12, InputDesign.BLOCKS) == 10
