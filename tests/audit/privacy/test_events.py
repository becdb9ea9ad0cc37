import math

import pytest

from audit.privacy import (
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    repeated,
)


def _quoted(value: object) -> str:
    """A regex matching ``repr(value)`` literally."""
    return "".join("\\" + c if c in ".-+()[]{}*?^$|\\" else c for c in repr(value))


def test_events_are_frozen_and_hashable():
    event = PoissonSampledEvent(0.1, GaussianEvent(2.0))
    with pytest.raises(AttributeError):
        event.sample_rate = 0.2  # type: ignore[misc]
    assert hash(event) == hash(PoissonSampledEvent(0.1, GaussianEvent(2.0)))


def test_gaussian_noise_multiplier_is_std_over_sensitivity():
    assert GaussianEvent(1.5).noise_multiplier == 1.5
    assert GaussianEvent(3.0, 2.0).noise_multiplier == 1.5
    assert GaussianEvent(0.0).noise_multiplier == 0.0  # no noise: allowed, no privacy


def test_the_base_event_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        Event()


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, "1", True, None])
def test_gaussian_noise_std_is_validated(bad):
    with pytest.raises(ValueError, match=f"noise_std .* got {_quoted(bad)}"):
        GaussianEvent(bad)


@pytest.mark.parametrize("bad", [0.0, -2.0, math.nan, math.inf])
def test_gaussian_sensitivity_is_validated(bad):
    with pytest.raises(ValueError, match=f"sensitivity .* got {_quoted(bad)}"):
        GaussianEvent(1.0, bad)


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, "0.5"])
def test_sample_rate_is_validated(bad):
    with pytest.raises(ValueError, match=f"sample_rate .* got {_quoted(bad)}"):
        PoissonSampledEvent(bad, GaussianEvent(1.0))


def test_sampled_event_must_wrap_an_event():
    with pytest.raises(ValueError, match="got 1.0"):
        PoissonSampledEvent(0.5, 1.0)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_laplace_epsilon_is_validated(bad):
    with pytest.raises(ValueError, match=f"epsilon .* got {_quoted(bad)}"):
        LaplaceEvent(bad)


@pytest.mark.parametrize("bad", [0, -3, 2.0, True])
def test_composed_count_is_validated(bad):
    with pytest.raises(ValueError, match=f"count .* got {_quoted(bad)}"):
        ComposedEvent(((LaplaceEvent(1.0), bad),))


@pytest.mark.parametrize("bad", [(), [], ((LaplaceEvent(1.0),),), ((1.0, 2),), "events"])
def test_composed_pairs_are_validated(bad):
    with pytest.raises(ValueError, match="ComposedEvent events must"):
        ComposedEvent(bad)


def test_composed_stores_a_list_as_a_tuple_and_repeated_is_one_pair():
    event = ComposedEvent([(LaplaceEvent(1.0), 3)])
    assert event.events == ((LaplaceEvent(1.0), 3),)
    assert repeated(LaplaceEvent(1.0), 3) == event
