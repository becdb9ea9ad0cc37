"""A tiny cdp cell (64 digits, 16 steps) for the one-run audit's tests."""

from __future__ import annotations

import numpy as np
import torch

from audit.config import CellConfig
from audit.mechanisms import CellData, Context
from audit.mechanisms.cdp import CdpOptions
from audit.profiles import Profile
from dpvae_core.progress import null_progress

#: z = 3, q = 16/64, 16 steps, delta = 1e-5: Opacus RDP (improved) gives eps = 1.63.
TINY_PROFILE = Profile(
    epochs=4,
    batch_size=16,
    lr=2e-3,
    latent_dim=4,
    beta=1.0,
    attack_samples=4,
    attack_records=None,
    classifier_epochs=1,
    classifier_patience=1,
    max_train=64,
)


def tiny_cell(z: float = 3.0, seed: int = 0) -> CellConfig:
    return CellConfig(
        dataset="digits",
        mech="cdp",
        param_name="noise_multiplier",
        param_value=z,
        seed=seed,
        profile=TINY_PROFILE,
        mech_options=CdpOptions(delta=1e-5),
    )


def tiny_data() -> CellData:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.from_numpy((bunch.images[:, None] / 16.0).astype(np.float32))
    y = torch.from_numpy(bunch.target.astype(np.int64))
    return CellData(
        train=(x[:64], y[:64]),
        val=(x[64:96], y[64:96]),
        test=(x[96:160], y[96:160]),
        num_classes=10,
        n_total=160,
    )


CTX = Context(device="cpu", progress=null_progress)


def tiny_dp_cell(mech: str, z: float = 3.0, seed: int = 0) -> CellConfig:
    """A tiny cell of another DP-SGD mechanism (cdp-termwise, dp2vae) at delta = 1e-5."""
    from audit.mechanisms import build_options

    name = mech
    return CellConfig(
        dataset="digits",
        mech=name,
        param_name="noise_multiplier",
        param_value=z,
        seed=seed,
        profile=TINY_PROFILE,
        mech_options=dict(build_options([name], {"delta": 1e-5}))[name],
    )
