"""What a mechanism claims about privacy, and the named ways an epsilon can be computed."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from audit.privacy.events import Event


class Conversion(str, Enum):
    """How an RDP curve becomes an (epsilon, delta) guarantee.

    CLASSIC: ``eps = min_a rdp(a) + log(1/delta) / (a - 1)`` (Mironov 2017, Prop. 3), the
    conversion TensorFlow Privacy used for the trade-off paper's Table 2.
    IMPROVED: Opacus's ``get_privacy_spent`` (Balle et al. 2020, Thm. 21), never larger.
    """

    CLASSIC = "classic"
    IMPROVED = "improved"


class GaussianConversion(str, Enum):
    """How a (non-sampled) Gaussian mechanism's noise becomes an epsilon.

    CLASSIC: ``eps = Delta * sqrt(2 ln(1.25/delta)) / sigma`` (Dwork and Roth, Thm. A.1), the
    formula the trade-off paper reports; a valid guarantee only where it gives eps < 1.
    ANALYTIC: the exact (smallest) epsilon of Balle and Wang 2018, Theorem 8; valid for every eps.
    """

    CLASSIC = "classic"
    ANALYTIC = "analytic"


@dataclass(frozen=True)
class PrivacyClaim:
    """The (epsilon, delta) a run claims and how it was obtained.

    Attributes:
        epsilon: the guarantee's epsilon, >= 0; ``math.inf`` means no privacy.
        delta: in [0, 1); 0 for pure epsilon-DP (the Laplace mechanisms).
        method: how epsilon was computed, e.g. ``"opacus-rdp/classic"``.
        accountant: the accounting framework, e.g. ``"rdp"``, ``"gaussian"``, ``"ldp-composition"``.
        extra: further named numbers or notes (``eps_i``, ``epsilon_analytic``, ...); read-only.
        event: what was accounted (:mod:`audit.privacy.events`), for a reader; ``None`` when the
            claim was not built from events (no privacy, a claim read back). Not in
            :meth:`to_dict`.
    """

    epsilon: float
    delta: float
    method: str
    accountant: str
    extra: Mapping[str, float | str] = field(default_factory=dict, hash=False)
    event: Event | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        eps = self.epsilon
        if not isinstance(eps, (int, float)) or isinstance(eps, bool) or math.isnan(eps) or eps < 0:
            raise ValueError(f"epsilon must be a number >= 0 (inf for no privacy), got {eps!r}")
        if not isinstance(self.delta, (int, float)) or not 0 <= self.delta < 1:
            raise ValueError(f"delta must lie in [0, 1), got {self.delta!r}")
        for name in ("method", "accountant"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        for key, value in self.extra.items():
            if not isinstance(key, str) or not isinstance(value, (int, float, str)):
                raise ValueError(
                    f"extra must map strings to numbers or strings, got {key!r}: {value!r}"
                )
        if self.event is not None and not isinstance(self.event, Event):
            raise ValueError(f"event must be an Event or None, got {self.event!r}")
        object.__setattr__(self, "epsilon", float(eps))
        object.__setattr__(self, "delta", float(self.delta))
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))

    def to_dict(self) -> dict[str, float | str]:
        """A flat dict (``extra`` keys prefixed ``extra.``), ready for JSON or a CSV row."""
        row: dict[str, float | str] = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "method": self.method,
            "accountant": self.accountant,
        }
        row.update({f"extra.{k}": v for k, v in self.extra.items()})
        return row
