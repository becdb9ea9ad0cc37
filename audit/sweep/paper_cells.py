"""The trade-off paper's recipe in a sweep's cells (the paper profile; data in
:mod:`audit.paper_recipe`, table and sources in docs/profiles.md).

- Learning rate and batch size per setting, where the profile marks them ``per_setting`` (the
  paper profile on LFW20 and LFW50, unless given on the command line): the non-private
  baseline's from Table 2's "Orig." column, each ``cdp`` cell's from its z's column (a z the
  table lacks: :data:`audit.paper_recipe.NEAREST_RULE`). Other mechanisms, and ``cdp`` with
  ``--target-epsilon`` (z is not known before its cell calibrates it), keep the profile's.
- ``cdp``'s clip norm and microbatches in the paper profile (every dataset): the median heuristic
  and microbatches of 4, each unless given on the command line.
"""

from __future__ import annotations

from dataclasses import replace

from audit.config import SweepConfig
from audit.mechanisms import BASELINE, get_mechanism
from audit.mechanisms.cdp import CentralDP
from audit.mechanisms.dp_adam_options import ClipNormRule
from audit.options import MechanismOptions
from audit.paper_recipe import PAPER_CLIP_NORM, PAPER_MICROBATCH, paper_vae_recipe
from audit.profiles import Profile, ProfileName


def setting_profile(
    config: SweepConfig, mech: str, param_name: str | None, value: float | None
) -> Profile:
    """The profile of ``mech``'s cell at (``param_name``, ``value``): the sweep's, with the
    knobs it sets ``per_setting`` taken from the paper's recipe for that setting."""
    profile = config.profile
    if not profile.per_setting:
        return profile
    if mech == BASELINE:
        column = None
    elif mech == CentralDP.name and param_name == get_mechanism(mech).param_name:
        column = value
    else:
        return profile
    found = paper_vae_recipe(config.dataset, column)
    if found is None:
        return profile
    recipe = found[0]
    return replace(profile, **{knob: getattr(recipe, knob) for knob in profile.per_setting})


def setting_options(config: SweepConfig, mech: str) -> MechanismOptions:
    """``mech``'s typed options in ``config``'s cells: as given, and for ``cdp`` in the paper
    profile the paper's clip norm rule and microbatches where not given."""
    options = config.options_for(mech) or get_mechanism(mech).options_type()
    if config.profile_name is not ProfileName.PAPER or mech != CentralDP.name:
        return options
    paper = {"clip_norm": PAPER_CLIP_NORM, "microbatch": PAPER_MICROBATCH}
    return replace(options, **{k: v for k, v in paper.items() if getattr(options, k) is None})


def sweep_batch_sizes(config: SweepConfig, mech: str, grid: list[tuple[str, float]]) -> set[int]:
    """The batch sizes of ``mech``'s cells over ``grid`` ((parameter name, value) pairs)."""
    return {setting_profile(config, mech, name, value).batch_size for name, value in grid}


def check_audit_clip_norm(config: SweepConfig) -> None:
    """``--canary-audit`` sizes its canaries by C before training, so a DP-Adam mechanism audited
    by it needs a number for ``--clip-norm``, not the median heuristic (the paper profile's
    ``cdp`` default): refused here, before any cell, in one line."""
    if not config.audit:
        return
    for mech in config.mechs:
        if mech == BASELINE or not get_mechanism(mech).one_run_audit:
            continue
        if getattr(setting_options(config, mech), "clip_norm", None) is ClipNormRule.MEDIAN:
            raise ValueError(
                f"--canary-audit needs a fixed --clip-norm for --mech {mech} (the median "
                "heuristic, the paper profile's default, sets C from the data while training); "
                "give --clip-norm a number"
            )
