"""SSIM's constants (Wang et al. 2004 with scikit-image's uniform 7x7 window), their offsets in
units of window sums shared by the torch and numba paths, and the check that records are
images large enough for the window."""

from __future__ import annotations

import torch

SSIM_WIN_SIZE = 7
"""Side of the uniform SSIM window (scikit-image's default when ``gaussian_weights=False``)."""
SSIM_K1 = 0.01
SSIM_K2 = 0.03
SSIM_DATA_RANGE = 1.0
"""Images are assumed to lie in [0, 1]."""

WINDOW_PIXELS = SSIM_WIN_SIZE**2
"""n: pixels in a window. The offsets below are in units of window sums
(:class:`ssim_torch._SsimKernel`)."""
C1 = (SSIM_K1 * SSIM_DATA_RANGE) ** 2
C2 = (SSIM_K2 * SSIM_DATA_RANGE) ** 2
A1_OFFSET = WINDOW_PIXELS**2 * C1 / 2
A2_OFFSET = WINDOW_PIXELS * (WINDOW_PIXELS - 1) * C2 / 2
B1_OFFSET = WINDOW_PIXELS**2 * C1
B2_OFFSET = WINDOW_PIXELS * (WINDOW_PIXELS - 1) * C2


def check_images(recon: torch.Tensor) -> None:
    if recon.dim() != 4:
        raise ValueError(
            f"SSIM applies to images only: expected (K, C, H, W), got shape {tuple(recon.shape)}; "
            "use the 'mse' distance for sensor series and other non-image records"
        )
    height, width = recon.shape[-2:]
    if min(height, width) < SSIM_WIN_SIZE:
        raise ValueError(
            f"SSIM needs images of at least {SSIM_WIN_SIZE}x{SSIM_WIN_SIZE} (its window), got "
            f"{height}x{width}; use the 'mse' distance for smaller images"
        )
