import math

import numpy as np
import pytest
from opacus.accountants import RDPAccountant
from opacus.accountants.analysis import rdp as opacus_rdp

from audit.privacy import (
    RDP_ORDERS,
    ComposedEvent,
    Conversion,
    GaussianConversion,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    epsilon,
    gaussian_epsilon,
    pure_epsilon,
    rdp,
    rdp_epsilon,
    repeated,
)
from audit.privacy.rdp import OPACUS_DEFAULT_ORDERS

STEP = PoissonSampledEvent(32 / 926, GaussianEvent(1.0))


def test_orders_start_with_opacus_defaults():
    # Written out to keep audit.privacy from importing Opacus's accountant classes (and torch).
    assert list(OPACUS_DEFAULT_ORDERS) == RDPAccountant.DEFAULT_ALPHAS
    assert RDP_ORDERS[: len(OPACUS_DEFAULT_ORDERS)] == tuple(map(float, OPACUS_DEFAULT_ORDERS))


def test_sampled_gaussian_rdp_is_opacus_compute_rdp():
    expected = opacus_rdp.compute_rdp(
        q=32 / 926, noise_multiplier=1.0, steps=28938, orders=list(RDP_ORDERS)
    )
    assert np.array_equal(rdp(repeated(STEP, 28938)), expected)  # bit for bit


def test_unsampled_gaussian_rdp_is_the_closed_form():
    # Mironov 2017, Prop. 7: the Gaussian with sensitivity 1 and std z has RDP a / (2 z^2).
    np.testing.assert_allclose(rdp(GaussianEvent(2.0)), np.array(RDP_ORDERS) / 8, rtol=1e-15)
    assert rdp(GaussianEvent(6.0, 3.0)).tolist() == rdp(GaussianEvent(2.0)).tolist()


@pytest.mark.parametrize("conversion", list(Conversion))
def test_k_identical_events_equal_one_event_with_count_k(conversion):
    listed = ComposedEvent(((STEP, 1),) * 5)
    counted = repeated(STEP, 5)
    np.testing.assert_allclose(rdp(listed), rdp(counted), rtol=1e-14)
    assert rdp_epsilon(listed, delta=1e-5, conversion=conversion)[0] == pytest.approx(
        rdp_epsilon(counted, delta=1e-5, conversion=conversion)[0], rel=1e-12
    )


def test_composition_adds_rdp_and_nesting_multiplies_counts():
    other = PoissonSampledEvent(0.05, GaussianEvent(2.0))
    both = ComposedEvent(((STEP, 100), (other, 30)))
    np.testing.assert_allclose(rdp(both), 100 * rdp(STEP) + 30 * rdp(other), rtol=1e-14)
    nested = repeated(ComposedEvent(((STEP, 10), (other, 3))), 10)
    np.testing.assert_allclose(rdp(nested), rdp(both), rtol=1e-14)
    assert rdp_epsilon(both, delta=1e-5)[0] > rdp_epsilon(repeated(STEP, 100), delta=1e-5)[0]


def test_no_noise_is_no_privacy():
    eps, order = rdp_epsilon(repeated(PoissonSampledEvent(0.1, GaussianEvent(0.0)), 3), delta=1e-5)
    assert math.isinf(eps) and math.isnan(order)


def test_laplace_composition_sums():
    event = ComposedEvent(((LaplaceEvent(0.5), 3), (repeated(LaplaceEvent(0.25), 2), 4)))
    assert pure_epsilon(event) == 0.5 * 3 + 0.25 * 2 * 4
    assert pure_epsilon(ComposedEvent(((LaplaceEvent(0.1), 1),) * 7)) == pytest.approx(0.7)
    assert pure_epsilon(repeated(LaplaceEvent(0.1), 7)) == pytest.approx(0.7)
    assert epsilon(event) == pure_epsilon(event)  # delta plays no part


def test_single_gaussian_conversions():
    event = GaussianEvent(0.1, 60.0)  # VAE-LDP, sigma 0.1, d = 100 (sensitivity 2 * 3 * 10)
    classic = gaussian_epsilon(event, delta=5.2466e-4, conversion="classic")
    # The trade-off paper's formula, by hand: 60 sqrt(2 ln(1.25 / delta)) / 0.1.
    assert classic == 60 * math.sqrt(2 * math.log(1.25 / 5.2466e-4)) / 0.1
    analytic = epsilon(event, delta=5.2466e-4, conversion=GaussianConversion.ANALYTIC)
    assert analytic == gaussian_epsilon(event, delta=5.2466e-4)  # ANALYTIC is the default
    assert analytic > classic  # far outside the classic formula's validity (eps < 1)


def test_dispatch_defaults_to_rdp():
    event = repeated(STEP, 10)
    assert epsilon(event, delta=1e-5) == rdp_epsilon(event, delta=1e-5)[0]
    assert epsilon(event, delta=1e-5, conversion="classic") == pytest.approx(
        rdp_epsilon(event, delta=1e-5, conversion=Conversion.CLASSIC)[0]
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rdp(LaplaceEvent(1.0)), "RDP is not defined for LaplaceEvent"),
        (
            lambda: rdp(PoissonSampledEvent(0.5, repeated(GaussianEvent(1.0), 2))),
            "allowed: a PoissonSampledEvent of a GaussianEvent",
        ),
        (lambda: pure_epsilon(GaussianEvent(1.0)), "pure epsilon-DP is not defined"),
        (lambda: gaussian_epsilon(STEP, delta=1e-5), "one GaussianEvent"),
        (lambda: rdp_epsilon(STEP, delta=0.0), "delta .* got 0.0"),
        (lambda: rdp_epsilon(STEP, delta=1e-5, conversion="tight"), "classic, improved"),
    ],
)
def test_events_the_accountant_cannot_read_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
