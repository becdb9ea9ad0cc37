"""Checks at the boundary of the privacy layer: each raises a ValueError quoting the bad value."""

from __future__ import annotations

import math
from enum import Enum
from typing import TypeVar

E = TypeVar("E", bound=Enum)


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_positive(name: str, value: float) -> float:
    """``value`` as a float if it is a finite number > 0."""
    if not _is_real(value) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_non_negative(name: str, value: float) -> float:
    """``value`` as a float if it is a finite number >= 0."""
    if not _is_real(value) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def check_positive_int(name: str, value: int) -> int:
    """``value`` if it is an int >= 1 (bools are refused)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def check_delta(value: float) -> float:
    """``value`` as a float if it lies in the open interval (0, 1)."""
    if not _is_real(value) or not 0 < value < 1:
        raise ValueError(f"delta must lie in the open interval (0, 1), got {value!r}")
    return float(value)


def check_batch(*, n_train: int, batch_size: int, epochs: int) -> None:
    """Validate a DP-SGD schedule: positive integers with batch_size <= n_train."""
    check_positive_int("n_train", n_train)
    check_positive_int("batch_size", batch_size)
    check_positive_int("epochs", epochs)
    if batch_size > n_train:
        raise ValueError(
            "batch_size must not exceed n_train (sampling rate <= 1), got "
            f"batch_size={batch_size!r} with n_train={n_train!r}"
        )


def parse_choice(enum: type[E], value: E | str, what: str) -> E:
    """The member of ``enum`` named by ``value`` (a member or its string value)."""
    if isinstance(value, enum):
        return value
    try:
        return enum(value)
    except ValueError:
        allowed = ", ".join(str(m.value) for m in enum)
        raise ValueError(f"unknown {what} {value!r}; choose one of: {allowed}") from None
