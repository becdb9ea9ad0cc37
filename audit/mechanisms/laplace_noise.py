"""Laplace noise in torch: a seeded sampler and the per-measurement Laplace mechanism on series
(the trade-off paper, Sections 2.3 and 4.2). The claim is
:func:`audit.privacy.laplace.laplace_claim`.
"""

from __future__ import annotations

import torch

from dpvae_core.validation import check_positive


def sample_laplace(
    shape: tuple[int, ...],
    *,
    scale: float | torch.Tensor,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Laplace(0, scale) samples of ``shape``: the difference of two Exp(1) draws times ``scale``.

    ``scale`` is a float or a tensor broadcastable to ``shape`` (e.g. one scale per feature);
    the variance is ``2 * scale**2``. Draws are in float64 and cast to ``dtype``.
    """
    device = generator.device if device is None else torch.device(device)
    first = torch.empty(shape, dtype=torch.float64, device=device).exponential_(generator=generator)
    second = torch.empty(shape, dtype=torch.float64, device=device).exponential_(
        generator=generator
    )
    return ((first - second) * scale).to(dtype)


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
        (:func:`audit.privacy.laplace.laplace_claim`). The pipeline's series are in [-1, 1], the
        image of each dataset's fixed channel ranges (:class:`audit.datasets.series.ChannelScaler`):
        sensitivity 2.
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
