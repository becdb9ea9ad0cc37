"""Group privacy of an RDP claim (input canaries inserted k times)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from audit.privacy.accountant import rdp, rdp_epsilon
from audit.privacy.dp_sgd_accounting import dp_sgd_event
from audit.privacy.events import GaussianEvent
from audit.privacy.group import (
    group_epsilon_delta,
    group_exponent,
    group_rdp_curve,
    group_rdp_epsilon,
)
from audit.privacy.rdp import RDP_ORDERS

EVENT = dp_sgd_event(n_train=82, batch_size=16, epochs=40, noise_multiplier=3.0)


def test_a_group_of_one_is_the_claim() -> None:
    assert group_rdp_epsilon(EVENT, 1, delta=1e-5) == rdp_epsilon(EVENT, delta=1e-5)[0]


def test_mironov_proposition_2_on_the_curve() -> None:
    # group of 4 = 2^2: (alpha / 4, 9 eps(alpha)) at every order alpha >= 8
    orders, curve = group_rdp_curve(EVENT, 4)
    full = dict(zip(RDP_ORDERS, rdp(EVENT), strict=True))
    assert orders.min() == 2.0 and len(orders) == sum(a >= 8 for a in RDP_ORDERS)
    assert all(c == pytest.approx(9 * full[4 * a]) for a, c in zip(orders, curve, strict=True))
    assert [group_exponent(k) for k in (1, 2, 3, 4, 5, 8, 9)] == [0, 1, 2, 2, 3, 3, 4]
    assert group_rdp_curve(EVENT, 3)[1] == pytest.approx(group_rdp_curve(EVENT, 4)[1])


@pytest.mark.parametrize("z", [2.0, 5.0, 20.0])
@pytest.mark.parametrize("k", [2, 4])
def test_group_claim_bounds_the_exact_gaussian_group_claim(z: float, k: int) -> None:
    # a Gaussian mechanism of sensitivity 1 and multiplier z is, for k records, exactly the
    # Gaussian of multiplier z / k: the group claim must not be below it (a valid upper bound),
    # and Mironov's bound is within a factor of 3^c / (k^2 / 2^c) = 1.5 (k = 2) or 2.25 (k = 4)
    # in RDP (less in epsilon)
    exact = rdp_epsilon(GaussianEvent(z / k), delta=1e-5)[0]
    group = group_rdp_epsilon(GaussianEvent(z), k, delta=1e-5)
    assert exact <= group <= 2.25 * exact + 1e-9


def test_group_claim_grows_with_k() -> None:
    values = [group_rdp_epsilon(EVENT, k, delta=1e-5) for k in (1, 2, 4, 8)]
    assert np.all(np.diff(values) > 0)
    # measured: z = 3, N = 82, 40 epochs: 4.67 for one record, 47.4 for four
    assert values[0] == pytest.approx(4.67, abs=0.01) and values[2] == pytest.approx(47.4, abs=0.1)


def test_conservative_epsilon_delta_group() -> None:
    assert group_epsilon_delta(2.0, 1e-5, 3) == (6.0, pytest.approx(3 * math.exp(4.0) * 1e-5))
    assert group_epsilon_delta(20.0, 1e-5, 2)[1] == 1.0  # capped: no guarantee at all
    with pytest.raises(ValueError, match="group size"):
        group_epsilon_delta(1.0, 1e-5, 0)
