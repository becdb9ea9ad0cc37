"""Input canaries of the one-run audit: records added to D_train, each with probability 1/2.

Designs (:class:`InputDesign`):

- ``uniform-noise``: i.i.d. uniform values in the records' range ([0, 1] for images, [-1, 1]
  for series) with uniformly drawn labels: far from the data, but nothing a small VAE can
  store (each is as many random numbers as it has values);
- ``blocks`` (images): a random binary pattern of :data:`BLOCKS` x :data:`BLOCKS` cells per
  channel, each cell a flat square of 0 or 1, with a uniformly drawn label: out of
  distribution (no face is made of black and white squares) and few bits each (25 per
  channel), so that a VAE can memorise the ones it trains on.
"""

from __future__ import annotations

from enum import Enum

import torch
from torch.nn import functional

from audit.mechanisms import CellData
from dpvae_core.records import Modality, record_modality
from dpvae_core.seeding import torch_generator

#: Cells per side of a ``blocks`` canary.
BLOCKS = 5


class InputDesign(str, Enum):
    UNIFORM_NOISE = "uniform-noise"
    BLOCKS = "blocks"


def input_canaries(
    data: CellData, m: int, seed: int, *, design: InputDesign, tag: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """m canary records of ``design`` and their labels (seeded by ``seed`` and ``tag``)."""
    design = InputDesign(design)
    gen = torch_generator(seed, tag, "input-canaries")
    dtype = data.train[0].dtype
    if design is InputDesign.UNIFORM_NOISE:
        x = torch.rand((m, *data.shape), generator=gen, dtype=dtype)
        if float(data.train[0].min()) < 0:  # series live in [-1, 1]
            x = 2 * x - 1
    else:
        if record_modality(data.shape) is not Modality.IMAGE:
            raise ValueError(f"blocks canaries are images; records here have shape {data.shape}")
        c, h, w = data.shape
        bits = torch.randint(2, (m, c, BLOCKS, BLOCKS), generator=gen).to(dtype)
        x = functional.interpolate(bits, size=(h, w), mode="nearest")
    y = torch.randint(data.num_classes, (m,), generator=gen)
    return x, y
