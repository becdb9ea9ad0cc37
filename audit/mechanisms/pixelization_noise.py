"""DP image pixelization in torch (Liyue Fan, "Image pixelization with differential privacy",
DBSec 2018): b x b block means plus Laplace noise. Scale and epsilon are in
:mod:`audit.privacy.pixelization`.
"""

from __future__ import annotations

import torch

from audit.mechanisms.laplace_noise import sample_laplace
from audit.privacy.pixelization import pixelization_scale, valid_block_sizes


def _check_images(x: torch.Tensor, block: int) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or not x.is_floating_point():
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a float tensor of shape (B, C, H, W), got {shape}")
    if x.numel() and not bool(((x >= 0) & (x <= 1)).all()):
        raise ValueError(
            f"x must hold pixel values in [0, 1], got range [{x.min().item()}, {x.max().item()}]"
        )
    height, width = x.shape[-2:]
    if height % block or width % block:
        raise ValueError(
            f"block {block!r} does not tile a {height}x{width} image; valid block sizes: "
            f"{', '.join(map(str, valid_block_sizes(height, width)))}"
        )


def block_means(x: torch.Tensor, *, block: int) -> torch.Tensor:
    """Per-channel means of the b x b blocks: (B, C, H, W) -> (B, C, H/b, W/b)."""
    batch, channels, height, width = x.shape
    return x.reshape(batch, channels, height // block, block, width // block, block).mean(
        dim=(3, 5)
    )


def expand_blocks(means: torch.Tensor, *, block: int) -> torch.Tensor:
    """Nearest-neighbour expansion of block values back to pixels: (.., h, w) -> (.., h b, w b)."""
    return means.repeat_interleave(block, dim=-2).repeat_interleave(block, dim=-1)


def pixelize(
    x: torch.Tensor,
    *,
    eps_i: float,
    block: int,
    neighborhood: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """Fan's DP pixelization of images x (B, C, H, W) with values in [0, 1].

    Each channel's b x b block means get independent Laplace noise of scale
    ``m / (b^2 eps_i)``, are clipped to [0, 1] and expanded back to H x W. ``generator`` (on
    x's device) is the only source of randomness. Returns a new tensor of x's shape and dtype.

    Notes:
        Each channel's pixelized image is eps_i-DP for images differing in up to
        ``neighborhood`` = m pixels (Fan 2018); for any two images a C-channel image is
        C * eps_i * H * W / m -DP (:func:`audit.privacy.pixelization.pixelization_epsilon`).
        Clipping is post-processing.
    """
    scale = pixelization_scale(eps_i=eps_i, block=block, neighborhood=neighborhood)
    _check_images(x, block)
    means = block_means(x, block=block)
    noise = sample_laplace(
        tuple(means.shape), scale=scale, generator=generator, dtype=x.dtype, device=x.device
    )
    return expand_blocks((means + noise).clamp(0.0, 1.0), block=block)
