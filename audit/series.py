"""Sensor series helpers: fixed-length windows, and the per-channel scaling to [-1, 1] that is
fitted on D_train only (paper 003, Section 4: "we normalize the data to [-1, 1]")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
    """The affine map sending each channel's [lower, upper] to [-1, 1].

    ``lower`` and ``upper`` (F,) are float64; a constant channel (lower == upper) maps to 0.
    Fitted on D_train, it maps D_train into [-1, 1] exactly; other records may fall outside.

    Notes:
        The statistics are a function of D_train, computed outside any mechanism's accounting
        (paper 003 does the same when it takes the sensors' observed ranges).
    """

    lower: np.ndarray
    upper: np.ndarray

    def __post_init__(self) -> None:
        lower = np.asarray(self.lower, dtype=np.float64)
        upper = np.asarray(self.upper, dtype=np.float64)
        if lower.ndim != 1 or lower.shape != upper.shape:
            raise ValueError(f"lower and upper must be (F,), got {lower.shape} and {upper.shape}")
        if not (np.isfinite(lower).all() and np.isfinite(upper).all() and (lower <= upper).all()):
            raise ValueError(
                f"channel bounds must be finite with lower <= upper, got {lower}, {upper}"
            )
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)

    @classmethod
    def fit(cls, x: np.ndarray) -> ChannelScaler:
        """Per-channel min and max of series ``x`` (N, T, F) over all records and time steps."""
        if x.ndim != 3 or x.shape[0] * x.shape[1] == 0:
            raise ValueError(f"fit needs non-empty series (N, T, F), got shape {x.shape}")
        return cls(lower=x.min(axis=(0, 1)), upper=x.max(axis=(0, 1)))

    def transform(self, x: np.ndarray) -> np.ndarray:
        """``2 * (x - lower) / (upper - lower) - 1`` per channel, as float32 (N, T, F)."""
        if x.ndim != 3 or x.shape[2] != len(self.lower):
            raise ValueError(
                f"transform needs series (N, T, {len(self.lower)}), got shape {x.shape}"
            )
        span = self.upper - self.lower
        safe = np.where(span > 0, span, 1.0)
        scaled = 2.0 * (x.astype(np.float64) - self.lower) / safe - 1.0
        return np.where(span > 0, scaled, 0.0).astype(np.float32)
