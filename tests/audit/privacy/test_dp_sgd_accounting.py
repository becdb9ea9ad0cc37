import math

import pytest

from audit.privacy import (
    ComposedEvent,
    Conversion,
    GaussianEvent,
    PoissonSampledEvent,
    cdp_claim,
    dp_sgd_epsilon,
    noise_multiplier_for_epsilon,
    rdp_epsilon,
)
from dpvae_core.schedule import dp_sgd_steps

# The trade-off paper, Table 2 (CDP, z = 1, batch 32, 1000 epochs, delta = 1/N_train, classic
# conversion).
TABLE2_Z1 = [(926, 56.41), (1375, 43.31), (7042, 15.73)]
# The trade-off paper, Table 2, MotionSense row (every column batch 32, 1000 epochs, N_train =
# 7042).
TABLE2_MS = [(0.001, 120986947509.93), (0.01, 1196947509.93), (0.1, 1093201.38), (0.5, 137.57)]


def _eps(n_train, conversion, z=1.0, batch_size=32, epochs=1000):
    return dp_sgd_epsilon(
        n_train=n_train,
        batch_size=batch_size,
        epochs=epochs,
        noise_multiplier=z,
        delta=1 / n_train,
        conversion=conversion,
    )


@pytest.mark.parametrize(("n_train", "expected"), TABLE2_Z1)
def test_table2_classic_within_one_percent(n_train, expected):
    assert _eps(n_train, Conversion.CLASSIC) == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize(("z", "expected"), TABLE2_MS)
def test_table2_motionsense_row_classic(z, expected):
    assert _eps(7042, "classic", z=z) == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize(("n_train", "_"), TABLE2_Z1)
def test_improved_conversion_never_exceeds_classic(n_train, _):
    assert _eps(n_train, Conversion.IMPROVED) <= _eps(n_train, Conversion.CLASSIC)


def test_step_convention_is_ceil_of_total_examples_over_batch():
    assert dp_sgd_steps(n_train=926, batch_size=32, epochs=1000) == 28938
    assert dp_sgd_steps(n_train=64, batch_size=32, epochs=3) == 6


def test_epsilon_decreases_with_noise_and_zero_noise_is_no_privacy():
    values = [_eps(926, "improved", z=z) for z in (0.5, 1.0, 2.0, 4.0)]
    assert values == sorted(values, reverse=True)
    assert math.isinf(_eps(926, "improved", z=0.0))


@pytest.mark.parametrize("conversion", list(Conversion))
@pytest.mark.parametrize("target", [1.0, 56.41])
def test_noise_search_round_trips(conversion, target):
    z = noise_multiplier_for_epsilon(
        target_epsilon=target,
        n_train=926,
        batch_size=32,
        epochs=1000,
        delta=1 / 926,
        conversion=conversion,
    )
    eps = _eps(926, conversion, z=z)
    assert eps <= target
    assert eps == pytest.approx(target, rel=1e-4)


def test_noise_search_recovers_table2_noise_multiplier():
    z = noise_multiplier_for_epsilon(
        target_epsilon=_eps(1375, "classic"),
        n_train=1375,
        batch_size=32,
        epochs=1000,
        delta=1 / 1375,
        conversion="classic",
    )
    assert z == pytest.approx(1.0, rel=1e-4)


def test_unreachable_target_is_a_clear_error():
    with pytest.raises(ValueError, match=r"target_epsilon 0\.001 is unreachable"):
        noise_multiplier_for_epsilon(
            target_epsilon=0.001,
            n_train=926,
            batch_size=32,
            epochs=1000,
            delta=1 / 926,
            conversion="classic",
        )


GOOD = {"n_train": 926, "batch_size": 32, "epochs": 10, "noise_multiplier": 1.0, "delta": 1e-3}


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("delta", 0.0),
        ("delta", 1.0),
        ("delta", -1e-5),
        ("delta", math.nan),
        ("noise_multiplier", -1.0),
        ("noise_multiplier", math.nan),
        ("batch_size", 0),
        ("batch_size", -3),
        ("batch_size", 1000),
        ("epochs", 0),
        ("epochs", -1),
        ("n_train", 0),
        ("n_train", 2.5),
    ],
)
def test_bad_inputs_raise_value_error_quoting_the_value(field, bad):
    with pytest.raises(ValueError, match=f"{bad!r}".replace(".", r"\.").replace("-", r"\-")):
        dp_sgd_epsilon(**{**GOOD, field: bad})


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_bad_target_epsilon_is_refused(bad):
    with pytest.raises(ValueError, match="target_epsilon"):
        noise_multiplier_for_epsilon(
            target_epsilon=bad, n_train=926, batch_size=32, epochs=10, delta=1e-3
        )


def test_unknown_conversion_lists_the_valid_ones():
    with pytest.raises(ValueError, match="classic, improved"):
        dp_sgd_epsilon(**GOOD, conversion="tight")


def test_claim_defaults_to_delta_one_over_n_and_keeps_both_conversions():
    claim = cdp_claim(
        n_train=926, batch_size=32, epochs=1000, noise_multiplier=1.0, conversion="classic"
    )
    assert claim.delta == pytest.approx(1 / 926)
    assert claim.method == "opacus-rdp/classic"
    assert claim.epsilon == claim.extra["epsilon_classic"] == pytest.approx(56.41, rel=0.01)
    assert claim.extra["epsilon_improved"] < claim.epsilon
    assert claim.extra["steps"] == 28938


def test_claim_carries_the_event_it_accounted():
    claim = cdp_claim(n_train=926, batch_size=32, epochs=1000, noise_multiplier=1.0)
    step = PoissonSampledEvent(32 / 926, GaussianEvent(1.0))
    assert claim.event == ComposedEvent(((step, 28938),))
    for conversion in Conversion:
        eps, order = rdp_epsilon(claim.event, delta=1 / 926, conversion=conversion)
        assert eps == claim.extra[f"epsilon_{conversion.value}"]  # the very same number
    assert claim.extra["rdp_order"] == order
