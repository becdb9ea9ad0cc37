"""The non-private reference run (the trade-off paper's 'original' trade-off point)."""

from __future__ import annotations

import math

from audit.config import CellConfig
from audit.mechanisms.mechanism import CellData, Mechanism, Trained
from audit.privacy.claim import PrivacyClaim


class NoPrivacy(Mechanism):
    name = "none"
    param_name = "none"
    default_grid = ()

    def validate_value(self, value: float | None) -> None:
        if value is not None:
            raise ValueError(f"mechanism 'none' takes no parameter, got {value!r}")

    def claim(self, cell: CellConfig, data: CellData, trained: Trained) -> PrivacyClaim:
        return PrivacyClaim(epsilon=math.inf, delta=0.0, method="none", accountant="none")
