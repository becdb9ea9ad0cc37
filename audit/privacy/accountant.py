"""A stateful RDP accountant for training loops: Opacus's, read out under either conversion."""

from __future__ import annotations

from opacus.accountants import RDPAccountant

from audit.privacy.claim import Conversion
from audit.privacy.rdp import epsilon_from_history
from core.validation import check_delta, check_non_negative


class PrivacyAccountant:
    """Counts Poisson-sampled Gaussian releases; epsilon on demand.

    Wraps an Opacus ``RDPAccountant`` (``.opacus``), so it can be handed to Opacus code that
    expects one; the state is only its history of ``(noise_multiplier, sample_rate, steps)``.
    """

    def __init__(self) -> None:
        self.opacus = RDPAccountant()

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Record one sampled Gaussian release (validated before the state changes)."""
        check_non_negative("noise_multiplier", noise_multiplier)
        if not 0 <= sample_rate <= 1:
            raise ValueError(f"sample_rate must lie in [0, 1], got {sample_rate!r}")
        self.opacus.step(noise_multiplier=noise_multiplier, sample_rate=sample_rate)

    @property
    def steps(self) -> int:
        """Number of releases recorded so far."""
        return sum(n for _, _, n in self.opacus.history)

    def epsilon(self, *, delta: float, conversion: Conversion = Conversion.IMPROVED) -> float:
        """Epsilon spent so far at ``delta`` (0 before the first step)."""
        check_delta(delta)
        return epsilon_from_history(history=self.opacus.history, delta=delta, conversion=conversion)
