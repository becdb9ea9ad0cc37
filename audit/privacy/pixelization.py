"""DP image pixelization (Liyue Fan, "Image pixelization with differential privacy", DBSec 2018),
the image LDP mechanism of paper 003 (Section 2.3): b x b cell means plus Laplace noise.
"""

from __future__ import annotations

import math

import torch

from audit.privacy.claim import PrivacyClaim
from audit.privacy.noise import sample_laplace
from audit.privacy.validation import check_positive, check_positive_int


def valid_cell_sizes(height: int, width: int) -> tuple[int, ...]:
    """Cell sizes b that tile an image of ``height`` x ``width``: the common divisors."""
    check_positive_int("height", height)
    check_positive_int("width", width)
    g = math.gcd(height, width)
    return tuple(b for b in range(1, g + 1) if g % b == 0)


def pixelization_scale(*, eps_i: float, cell: int, neighborhood: int) -> float:
    """Laplace scale m / (b^2 eps_i) on the [0, 1] pixel scale (255 m / (b^2 eps_i) on 0..255).

    The L1 sensitivity of all cell means of one channel, for images differing in at most m
    pixels, is m / b^2 (Fan 2018).
    """
    eps = check_positive("eps_i", eps_i)
    b = check_positive_int("cell", cell)
    m = check_positive_int("neighborhood", neighborhood)
    return m / (b * b * eps)


def _check_images(x: torch.Tensor, cell: int) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or not x.is_floating_point():
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a float tensor of shape (B, C, H, W), got {shape}")
    if x.numel() and not bool(((x >= 0) & (x <= 1)).all()):
        raise ValueError(
            f"x must hold pixel values in [0, 1], got range [{x.min().item()}, {x.max().item()}]"
        )
    height, width = x.shape[-2:]
    if height % cell or width % cell:
        raise ValueError(
            f"cell {cell!r} does not tile a {height}x{width} image; valid cell sizes: "
            f"{', '.join(map(str, valid_cell_sizes(height, width)))}"
        )


def cell_means(x: torch.Tensor, *, cell: int) -> torch.Tensor:
    """Per-channel means of the b x b cells: (B, C, H, W) -> (B, C, H/b, W/b)."""
    batch, channels, height, width = x.shape
    return x.reshape(batch, channels, height // cell, cell, width // cell, cell).mean(dim=(3, 5))


def expand_cells(means: torch.Tensor, *, cell: int) -> torch.Tensor:
    """Nearest-neighbour expansion of cell values back to pixels: (.., h, w) -> (.., h b, w b)."""
    return means.repeat_interleave(cell, dim=-2).repeat_interleave(cell, dim=-1)


def pixelize(
    x: torch.Tensor,
    *,
    eps_i: float,
    cell: int,
    neighborhood: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """Fan's DP pixelization of images x (B, C, H, W) with values in [0, 1].

    Each channel's b x b cell means get independent Laplace noise of scale
    ``m / (b^2 eps_i)``, are clipped to [0, 1] and expanded back to H x W. ``generator`` (on
    x's device) is the only source of randomness. Returns a new tensor of x's shape and dtype.

    Notes:
        Each channel's pixelized image is eps_i-DP for images differing in up to
        ``neighborhood`` = m pixels (Fan 2018); channels are perturbed independently, so a
        C-channel image is C * eps_i-DP (see :func:`pixelization_claim`). Clipping is
        post-processing.
    """
    scale = pixelization_scale(eps_i=eps_i, cell=cell, neighborhood=neighborhood)
    _check_images(x, cell)
    means = cell_means(x, cell=cell)
    noise = sample_laplace(
        tuple(means.shape), scale=scale, generator=generator, dtype=x.dtype, device=x.device
    )
    return expand_cells((means + noise).clamp(0.0, 1.0), cell=cell)


def pixelization_claim(
    *, eps_i: float, channels: int, n_records: int | None = None, neighborhood: int | None = None
) -> PrivacyClaim:
    """Per-record claim of pixelization: epsilon = channels * eps_i, delta = 0.

    No composition over cells: Fan's scale already covers the whole image. With ``n_records``,
    ``extra["epsilon_dataset_sum"]`` is paper 003's Table 2 figure |D| * channels * eps_i (a sum
    over all records, not a per-record guarantee).
    """
    eps = check_positive("eps_i", eps_i)
    c = check_positive_int("channels", channels)
    extra: dict[str, float | str] = {"eps_i": eps, "channels": c}
    if neighborhood is not None:
        extra["neighborhood_pixels"] = check_positive_int("neighborhood", neighborhood)
    if n_records is not None:
        extra["epsilon_dataset_sum"] = check_positive_int("n_records", n_records) * c * eps
        extra["notes"] = "epsilon_dataset_sum: paper 003 Table 2 style |D| * per-record epsilon"
    return PrivacyClaim(
        epsilon=c * eps,
        delta=0.0,
        method="ldp-pixelization/laplace",
        accountant="ldp-composition",
        extra=extra,
    )
