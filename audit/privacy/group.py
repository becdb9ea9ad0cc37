"""Group privacy of an RDP claim: what a claim says about datasets that differ in k records.

An input canary inserted k times (``copies``) makes the datasets with and without it differ in k
records, so a bound from such canaries is compared with the group claim for k, never with the
single-record claim.

:func:`group_rdp_epsilon` uses Mironov 2017 ("Renyi differential privacy"), Proposition 2: if a
mechanism is (alpha, eps)-RDP for neighbouring datasets and alpha >= 2^(c+1), it is
(alpha / 2^c, 3^c eps)-RDP for datasets that differ in 2^c records (add/remove). Applied to the
whole training's RDP curve (its composition over every step), at each of ``RDP_ORDERS`` with
alpha >= 2^(c+1), then converted to (eps, delta) as the claim is (Opacus's ``get_privacy_spent``).
k that is not a power of two is rounded up to the next one (a group of k is a subgroup of 2^c).

:func:`group_epsilon_delta` is the conservative (eps, delta) route for comparison: (k eps,
k e^((k-1) eps) delta) (Dwork and Roth, Theorem 2.2 with delta; Vadhan's Lemma 2.2 form).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from opacus.accountants.analysis import rdp as opacus_rdp

from audit.privacy.accountant import rdp
from audit.privacy.events import Event
from audit.privacy.rdp import RDP_ORDERS
from dpvae_core.validation import check_delta


def group_exponent(k: int) -> int:
    """c with 2^c the smallest power of two >= k."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"group size must be an integer >= 1, got {k!r}")
    return (k - 1).bit_length()


def group_rdp_curve(event: Event, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(orders, RDP) for groups of k records: Mironov's Prop. 2 on ``event``'s RDP curve."""
    c = group_exponent(k)
    orders = np.asarray(RDP_ORDERS)
    curve = rdp(event)
    keep = orders >= 2 ** (c + 1) if c else np.ones(len(orders), dtype=bool)
    return orders[keep] / 2**c, curve[keep] * 3**c


def group_rdp_epsilon(event: Event, k: int, *, delta: float) -> float:
    """The epsilon at ``delta`` that ``event`` (an RDP-accounted training) guarantees for
    datasets that differ in k records (k = 1: the claim itself)."""
    check_delta(delta)
    orders, curve = group_rdp_curve(event, k)
    if np.isinf(curve).all():
        return math.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eps, _ = opacus_rdp.get_privacy_spent(orders=orders, rdp=curve, delta=delta)
    return max(float(eps), 0.0)


def group_epsilon_delta(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """The conservative group guarantee of an (epsilon, delta) claim for k records."""
    group_exponent(k)
    return k * epsilon, min(1.0, k * math.exp((k - 1) * epsilon) * delta)
