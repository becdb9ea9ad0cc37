"""Input canaries of the one-run audit: records added to D_train, each with probability 1/2.

Designs (:class:`InputDesign`):

- ``uniform-noise``: i.i.d. uniform values in the records' range ([0, 1] for images, [-1, 1]
  for series) with uniformly drawn labels: far from the data, but nothing a small VAE can
  store (each is as many random numbers as it has values);
- ``blocks`` (images): a random binary pattern of :data:`BLOCKS` x :data:`BLOCKS` blocks per
  channel, each block a flat square of 0 or 1, with a uniformly drawn label: out of
  distribution (no face is made of black and white squares) and few bits each (25 per
  channel), so that a VAE can memorise the ones it trains on;
- ``patches`` (images): a black image with one white block of a g x g grid (g = ceil(sqrt(m))),
  canary j lighting block j: out of distribution, and each canary's pixels disjoint from every
  other's, so that what the model learns from one canary does not carry to another (the
  member-versus-non-member gap of a canary is its own); m <= g^2 blocks, each at least one pixel
  (m <= h w);
- ``marked-mean`` (images): the mean image of D_val with block j of the same grid flipped to the
  far end of the range (1 where the mean is below 1/2, else 0): in distribution everywhere but
  its own block, so the reconstruction error of a canary, and the gradient it sends, sit in its
  block alone (no shared background to learn, unlike ``patches``' black one). D_val is disjoint
  from D_train (the canaries read no training record).
- ``label-slot`` (images, conditional VAEs): ``blocks`` images, canary j labelled with its own
  label value ``num_classes + j`` that no real record uses; the audited model is built with
  :func:`label_slot_classes` (real classes plus m canary slots). The decoder's (and encoder's)
  weight column of label ``num_classes + j`` then receives gradient from canary j alone (plus
  the DP noise every coordinate gets): the input-space analogue of a Dirac gradient canary,
  scored from the released decoder only (:func:`audit.empirical.one_run.label_slot_scores`).
"""

from __future__ import annotations

import math
from enum import Enum

import torch
from torch.nn import functional

from audit.mechanisms import CellData
from dpvae_core.records import Modality, record_modality
from dpvae_core.seeding import torch_generator

#: Blocks per side of a ``blocks`` canary.
BLOCKS = 5
#: Blocks per side, and the amplitude, of a ``mean-blocks`` canary.
MEAN_BLOCKS = 8
MEAN_BLOCKS_AMPLITUDE = 0.5


class InputDesign(str, Enum):
    UNIFORM_NOISE = "uniform-noise"
    BLOCKS = "blocks"
    PATCHES = "patches"
    MARKED_MEAN = "marked-mean"
    MEAN_BLOCKS = "mean-blocks"
    LABEL_SLOT = "label-slot"


def label_slot_classes(num_classes: int, m: int, design: InputDesign) -> int:
    """Classes of the audited model: the real ones, plus one slot per canary for
    ``label-slot`` canaries."""
    return num_classes + m if InputDesign(design) is InputDesign.LABEL_SLOT else num_classes


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
            raise ValueError(
                f"{design.value} canaries are images; records here have shape {data.shape}"
            )
        c, h, w = data.shape
        if design in (InputDesign.BLOCKS, InputDesign.LABEL_SLOT):
            bits = torch.randint(2, (m, c, BLOCKS, BLOCKS), generator=gen).to(dtype)
        elif design is InputDesign.MEAN_BLOCKS:
            signs = 2 * torch.randint(2, (m, c, MEAN_BLOCKS, MEAN_BLOCKS), generator=gen) - 1
            up = functional.interpolate(signs.to(dtype), size=(h, w), mode="nearest")
            mean = data.val[0].to(dtype).mean(dim=0, keepdim=True)
            x = (mean + MEAN_BLOCKS_AMPLITUDE * up).clamp(0, 1)
            y = torch.randint(data.num_classes, (m,), generator=gen)
            return x, y
        else:
            g = math.ceil(math.sqrt(m))
            if g > min(h, w):
                raise ValueError(f"{m} canaries need a {g} x {g} grid; images are {h} x {w}")
            bits = torch.zeros((m, c, g * g), dtype=dtype)
            bits[torch.arange(m), :, torch.arange(m)] = 1.0
            bits = bits.view(m, c, g, g)
        x = functional.interpolate(bits, size=(h, w), mode="nearest")
        if design is InputDesign.MARKED_MEAN:
            mean = data.val[0].to(dtype).mean(dim=0, keepdim=True)
            far = (mean < 0.5).to(dtype)
            x = torch.where(x > 0, far.expand_as(x), mean.expand_as(x))
        if design is InputDesign.LABEL_SLOT:  # canary j: its own label, outside the real ones
            return x, data.num_classes + torch.arange(m)
    y = torch.randint(data.num_classes, (m,), generator=gen)
    return x, y
