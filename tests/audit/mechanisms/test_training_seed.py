"""Each cell's training draws are its own (issue 30, item 10): shuffling / Poisson coins,
reparameterisation noise and DP2-VAE's subsets are keyed by the cell's configuration."""

from __future__ import annotations

from audit.config import PROFILES, CellConfig, MechanismName, ProfileName
from audit.mechanisms import Context
from audit.mechanisms.mechanism import vae_settings
from dpvae_core.progress import null_progress


def _cell(mech: MechanismName, value: float | None, seed: int = 0) -> CellConfig:
    name = {MechanismName.NONE: "none", MechanismName.CDP: "noise_multiplier"}
    return CellConfig(
        "digits", mech, name.get(mech, "sigma"), value, seed, PROFILES[ProfileName.QUICK]
    )


def test_cells_of_one_seed_draw_their_own_training_randomness():
    ctx = Context(device="cpu", progress=null_progress)
    seeds = {
        vae_settings(c, ctx).seed
        for c in (
            _cell(MechanismName.NONE, None),
            _cell(MechanismName.CDP, 1.0),
            _cell(MechanismName.CDP, 2.0),
            _cell(MechanismName.DP2VAE, 1.0),
        )
    }
    assert len(seeds) == 4
    again = vae_settings(_cell(MechanismName.CDP, 1.0), ctx).seed
    assert again in seeds  # seeded: the same cell draws the same
