"""The Laplace mechanism per measurement for time series (paper 003, Section 2.3 and 4.2):
every value of every window gets Laplace noise scaled to its sensor's range.
"""

from __future__ import annotations

import torch

from audit.privacy.claim import PrivacyClaim
from audit.privacy.noise import sample_laplace
from audit.privacy.validation import check_positive, check_positive_int


def _check_series(x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or not x.is_floating_point():
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a float tensor of shape (B, T, F), got {shape}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x must hold finite values only (found NaN or inf)")


def feature_bounds(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-feature (min, max) over all windows and time steps of x (B, T, F); each (F,)."""
    _check_series(x)
    if x.shape[0] * x.shape[1] == 0:
        raise ValueError(f"cannot derive bounds from an empty series of shape {tuple(x.shape)}")
    return x.amin(dim=(0, 1)), x.amax(dim=(0, 1))


def _as_bounds(
    x: torch.Tensor, bounds: tuple[torch.Tensor | float, torch.Tensor | float] | None
) -> tuple[torch.Tensor, torch.Tensor]:
    if bounds is None:
        return feature_bounds(x)
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
    bounds: tuple[torch.Tensor | float, torch.Tensor | float] | None = None,
) -> torch.Tensor:
    """Laplace mechanism per measurement on series x (B, T, F), in the scale x is given in.

    Sensor f's sensitivity is its range ``upper_f - lower_f`` (``bounds``, per-feature tensors
    or scalars; default: the min and max over x); each value gets Laplace noise of scale
    ``range_f / eps_i`` and is clipped back to ``[lower_f, upper_f]``.

    Notes:
        Each value is eps_i-DP; a window of T x F values is T * F * eps_i-DP by sequential
        composition (:func:`laplace_claim`). Bounds derived from the data themselves look at the
        data outside this accounting; public bounds (e.g. [-1, 1] after a fixed normalisation)
        avoid that.
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


def laplace_claim(
    *, eps_i: float, window_length: int, n_features: int, n_records: int | None = None
) -> PrivacyClaim:
    """Per-record claim: epsilon = eps_i * T * F (sequential composition over a window's values).

    With ``n_records``, ``extra["epsilon_dataset_sum"]`` is |D| times the per-record epsilon
    (paper 003's Table 2 style sum; its MotionSense column used |D| * eps_i, without T * F).
    """
    eps = check_positive("eps_i", eps_i)
    t = check_positive_int("window_length", window_length)
    f = check_positive_int("n_features", n_features)
    extra: dict[str, float | str] = {
        "eps_i": eps,
        "eps_per_measurement": eps,
        "values_per_record": t * f,
    }
    if n_records is not None:
        extra["epsilon_dataset_sum"] = check_positive_int("n_records", n_records) * t * f * eps
        extra["notes"] = "epsilon_dataset_sum: |D| * per-record epsilon (paper 003 Table 2 style)"
    return PrivacyClaim(
        epsilon=eps * t * f,
        delta=0.0,
        method="ldp-laplace/per-measurement",
        accountant="ldp-composition",
        extra=extra,
    )
