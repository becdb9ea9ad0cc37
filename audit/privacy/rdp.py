"""RDP of the Poisson-sampled Gaussian mechanism (Opacus) and its conversion to (epsilon, delta).

Pure functions: the RDP values come from Opacus's ``compute_rdp`` (Mironov, Talwar and Zhang
2019); this module only chooses the orders and applies one of the two conversions.
"""

from __future__ import annotations

import logging
import math
import warnings

import numpy as np
from opacus.accountants.analysis import rdp as opacus_rdp

from audit.privacy.claim import Conversion
from dpvae_core.validation import (
    check_delta,
    check_non_negative,
    check_positive_int,
    parse_enum,
)

logger = logging.getLogger(__name__)

#: Opacus's default orders (``RDPAccountant.DEFAULT_ALPHAS``, 1.1 .. 63, written out here so this
#: module does not import Opacus's accountant classes and with them torch) extended upwards so
#: that large noise multipliers (small epsilon) do not end at the largest order; the lower end is
#: Opacus's, which the trade-off paper's TensorFlow Privacy orders share, so the huge epsilons of
#: tiny noise match its Table 2.
OPACUS_DEFAULT_ORDERS: tuple[float, ...] = (
    *[1 + x / 10.0 for x in range(1, 100)],
    *range(12, 64),
)
RDP_ORDERS: tuple[float, ...] = tuple(
    float(a) for a in [*OPACUS_DEFAULT_ORDERS, 64, 80, 96, 128, 192, 256, 384, 512, 1024]
)


def sampled_gaussian_rdp(*, sample_rate: float, noise_multiplier: float, steps: int) -> np.ndarray:
    """RDP at each of ``RDP_ORDERS`` of ``steps`` Poisson-sampled Gaussian releases.

    Args:
        sample_rate: Poisson sampling probability q in [0, 1].
        noise_multiplier: noise std over the L2 sensitivity (add/remove one record), >= 0;
            0 means no noise and gives infinite RDP.
        steps: number of releases composed.
    """
    if not 0 <= sample_rate <= 1:
        raise ValueError(f"sample_rate must lie in [0, 1], got {sample_rate!r}")
    check_non_negative("noise_multiplier", noise_multiplier)
    check_positive_int("steps", steps)
    rdp = opacus_rdp.compute_rdp(
        q=sample_rate, noise_multiplier=noise_multiplier, steps=steps, orders=list(RDP_ORDERS)
    )
    return np.asarray(rdp, dtype=float)


def rdp_to_epsilon(*, rdp: np.ndarray, delta: float, conversion: Conversion) -> tuple[float, float]:
    """(epsilon, optimal order) for an RDP curve given at ``RDP_ORDERS``.

    CLASSIC is ``min_a rdp(a) + log(1/delta)/(a - 1)``; IMPROVED is Opacus's
    ``get_privacy_spent``. Infinite RDP everywhere gives ``(inf, nan)``.
    """
    check_delta(delta)
    orders = np.asarray(RDP_ORDERS)
    rdp = np.asarray(rdp, dtype=float)
    if rdp.shape != orders.shape:
        raise ValueError(
            f"rdp must have one value per order ({orders.size}), got shape {rdp.shape}"
        )
    if np.isinf(rdp).all():
        return math.inf, math.nan
    if parse_enum(Conversion, conversion, "conversion") is Conversion.CLASSIC:
        eps = rdp + math.log(1 / delta) / (orders - 1)
        idx = int(np.nanargmin(eps))
        eps_opt, order = float(eps[idx]), float(orders[idx])
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the edge-order warning is logged below instead
            eps_opt, order = opacus_rdp.get_privacy_spent(orders=orders, rdp=rdp, delta=delta)
        eps_opt, order = float(eps_opt), float(order)
    if order in (orders[0], orders[-1]):
        logger.info("optimal RDP order %s is at the end of the order range", order)
    return max(eps_opt, 0.0), order
