"""Checks at the boundaries (command line, privacy layer, models): each raises a ValueError that
quotes the bad value and, for a choice, the allowed ones."""

from __future__ import annotations

import math
import os
import re
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


def parse_enum(enum: type[E], value: E | str, what: str) -> E:
    """The member of ``enum`` named by ``value`` (a member or its string value); the ValueError
    quotes the value and the allowed ones."""
    try:
        return enum(value)
    except ValueError:
        allowed = ", ".join(str(m.value) for m in enum)
        raise ValueError(f"unknown {what} {value!r}; choose one of: {allowed}") from None


DEVICE_PATTERN = re.compile(r"cpu|cuda(:(0|[1-9][0-9]*))?")


def check_device_name(device: str) -> str:
    """``device`` if it is ``cpu``, ``cuda`` or ``cuda:N`` (N a non-negative integer)."""
    if not isinstance(device, str) or not DEVICE_PATTERN.fullmatch(device):
        raise ValueError(
            f"unknown device {device!r}; choose cpu, cuda or cuda:N (N a non-negative integer)"
        )
    return device


def check_device(device: str, flag: str = "--device") -> str:
    """``device`` if it names a device (:func:`check_device_name`) that this machine has: CUDA
    available and the index below the device count. The ValueError names the flag and says what
    is allowed here."""
    if not isinstance(device, str) or not DEVICE_PATTERN.fullmatch(device):
        raise ValueError(
            f"{flag} {device!r} is not a device; choose cpu, cuda or cuda:N (N a non-negative "
            "integer)"
        )
    if device == "cpu":
        return device
    import torch

    if not torch.cuda.is_available():
        raise ValueError(f"{flag} {device}: CUDA is not available here; use {flag} cpu")
    count = torch.cuda.device_count()
    index = int(device.partition(":")[2] or 0)
    if index >= count:
        raise ValueError(
            f"{flag} {device}: this machine has {count} CUDA device(s), cuda:0..cuda:{count - 1}"
        )
    return device


def machine_memory() -> int:
    """Bytes of memory this process may use at most: the physical memory, or the control
    group's limit where that is lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            limit = fh.read().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.3g} GiB"


def check_fits_memory(what: str, n_bytes: float, how: str) -> None:
    """Refuse, before any work, a size whose arrays alone (``n_bytes``, estimated as ``how``
    says) would exceed the memory of this machine (:func:`machine_memory`)."""
    available = machine_memory()
    if n_bytes > available:
        raise ValueError(
            f"{what} would need about {_gib(n_bytes)} of memory ({how}), more than this "
            f"machine's {_gib(available)}; choose a smaller value"
        )


def check_at_most(name: str, value: int, limit: int, why: str) -> int:
    """``value`` if it is at most ``limit``; the ValueError says why the limit is what it is."""
    if value > limit:
        raise ValueError(f"{name} must be at most {limit} ({why}), got {value!r}")
    return value
