"""The one reader of privacy events (:mod:`audit.privacy.events`): event -> (epsilon, delta).

Three interpretations, each of a fixed family of events:

- RDP (:func:`rdp`, :func:`rdp_epsilon`): Gaussian and Poisson-sampled Gaussian releases and their
  compositions, at ``RDP_ORDERS`` via Opacus's analysis (:mod:`audit.privacy.rdp`), converted
  with a :class:`~audit.privacy.claim.Conversion`.
- One Gaussian mechanism at delta (:func:`gaussian_epsilon`): the classic formula or the exact
  analytic one (:mod:`audit.privacy.gaussian`), a :class:`~audit.privacy.claim.GaussianConversion`.
- Pure epsilon-DP (:func:`pure_epsilon`): Laplace releases and their compositions, epsilons
  adding up (sequential composition).

:func:`epsilon` picks among them by the conversion asked for and the events' kind.
"""

from __future__ import annotations

import numpy as np

from audit.privacy.claim import Conversion, GaussianConversion
from audit.privacy.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
)
from audit.privacy.gaussian import gaussian_epsilon_analytic, gaussian_epsilon_classic
from audit.privacy.rdp import RDP_ORDERS, rdp_to_epsilon, sampled_gaussian_rdp
from dpvae_core.validation import check_delta, parse_enum


def _refuse(event: Event, what: str, allowed: str) -> ValueError:
    return ValueError(f"{what} is not defined for {event!r}; allowed: {allowed}")


def rdp(event: Event) -> np.ndarray:
    """RDP of ``event`` at each of ``RDP_ORDERS`` (add/remove-one adjacency).

    A GaussianEvent is the sampled Gaussian with rate 1; a PoissonSampledEvent must wrap a
    GaussianEvent; a ComposedEvent sums ``count * rdp(event)`` over its pairs, in order.

    Raises:
        ValueError: for an event with no RDP here (a Laplace event, a sampled composition).
    """
    if isinstance(event, GaussianEvent):
        return sampled_gaussian_rdp(
            sample_rate=1.0, noise_multiplier=event.noise_multiplier, steps=1
        )
    if isinstance(event, PoissonSampledEvent):
        if not isinstance(event.event, GaussianEvent):
            raise _refuse(event, "RDP", "a PoissonSampledEvent of a GaussianEvent")
        return sampled_gaussian_rdp(
            sample_rate=event.sample_rate, noise_multiplier=event.event.noise_multiplier, steps=1
        )
    if isinstance(event, ComposedEvent):
        total = np.zeros(len(RDP_ORDERS))
        for inner, count in event.events:
            total = total + rdp(inner) * count
        return total
    raise _refuse(event, "RDP", "Gaussian, Poisson-sampled Gaussian and composed events")


def rdp_epsilon(
    event: Event, *, delta: float, conversion: Conversion | str = Conversion.IMPROVED
) -> tuple[float, float]:
    """(epsilon, optimal RDP order) of ``event`` at ``delta``; ``(inf, nan)`` without noise."""
    check_delta(delta)
    conversion = parse_enum(Conversion, conversion, "conversion")
    return rdp_to_epsilon(rdp=rdp(event), delta=delta, conversion=conversion)


def gaussian_epsilon(
    event: GaussianEvent,
    *,
    delta: float,
    conversion: GaussianConversion | str = GaussianConversion.ANALYTIC,
) -> float:
    """Epsilon at ``delta`` of one (unsampled, uncomposed) Gaussian mechanism.

    ANALYTIC is the smallest valid epsilon (Balle and Wang 2018, Theorem 8); CLASSIC is
    ``sensitivity * sqrt(2 ln(1.25/delta)) / noise_std``, a bound only where it is below 1.
    The noise std must be > 0.
    """
    if not isinstance(event, GaussianEvent):
        raise _refuse(event, "a single-Gaussian conversion", "one GaussianEvent")
    conversion = parse_enum(GaussianConversion, conversion, "conversion")
    formula = (
        gaussian_epsilon_classic
        if conversion is GaussianConversion.CLASSIC
        else gaussian_epsilon_analytic
    )
    return formula(sigma=event.noise_std, sensitivity=event.sensitivity, delta=delta)


def pure_epsilon(event: Event) -> float:
    """Epsilon (delta = 0) of Laplace releases: composition adds ``count * epsilon``, in order."""
    if isinstance(event, LaplaceEvent):
        return event.epsilon
    if isinstance(event, ComposedEvent):
        return sum(pure_epsilon(inner) * count for inner, count in event.events)
    raise _refuse(event, "pure epsilon-DP", "Laplace events and their compositions")


def _is_pure(event: Event) -> bool:
    if isinstance(event, ComposedEvent):
        return all(_is_pure(inner) for inner, _ in event.events)
    return isinstance(event, LaplaceEvent)


def epsilon(
    event: Event,
    *,
    delta: float = 0.0,
    conversion: Conversion | GaussianConversion | str = Conversion.IMPROVED,
) -> float:
    """Epsilon of any event this module reads.

    Laplace events (and compositions of them only) give :func:`pure_epsilon` for every delta;
    a GaussianConversion asks for :func:`gaussian_epsilon`; otherwise :func:`rdp_epsilon` with
    the RDP ``conversion`` (a string names a Conversion).
    """
    if _is_pure(event):
        return pure_epsilon(event)
    if isinstance(conversion, GaussianConversion):
        return gaussian_epsilon(event, delta=delta, conversion=conversion)
    return rdp_epsilon(event, delta=delta, conversion=conversion)[0]
