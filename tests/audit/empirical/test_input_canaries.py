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


def test_blocks_are_flat_binary_cells() -> None:
    x, y = input_canaries(tiny_data(), 50, 0, design="blocks", tag="t")
    assert x.shape == (50, 1, 8, 8) and set(x.unique().tolist()) <= {0.0, 1.0}
    # nearest upsampling: pixel i comes from cell floor(i * BLOCKS / 8); every pixel of a cell
    # holds the cell's one value
    cell = [i * BLOCKS // 8 for i in range(8)]
    small = torch.full((50, 1, BLOCKS, BLOCKS), -1.0)
    for i in range(8):
        for j in range(8):
            small[:, :, cell[i], cell[j]] = x[:, :, i, j]
    assert torch.equal(torch.nn.functional.interpolate(small, size=(8, 8), mode="nearest"), x)
    assert len({tuple(r.flatten().tolist()) for r in x}) == 50  # distinct canaries
    assert int(y.min()) >= 0 and int(y.max()) < 10


def test_blocks_refuse_series() -> None:
    from dataclasses import replace

    data = tiny_data()
    series = replace(data, train=(torch.zeros(4, 20, 3), data.train[1][:4]))
    with pytest.raises(ValueError, match="blocks canaries are images"):
        input_canaries(series, 5, 0, design="blocks", tag="t")
