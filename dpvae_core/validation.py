"""Checks at the boundaries (command line, privacy layer, models): each raises a ValueError that
quotes the bad value and, for a choice, the allowed ones."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
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
#: The ``--device`` (and ``--precision``) value that lets this machine choose: resolved once,
#: before any work, and never stored (a cell records the resolved value).
AUTO = "auto"
DEVICES_ALLOWED = "auto, cpu, cuda or cuda:N (N a non-negative integer)"


def check_device_name(device: str, *, auto: bool = False) -> str:
    """``device`` if it is ``cpu``, ``cuda`` or ``cuda:N`` (N a non-negative integer), or
    :data:`AUTO` where ``auto`` allows it."""
    if auto and device == AUTO:
        return device
    if not isinstance(device, str) or not DEVICE_PATTERN.fullmatch(device):
        allowed = DEVICES_ALLOWED if auto else DEVICES_ALLOWED.removeprefix("auto, ")
        raise ValueError(f"unknown device {device!r}; choose {allowed}")
    return device


def check_device(device: str, flag: str = "--device") -> str:
    """``device`` if it names a device (:func:`check_device_name`) that this machine has: CUDA
    available and the index below the device count. The ValueError names the flag and says what
    is allowed here (the flag also takes :data:`AUTO`, which :func:`resolve_device` reads)."""
    if not isinstance(device, str) or not DEVICE_PATTERN.fullmatch(device):
        raise ValueError(f"{flag} {device!r} is not a device; choose {DEVICES_ALLOWED}")
    if device == "cpu":
        return device
    import torch

    if not torch.cuda.is_available():
        raise ValueError(f"{flag} {device}: CUDA is not available here; use {flag} cpu (or {AUTO})")
    count = torch.cuda.device_count()
    index = int(device.partition(":")[2] or 0)
    if index >= count:
        raise ValueError(
            f"{flag} {device}: this machine has {count} CUDA device(s), cuda:0..cuda:{count - 1}"
        )
    return device


@dataclass(frozen=True)
class DeviceChoice:
    """The device a run uses and why (``reason``: the flag as given, or what ``auto`` saw)."""

    device: str
    reason: str

    def line(self) -> str:
        """The one line a command prints: ``device: cpu (auto: no CUDA GPU)``."""
        return f"device: {self.device} ({self.reason})"


def resolve_device(value: str, flag: str = "--device") -> DeviceChoice:
    """The device ``value`` names on this machine: :data:`AUTO` is the first CUDA GPU
    (``cuda``) where torch sees one, else ``cpu``; any other value must pass
    :func:`check_device`."""
    if value != AUTO:
        return DeviceChoice(check_device(value, flag), f"{flag} {value}")
    import torch

    if torch.cuda.is_available():
        return DeviceChoice("cuda", f"{AUTO}: a CUDA GPU is present, {_gpu_name()}")
    return DeviceChoice("cpu", f"{AUTO}: no CUDA GPU")


def _gpu_name() -> str:
    import torch

    try:
        return torch.cuda.get_device_name(0)
    except (RuntimeError, AssertionError):  # torch sees a device it cannot query
        return "cuda:0"


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
