"""``pinwheel``: PriVAE's clustering task (Section 5.2), generated, no download.

PriVAE trains on "the pinwheel dataset from [19] (Johnson et al.), with n = 400 observations,
clustered in 4 spirals", following Mathieu et al. (2019). So that D_train holds the paper's 400
points and the attacks have as many non-members, the dataset is 800 points of one generator
draw (:func:`audit.datasets.pinwheel_data.pinwheel` with seed 0, Mathieu et al.'s
distribution: radial std 0.3, tangential std 0.1, rate 0.25, unit scale), split 50/20/30 as
every dataset, with D_train capped at 100 per spiral (400) by every profile but paper (which
keeps all 400 anyway).

Every profile's model settings are replaced by PriVAE's (:data:`PINWHEEL_OVERRIDES`): a 2-D
latent space (the mixture prior's), B = 20 and learning rate 0.01. The model is the MLP VAE
(:class:`models.mlp_vae.MlpVAE`) with the 4-component mixture prior at the corners of the unit
square (sigma = 0.03), L = 20 reconstruction samples; the classifier an MLP
(:mod:`models.factory`).
"""

from __future__ import annotations

from pathlib import Path

from audit.datasets.dataset import Dataset, DatasetSpec
from audit.datasets.pinwheel_data import PAPER_N, PAPER_SPIRALS, pinwheel
from dpvae_core.records import Modality

NAME = "pinwheel"
#: Points generated: twice PriVAE's n, so that D_train (half) has the paper's 400.
POINTS = 2 * PAPER_N
#: Seed of the one generator draw every run uses (the data are fixed; cells' seeds split them).
DATA_SEED = 0
#: Mathieu et al.'s released run (Adams' ``pinwheel(0.1, 0.3, 4, 100, 0.25)``): unit scale,
#: tangential std 0.1 (see :mod:`audit.datasets.pinwheel_data`).
TANGENTIAL_STD, SCALE = 0.1, 1.0
#: PriVAE, Section 5.2 (all profiles): latent dimension 2, B = 20, learning rate 0.01.
PAPER_SETTINGS = (("latent_dim", 2), ("batch_size", 20), ("lr", 0.01))
#: Epochs: PriVAE does not state them. 100 (2000 steps of B = 20 on 400 points) put 99 % of
#: the codes at their spiral's corner without privacy (benchmarks/demo_pinwheel.py).
PINWHEEL_OVERRIDES = (
    ("quick", (*PAPER_SETTINGS, ("epochs", 100))),
    ("standard", (*PAPER_SETTINGS, ("epochs", 200))),
    ("paper", (*PAPER_SETTINGS, ("epochs", 200))),
)


def load_pinwheel(data_home: Path | None = None) -> Dataset:
    """800 pinwheel points (N, 2) float32 and their spiral (N,) int64; ``data_home`` unused."""
    x, y = pinwheel(POINTS, seed=DATA_SEED, tangential_std=TANGENTIAL_STD, scale=SCALE)
    names = tuple(f"spiral {k}" for k in range(PAPER_SPIRALS))
    return Dataset(NAME, x, y, names, modality=Modality.POINTS)


SPEC = DatasetSpec(
    name=NAME,
    modality=Modality.POINTS,
    loader=load_pinwheel,
    train_per_class=PAPER_N // PAPER_SPIRALS,
    classes=PAPER_SPIRALS,
    profile_overrides=PINWHEEL_OVERRIDES,
)
