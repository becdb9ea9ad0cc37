"""Each cell's training draws are its own (issue 30, item 10): shuffling / Poisson coins,
reparameterisation noise and DP2-VAE's subsets are keyed by the cell's configuration."""

from __future__ import annotations

from audit.config import CellConfig
from audit.mechanisms import Context
from audit.mechanisms.mechanism import vae_settings
from audit.profiles import PROFILES, ProfileName
from dpvae_core.progress import null_progress


def _cell(mech: str, value: float | None, seed: int = 0) -> CellConfig:
    name = {"none": "none", "cdp": "noise_multiplier"}
    return CellConfig(
        "digits", mech, name.get(mech, "sigma"), value, seed, PROFILES[ProfileName.QUICK]
    )


def test_cells_of_one_seed_draw_their_own_training_randomness():
    ctx = Context(device="cpu", progress=null_progress)
    seeds = {
        vae_settings(c, ctx).seed
        for c in (
            _cell("none", None),
            _cell("cdp", 1.0),
            _cell("cdp", 2.0),
            _cell("dp2vae", 1.0),
        )
    }
    assert len(seeds) == 4
    again = vae_settings(_cell("cdp", 1.0), ctx).seed
    assert again in seeds  # seeded: the same cell draws the same
