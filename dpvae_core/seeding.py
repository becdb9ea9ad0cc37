"""One root seed split per purpose, so that no code path touches a global RNG.

A mechanism's noise (DP-Adam's Gaussian noise, LDP and VAE-LDP perturbations, term-wise
partitions and prior samples) is also keyed by the cell's ``config_hash``, so no two cells of a
sweep share a noise draw (subtracting two releases must not cancel their noise). Initialisation
and batch-order seeds stay per root seed, so same-seed cells stay comparable with the baseline.
"""

from __future__ import annotations

import hashlib
from enum import Enum

import numpy as np
import torch


class Purpose(str, Enum):
    """What a derived seed is used for; each purpose gets an independent stream."""

    SPLIT = "split"
    INIT = "init"
    TRAIN = "train"
    DP_NOISE = "dp-noise"
    PERTURB = "perturb"
    GENERATE = "generate"
    CLASSIFIER = "classifier"
    ATTACK = "attack"
    REFERENCE = "reference"
    """Reference models (shared by every cell of a seed: never keyed by a cell's config)."""
    TUNE = "tune"
    """The hyperparameter search's sampler (``--tune``: audit.cell.tuning)."""


def derive_seed(root: int, purpose: Purpose | str, *extra: object) -> int:
    """A 63-bit seed from ``root``, a purpose and optional extra keys (stable across runs)."""
    if root is None or not isinstance(root, int) or root < 0:
        raise ValueError(f"seed must be a non-negative integer, got {root!r}")
    tag = purpose.value if isinstance(purpose, Purpose) else str(purpose)
    text = "|".join([str(root), tag, *map(str, extra)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def numpy_rng(root: int, purpose: Purpose | str, *extra: object) -> np.random.Generator:
    return np.random.default_rng(derive_seed(root, purpose, *extra))


def torch_generator(
    root: int, purpose: Purpose | str, *extra: object, device: str | torch.device = "cpu"
) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(derive_seed(root, purpose, *extra))
    return gen
