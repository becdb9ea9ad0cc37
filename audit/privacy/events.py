"""What a mechanism releases, as small frozen data that :mod:`audit.privacy.accountant` reads.

Modelled on dp_accounting's ``DpEvent`` family (``GaussianDpEvent``, ``PoissonSampledDpEvent``,
``LaplaceDpEvent``, ``ComposedDpEvent`` / ``SelfComposedDpEvent``): an event only describes a
release; it holds no state and computes nothing. Every event validates itself on construction
and the error quotes the bad value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Event:
    """Base of the privacy events (not instantiated itself)."""

    def __init__(self) -> None:
        raise TypeError("Event is abstract; use one of GaussianEvent, PoissonSampledEvent, ...")


@dataclass(frozen=True)
class GaussianEvent(Event):
    """One Gaussian mechanism: noise std ``noise_std`` on a query of L2 sensitivity ``sensitivity``.

    ``GaussianEvent(z)`` is the sensitivity-1 Gaussian with noise multiplier z (DP-SGD's
    ``noise_multiplier``, dp_accounting's ``GaussianDpEvent(z)``). The sensitivity is kept
    rather than folded into the multiplier so that the single-Gaussian conversions compute
    ``sensitivity / noise_std`` exactly as written in their papers (and bit for bit as before).

    Attributes:
        noise_std: standard deviation of the added noise, finite and >= 0 (0: no privacy).
        sensitivity: L2 sensitivity of the query, finite and > 0 (default 1).
    """

    noise_std: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        if not _is_real(self.noise_std) or not 0 <= self.noise_std < math.inf:
            raise ValueError(
                f"GaussianEvent noise_std must be a finite number >= 0, got {self.noise_std!r}"
            )
        if not _is_real(self.sensitivity) or not 0 < self.sensitivity < math.inf:
            raise ValueError(
                f"GaussianEvent sensitivity must be a finite number > 0, got {self.sensitivity!r}"
            )

    @property
    def noise_multiplier(self) -> float:
        """Noise std over the sensitivity (exactly ``noise_std`` when the sensitivity is 1)."""
        return self.noise_std / self.sensitivity


@dataclass(frozen=True)
class PoissonSampledEvent(Event):
    """``event`` applied to a Poisson sample of the data: each record kept with ``sample_rate``.

    Attributes:
        sample_rate: the sampling probability q in [0, 1].
        event: the release made on the sample.
    """

    sample_rate: float
    event: Event

    def __post_init__(self) -> None:
        if not _is_real(self.sample_rate) or not 0 <= self.sample_rate <= 1:
            raise ValueError(
                f"PoissonSampledEvent sample_rate must lie in [0, 1], got {self.sample_rate!r}"
            )
        if not isinstance(self.event, Event):
            raise ValueError(f"PoissonSampledEvent event must be an Event, got {self.event!r}")


@dataclass(frozen=True)
class LaplaceEvent(Event):
    """A pure epsilon-DP release (the Laplace mechanism: epsilon = L1 sensitivity / scale).

    Attributes:
        epsilon: its epsilon, finite and > 0.
    """

    epsilon: float

    def __post_init__(self) -> None:
        if not _is_real(self.epsilon) or not 0 < self.epsilon < math.inf:
            raise ValueError(
                f"LaplaceEvent epsilon must be a finite number > 0, got {self.epsilon!r}"
            )


@dataclass(frozen=True)
class ComposedEvent(Event):
    """Sequential composition: each ``(event, count)`` pair is ``event`` released ``count`` times.

    Attributes:
        events: a non-empty tuple of ``(event, count)`` pairs, count an integer >= 1 (a list is
            stored as a tuple).
    """

    events: tuple[tuple[Event, int], ...]

    def __post_init__(self) -> None:
        if not isinstance(self.events, (tuple, list)) or not self.events:
            raise ValueError(
                f"ComposedEvent events must be a non-empty sequence of (event, count) pairs, "
                f"got {self.events!r}"
            )
        for pair in self.events:
            if not isinstance(pair, tuple) or len(pair) != 2 or not isinstance(pair[0], Event):
                raise ValueError(
                    f"ComposedEvent events must hold (event, count) pairs, got {pair!r}"
                )
            count = pair[1]
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ValueError(
                    f"ComposedEvent count must be an integer >= 1, got {count!r} for {pair[0]!r}"
                )
        object.__setattr__(self, "events", tuple(self.events))


def repeated(event: Event, count: int) -> ComposedEvent:
    """``event`` released ``count`` times (dp_accounting's ``SelfComposedDpEvent``)."""
    return ComposedEvent(((event, count),))
