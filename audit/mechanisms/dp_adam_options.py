"""The options the DP-Adam mechanisms share, typed, one flag each (:mod:`audit.options`): the
clip norm (a number or the trade-off paper's median heuristic), a target epsilon, delta and the
RDP-to-DP conversion (:class:`DpAdamOptions`: every DP-Adam mechanism), and the per-example
term's (:class:`ClippedAdamOptions`). Each mechanism's own options class, with its name, lives
in its module (:mod:`audit.mechanisms.cdp` and the modules that build on it)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

from audit.options import (
    MechanismOptions,
    choice,
    delta_value,
    non_negative_float,
    option,
    positive_float,
)
from audit.privacy.claim import Conversion
from models.divergences import Divergence
from models.dp import DEFAULT_CLIP_NORM


class ClipNormRule(str, Enum):
    """A clip norm chosen from the data rather than given as a number."""

    MEDIAN = "median"
    """The trade-off paper's heuristic: the median unclipped per-example gradient norm of a
    warm-up."""


MEDIAN = ClipNormRule.MEDIAN.value


#: The clip norms taken: with z up to 1e6 (:attr:`Mechanism.param_range`), z * C <= 1e12 is far
#: inside float32, where the noise is drawn; 1e-6 is far below any gradient norm trained with.
CLIP_NORM_RANGE = (1e-6, 1e6)


def parse_clip_norm(value: Any, what: str = "clip norm") -> float | ClipNormRule:
    """A positive float, or :attr:`ClipNormRule.MEDIAN`; the ValueError quotes the bad value."""
    if isinstance(value, ClipNormRule):
        return value
    if isinstance(value, str) and value.strip().lower() == MEDIAN:
        return ClipNormRule.MEDIAN
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a positive number or 'median', got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(number) or number <= 0:
        raise ValueError(f"{what} must be a positive finite number or 'median', got {value!r}")
    low, high = CLIP_NORM_RANGE
    if not low <= number <= high:
        raise ValueError(
            f"{what} must lie in [{low:g}, {high:g}] (the noise std z * C stays a float32 "
            f"number for every noise multiplier z) or be 'median', got {value!r}"
        )
    return number


@dataclass(frozen=True)
class DpAdamOptions(MechanismOptions):
    """The options every DP-Adam mechanism reads (cdp, cdp-termwise, dp2vae): a target epsilon
    that replaces the grid, delta and the RDP-to-DP conversion."""

    mechanism: ClassVar[str] = "dp-adam"
    target_epsilon: float | None = option(
        "pick the noise multiplier that gives this epsilon (replaces the grid)",
        positive_float("target epsilon"),
        cli_type=float,
    )
    delta: float | None = option("delta (default 1/N_train)", delta_value, cli_type=float)
    conversion: Conversion | None = option(
        "RDP-to-DP conversion, improved (Opacus, the default) or classic (the trade-off paper)",
        choice(Conversion, "conversion"),
    )


@dataclass(frozen=True)
class ClippedAdamOptions(DpAdamOptions):
    """The options DP-Adam with a per-example term reads (``cdp`` and ``cdp-termwise``): the clip
    norm, and a divergence that only ``cdp-termwise`` accepts."""

    mechanism: ClassVar[str] = "dp-adam"
    clip_norm: float | ClipNormRule | None = option(
        f"per-example clip norm C, a number or 'median' (the trade-off paper's heuristic; default "
        f"{DEFAULT_CLIP_NORM:g})",
        parse_clip_norm,
    )
    divergence: Divergence | None = option(
        "batch-wise divergence: mmd (Cauchy kernel to N(0, I)), sparse (to PriVAE's sparse "
        "prior) or kl-prior (KL(p || q) to the model's prior, PriVAE's clustering task); cdp "
        "refuses one: it needs the term-wise noise of cdp-termwise",
        choice(Divergence, "divergence"),
    )
    alpha: float | None = option(
        "weight of the batch-wise divergence", non_negative_float("alpha"), cli_type=float
    )
