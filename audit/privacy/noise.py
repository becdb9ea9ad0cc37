"""Laplace noise from an explicit torch.Generator (no global RNG state)."""

from __future__ import annotations

import torch


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
