"""The Laplace mechanism per measurement for time series (paper 003, Section 2.3 and 4.2):
every value of every window gets Laplace noise scaled to its sensor's range.
"""

from __future__ import annotations

import torch

from audit.privacy.claim import PrivacyClaim
from audit.privacy.noise import sample_laplace
from core.validation import check_positive, check_positive_int


def _check_series(x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or not x.is_floating_point():
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a float tensor of shape (B, T, F), got {shape}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x must hold finite values only (found NaN or inf)")


def _as_bounds(
    x: torch.Tensor, bounds: tuple[torch.Tensor | float, torch.Tensor | float]
) -> tuple[torch.Tensor, torch.Tensor]:
    n_features = x.shape[-1]
    try:
        lower, upper = (
            torch.as_tensor(b, dtype=x.dtype, device=x.device).expand(n_features).clone()
            for b in bounds
        )
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(
            f"bounds must be (lower, upper), each a number or {n_features} per-feature values, "
            f"got {bounds!r}"
        ) from None
    if not bool((torch.isfinite(lower) & torch.isfinite(upper) & (lower <= upper)).all()):
        raise ValueError(f"bounds must be finite with lower <= upper, got {lower} and {upper}")
    if x.numel() and not bool(((x >= lower) & (x <= upper)).all()):
        raise ValueError("x has values outside the given bounds; widen them or clip x first")
    return lower, upper


def laplace_perturb_series(
    x: torch.Tensor,
    *,
    eps_i: float,
    generator: torch.Generator,
    bounds: tuple[torch.Tensor | float, torch.Tensor | float],
) -> torch.Tensor:
    """Laplace mechanism per measurement on series x (B, T, F), in the scale x is given in.

    Sensor f's sensitivity is its range ``upper_f - lower_f`` (``bounds``, per-feature tensors
    or scalars, fixed in advance: never derived from x); each value gets Laplace noise of scale
    ``range_f / eps_i`` and is clipped back to ``[lower_f, upper_f]``.

    Notes:
        Each value is eps_i-DP for any two values inside its bounds; a window of T x F values
        is T * F * eps_i-DP by sequential composition, more when windows overlap
        (:func:`laplace_claim`). The pipeline's series are in [-1, 1], the image of each
        dataset's fixed channel ranges (:class:`audit.series.ChannelScaler`): sensitivity 2.
    """
    eps = check_positive("eps_i", eps_i)
    _check_series(x)
    lower, upper = _as_bounds(x, bounds)
    noise = sample_laplace(
        tuple(x.shape),
        scale=(upper - lower) / eps,
        generator=generator,
        dtype=x.dtype,
        device=x.device,
    )
    return torch.maximum(torch.minimum(x + noise, upper), lower)


def max_windows_per_measurement(*, window_length: int, stride: int | None) -> int:
    """How many windows one measurement of a recording appears in, at most: ceil(T / stride).

    Windows start every ``stride`` samples (:func:`audit.series.windows`); ``None`` is
    non-overlapping windows (1). A measurement at row t lies in the windows whose start is a
    multiple of the stride in [t - T + 1, t], an interval of T integers.
    """
    t = check_positive_int("window_length", window_length)
    if stride is None:
        return 1
    return -(-t // check_positive_int("stride", stride))


def max_perturbations_per_window(*, window_length: int, stride: int | None) -> int:
    """How many times, at most, the T time steps of one window are perturbed in all windows.

    Window j (start j * stride) shares max(0, T - |j - k| * stride) time steps with window k,
    so a window far enough from its recording's ends has
    T + 2 * sum_{m >= 1} max(0, T - m * stride) perturbations of its time steps (T with no
    overlap; 2 T at half overlap); windows near an end have fewer.
    """
    t = check_positive_int("window_length", window_length)
    if stride is None:
        return t
    s = check_positive_int("stride", stride)
    return t + 2 * sum(t - m * s for m in range(1, -(-t // s)))


def laplace_claim(
    *,
    eps_i: float,
    window_length: int,
    n_features: int,
    window_stride: int | None = None,
    n_records: int | None = None,
) -> PrivacyClaim:
    """Per-record (per-window) claim of the Laplace mechanism on windows of a recording.

    epsilon = eps_i * F * :func:`max_perturbations_per_window` (T F eps_i for non-overlapping
    windows): by sequential composition over every noisy copy of the window's values, including
    the copies in overlapping windows (``window_stride`` below T). The per-measurement epsilon
    is eps_i * :func:`max_windows_per_measurement`. With ``n_records``,
    ``extra["epsilon_dataset_sum"]`` is |D| times the per-record epsilon (paper 003's Table 2
    style sum; its MotionSense column used |D| * eps_i, without T * F).

    Notes:
        Adjacency: any two windows (local DP), values inside fixed per-channel ranges.
    """
    eps = check_positive("eps_i", eps_i)
    t = check_positive_int("window_length", window_length)
    f = check_positive_int("n_features", n_features)
    copies = max_windows_per_measurement(window_length=t, stride=window_stride)
    perturbed = max_perturbations_per_window(window_length=t, stride=window_stride)
    extra: dict[str, float | str] = {
        "eps_i": eps,
        "eps_per_measurement": eps * copies,
        "windows_per_measurement": copies,
        "values_per_record": t * f,
        "perturbations_per_record": perturbed * f,
    }
    if copies > 1:
        extra["window_overlap"] = (
            f"stride {window_stride} < window {t}: a measurement is perturbed in up to "
            f"{copies} windows, a window's values {perturbed * f} times in all"
        )
    epsilon = eps * perturbed * f
    if n_records is not None:
        extra["epsilon_dataset_sum"] = check_positive_int("n_records", n_records) * epsilon
        extra["notes"] = "epsilon_dataset_sum: |D| * per-record epsilon (paper 003 Table 2 style)"
    return PrivacyClaim(
        epsilon=epsilon,
        delta=0.0,
        method="ldp-laplace/per-measurement",
        accountant="ldp-composition",
        extra=extra,
    )
