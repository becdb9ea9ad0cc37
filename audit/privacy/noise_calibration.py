"""Find the smallest noise multiplier whose epsilon meets a target (any decreasing accountant)."""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy import optimize

from dpvae_core.validation import check_positive

#: Search range for noise multipliers; Opacus's ``get_noise_multiplier`` stops at 1e6 too.
MIN_NOISE_MULTIPLIER = 1e-4
MAX_NOISE_MULTIPLIER = 1e6


def calibrate_noise_multiplier(
    epsilon_of: Callable[[float], float], *, target_epsilon: float, rtol: float = 1e-6
) -> float:
    """The smallest z (to relative tolerance ``rtol``) with ``epsilon_of(z) <= target_epsilon``.

    ``epsilon_of`` must decrease in z. The returned z always satisfies the target (the search
    keeps the upper end of its bracket), so the claim made with it is never optimistic.

    Raises:
        ValueError: if the target is not positive and finite, or is unreachable within
            [1e-4, 1e6] (the smallest reachable epsilon is quoted).
    """
    check_positive("target_epsilon", target_epsilon)
    check_positive("rtol", rtol)
    floor = epsilon_of(MAX_NOISE_MULTIPLIER)
    if floor > target_epsilon:
        raise ValueError(
            f"target_epsilon {target_epsilon!r} is unreachable: even noise multiplier "
            f"{MAX_NOISE_MULTIPLIER:g} gives epsilon {floor:.6g} at this delta and schedule; "
            "raise the target or delta, or shorten training"
        )
    if epsilon_of(MIN_NOISE_MULTIPLIER) <= target_epsilon:
        raise ValueError(
            f"target_epsilon {target_epsilon!r} is so large that noise multiplier "
            f"{MIN_NOISE_MULTIPLIER:g} already meets it; use an explicit noise multiplier"
        )

    def gap(log_z: float) -> float:
        eps = min(max(epsilon_of(math.exp(log_z)), 1e-300), 1e300)  # finite logs for brentq
        return math.log(eps) - math.log(target_epsilon)

    log_z = optimize.brentq(
        gap, math.log(MIN_NOISE_MULTIPLIER), math.log(MAX_NOISE_MULTIPLIER), xtol=rtol / 4
    )
    z = math.exp(log_z)
    while epsilon_of(z) > target_epsilon:
        z *= 1 + rtol / 4
    return z
