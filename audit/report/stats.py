"""Means over seeds with Student-t confidence intervals, for the report's tables and error bars."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from attacks.uncertainty import CONFIDENCE


@dataclass(frozen=True)
class MeanInterval:
    """Mean of ``n`` finite values and the half-width of its two-sided t-interval.

    ``half_width`` is NaN when ``n < 2`` (one seed shows no interval) and ``mean`` is NaN when
    ``n == 0``.
    """

    mean: float
    half_width: float
    n: int

    def format(self, spec: str = ".3f") -> str:
        """``'0.612 ± 0.034'``, or ``'0.612'`` without an interval, or ``'n/a'`` without data;
        ``spec`` is the format spec of both numbers (``'.3g'`` for epsilon)."""
        if math.isnan(self.mean):
            return "n/a"
        if math.isinf(self.mean):
            return "∞" if self.mean > 0 else "-∞"
        if math.isnan(self.half_width):
            return f"{self.mean:{spec}}"
        return f"{self.mean:{spec}} ± {self.half_width:{spec}}"


def t_interval(
    values: Sequence[float] | np.ndarray, *, confidence: float = CONFIDENCE
) -> MeanInterval:
    """Mean and t-interval half-width ``t_{(1+c)/2, n-1} * s / sqrt(n)`` over the finite values.

    ``s`` is the sample standard deviation (ddof = 1); NaN values are ignored (a metric that is
    undefined for a run, such as phi of the baseline). Infinite values (epsilon of a non-private
    run) give an infinite mean and no interval.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[~np.isnan(arr)]
    n = int(arr.size)
    if n == 0:
        return MeanInterval(math.nan, math.nan, 0)
    if not np.isfinite(arr).all():
        return MeanInterval(float(arr.mean()), math.nan, n)
    mean = float(arr.mean())
    if n < 2:
        return MeanInterval(mean, math.nan, n)
    sd = float(arr.std(ddof=1))
    t = float(stats.t.ppf((1 + confidence) / 2, df=n - 1))
    return MeanInterval(mean, t * sd / math.sqrt(n), n)


def summarise(frame: pd.DataFrame, keys: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """One row per group of ``keys``: ``<metric>`` (mean), ``<metric>_hw`` (95 % half-width) and
    ``<metric>_n`` (finite values) for each metric; NaN keys (the baseline's parameter) form groups.
    """
    out = []
    for key, group in frame.groupby(list(keys), dropna=False, sort=True):
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        for metric in metrics:
            interval = t_interval(group[metric].to_numpy(dtype=np.float64))
            row[metric], row[f"{metric}_hw"], row[f"{metric}_n"] = (
                interval.mean,
                interval.half_width,
                interval.n,
            )
        out.append(row)
    columns = list(keys) + [f"{m}{s}" for m in metrics for s in ("", "_hw", "_n")]
    return pd.DataFrame(out, columns=columns)


def column_intervals(
    samples: np.ndarray, *, confidence: float = CONFIDENCE
) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and t-interval half-width of ``samples`` (n, G): the vectorised
    :func:`t_interval` for curves averaged over n seeds (half-width NaN when n < 2)."""
    samples = np.asarray(samples, dtype=np.float64)
    if samples.ndim != 2 or samples.shape[0] == 0:
        raise ValueError(f"samples must be (n >= 1, G), got shape {samples.shape}")
    n = samples.shape[0]
    mean = samples.mean(axis=0)
    if n < 2:
        return mean, np.full_like(mean, np.nan)
    t = float(stats.t.ppf((1 + confidence) / 2, df=n - 1))
    return mean, t * samples.std(axis=0, ddof=1) / math.sqrt(n)


def format_epsilon(value: float) -> str:
    """3 significant digits, whole numbers from 100 on (``1000``, not ``1e+03``), ``∞``."""
    if not math.isfinite(value):
        return MeanInterval(value, math.nan, 1).format()
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
