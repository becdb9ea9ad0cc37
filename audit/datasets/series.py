"""Sensor series helpers: fixed-length windows, and the per-channel scaling to [-1, 1] with fixed
ranges that do not depend on the records (the trade-off paper, Section 4: "we normalize the data to
[-1, 1]"; the ranges are the sensors' documented limits, stated per dataset)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Gyroscope full scale of +-2000 degrees/s (the largest range of the InvenSense/Bosch MEMS
#: gyroscopes in iPhones and smartwatches), in rad/s.
GYRO_RAD_S = 2000 * math.pi / 180
#: Standard gravity, m/s^2, for ranges stated in g but recorded in m/s^2.
G = 9.80665


def windows(rows: np.ndarray, *, length: int, stride: int) -> np.ndarray:
    """Consecutive windows (k, length, F) of a recording ``rows`` (n, F), starting every
    ``stride`` rows; the tail that does not fill a window is dropped (k = 0 when n < length).
    """
    if length < 1 or stride < 1:
        raise ValueError(f"window length and stride must be >= 1, got {length} and {stride}")
    if rows.ndim != 2:
        raise ValueError(f"a recording must be (n, F), got shape {rows.shape}")
    if len(rows) < length:
        return np.empty((0, length, rows.shape[1]), dtype=rows.dtype)
    view = np.lib.stride_tricks.sliding_window_view(rows, length, axis=0)  # (n-length+1, F, length)
    return np.ascontiguousarray(view[::stride].transpose(0, 2, 1))


@dataclass(frozen=True)
class ChannelScaler:
    """The affine map sending each channel's fixed range [lower, upper] to [-1, 1].

    ``lower`` and ``upper`` (F,) are float64 with lower < upper, fixed in advance (never fitted to
    the records); ``source`` says where they come from. Values outside a channel's range are
    clipped into it first, record by record, so every output lies in [-1, 1].

    Notes:
        Any two records' values of channel f differ by at most 2 after the map, whatever the
        records are: the Laplace mechanism's per-measurement sensitivity in the scale its noise
        is added in. No statistic of the private records enters the scaling.
    """

    lower: np.ndarray
    upper: np.ndarray
    source: str = "given"

    def __post_init__(self) -> None:
        lower = np.asarray(self.lower, dtype=np.float64)
        upper = np.asarray(self.upper, dtype=np.float64)
        if lower.ndim != 1 or lower.shape != upper.shape:
            raise ValueError(f"lower and upper must be (F,), got {lower.shape} and {upper.shape}")
        if not (np.isfinite(lower).all() and np.isfinite(upper).all() and (lower < upper).all()):
            raise ValueError(
                f"channel ranges must be finite with lower < upper, got {lower}, {upper}"
            )
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)

    def transform(self, x: np.ndarray) -> np.ndarray:
        """Clip each value into its channel's range, then ``2 (x - lower) / (upper - lower) - 1``;
        float32 (N, T, F) in [-1, 1]."""
        if x.ndim != 3 or x.shape[2] != len(self.lower):
            raise ValueError(
                f"transform needs series (N, T, {len(self.lower)}), got shape {x.shape}"
            )
        clipped = np.clip(x.astype(np.float64), self.lower, self.upper)
        scaled = 2.0 * (clipped - self.lower) / (self.upper - self.lower) - 1.0
        return np.clip(scaled, -1.0, 1.0).astype(np.float32)

    def describe(self) -> str:
        """One line for a row's notes: the ranges, their source, and the clipping."""
        ranges = ", ".join(
            f"[{lo:.4g}, {hi:.4g}]" for lo, hi in zip(self.lower, self.upper, strict=True)
        )
        return (
            f"fixed per-channel ranges ({self.source}): {ranges}, not computed from any record, "
            "each value clipped into its channel's range record by record, then mapped to "
            "[-1, 1]"
        )
