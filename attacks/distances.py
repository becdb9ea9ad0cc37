"""Per-pair reconstruction distances (MSE, SSIM) for the reconstruction attack, behind one registry.

Every distance maps a batch of reconstructions ``recon`` and targets ``target``, both of shape
(K, *shape), to K per-pair values as a float64 tensor on the inputs' device. A :class:`Distance`
also knows its orientation: :meth:`Distance.score` turns mean distances into membership scores
where higher means "more likely a member" (paper 003, Eq. 1: -mean MSE, or mean SSIM).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from enum import Enum

import numpy as np
import torch

SSIM_WIN_SIZE = 7
"""Side of the uniform SSIM window (scikit-image's default when ``gaussian_weights=False``)."""
SSIM_K1 = 0.01
SSIM_K2 = 0.03
SSIM_DATA_RANGE = 1.0
"""Images are assumed to lie in [0, 1]."""
SSIM_BLOCK_ELEMENTS = 2**19
"""Pixels (pairs x C x H x W) per SSIM block: keeps its float64 working set near 16 MB, which
bounds SSIM's memory and runs faster on CPU (cache) than one pass over a large batch."""


def _check_pair(recon: torch.Tensor, target: torch.Tensor) -> None:
    if recon.shape != target.shape:
        raise ValueError(
            f"recon and target must have the same shape (K, *shape), got {tuple(recon.shape)} "
            f"and {tuple(target.shape)}"
        )
    if recon.dim() < 1:
        raise ValueError("recon and target need a leading batch dimension K, got 0-d tensors")


def mse(recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error per pair, accumulated in float64.

    Args:
        recon: (K, *shape) reconstructions; any trailing shape (images, sensor series).
        target: (K, *shape) records, same shape as ``recon``.

    Returns:
        (K,) float64 tensor, ``mean((recon[k] - target[k]) ** 2)``; empty for K = 0.
    """
    _check_pair(recon, target)
    diff = recon.to(torch.float64) - target.to(torch.float64)
    return diff.pow(2).reshape(diff.shape[0], math.prod(diff.shape[1:])).mean(dim=1)


def _check_images(recon: torch.Tensor) -> None:
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


def _window_means(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Means of a, b, a^2 + b^2 and a*b over every fully interior 7x7 window, in float64.

    Args:
        a, b: (M, H, W) image planes of any floating dtype.

    Returns:
        (4, M, H - 6, W - 6) float64: exactly the values of scipy's ``uniform_filter(size=7)`` on
        the interior that scikit-image keeps after cropping ``(7 - 1) // 2`` pixels from each
        border, so the filter's border mode never enters the result. Separable window sums via
        ``unfold`` (faster than ``avg_pool2d`` or ``conv2d`` in float64 on CPU).
    """
    planes = torch.empty((4, *a.shape), dtype=torch.float64, device=a.device)
    planes[0], planes[1] = a, b
    a, b = planes[0], planes[1]
    torch.mul(a, a, out=planes[2]).addcmul_(b, b)
    torch.mul(a, b, out=planes[3])
    sums = planes.unfold(2, SSIM_WIN_SIZE, 1).sum(-1).unfold(3, SSIM_WIN_SIZE, 1).sum(-1)
    return sums.div_(SSIM_WIN_SIZE**2)


def ssim(recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean structural similarity per pair, equal to scikit-image's defaults.

    Computes, for each pair, ``skimage.metrics.structural_similarity(recon[k], target[k],
    win_size=7, data_range=1.0, channel_axis=0)``: a 7x7 uniform window, K1 = 0.01, K2 = 0.03,
    sample covariances (normalised by NP - 1 with NP = 49), the SSIM map averaged over the interior
    (3 pixels cropped from each border) and then over channels. Computed in float64.

    Args:
        recon: (K, C, H, W) reconstructions in [0, 1], H and W at least 7.
        target: (K, C, H, W) records in [0, 1].

    Returns:
        (K,) float64 tensor of SSIM values in [-1, 1] (1 for identical images); empty for K = 0.

    Raises:
        ValueError: if the inputs are not 4-D images (use :func:`mse`) or smaller than 7x7.

    Notes:
        Wang et al. (2004), Eq. 13, with scikit-image's uniform-window variant.
    """
    _check_pair(recon, target)
    _check_images(recon)
    if recon.shape[0] == 0:
        return torch.zeros(0, dtype=torch.float64, device=recon.device)
    step = max(1, SSIM_BLOCK_ELEMENTS // recon[0].numel())
    blocks = range(0, recon.shape[0], step)
    return torch.cat([_ssim_block(recon[i : i + step], target[i : i + step]) for i in blocks])


def _ssim_block(recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """:func:`ssim` of one block of (K, C, H, W) pairs -> (K,) float64."""
    n_pairs, _, height, width = recon.shape
    mean_a, mean_b, mean_sq_sum, mean_ab = _window_means(
        recon.reshape(-1, height, width), target.reshape(-1, height, width)
    )
    n_window = SSIM_WIN_SIZE**2
    cov_norm = n_window / (n_window - 1)
    mean_prod = mean_a * mean_b
    mean_sq = mean_a * mean_a + mean_b * mean_b
    c1 = (SSIM_K1 * SSIM_DATA_RANGE) ** 2
    c2 = (SSIM_K2 * SSIM_DATA_RANGE) ** 2
    # Sample (co)variances: cov(a, b) = cov_norm * (E[ab] - E[a] E[b]), var(a) + var(b) likewise.
    numerator = (2 * mean_prod + c1) * ((mean_ab - mean_prod) * (2 * cov_norm) + c2)
    denominator = (mean_sq + c1) * ((mean_sq_sum - mean_sq) * cov_norm + c2)
    return (numerator / denominator).reshape(n_pairs, -1).mean(dim=1)


DistanceFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class Distance(Enum):
    """Reconstruction distances of the reconstruction attack (paper 003, Section 2.2)."""

    MSE = "mse"
    SSIM = "ssim"

    def pairwise(self, recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-pair values (K,) float64 for (K, *shape) inputs; see :func:`mse`, :func:`ssim`."""
        return _PAIRWISE[self](recon, target)

    def check_records(self, records: torch.Tensor) -> None:
        """Raise ValueError early if records (n, *shape) cannot be compared with this distance."""
        if self is Distance.SSIM:
            _check_images(records)

    @property
    def higher_is_closer(self) -> bool:
        """True for similarities (SSIM), False for distances (MSE)."""
        return self is Distance.SSIM

    def score(self, mean_values: np.ndarray) -> np.ndarray:
        """Membership scores from per-record mean values: higher = more likely a member.

        Paper 003, Eq. 1: score = -mean MSE, or mean SSIM.
        """
        values = np.asarray(mean_values, dtype=np.float64)
        return values if self.higher_is_closer else -values


_PAIRWISE: dict[Distance, DistanceFn] = {Distance.MSE: mse, Distance.SSIM: ssim}


def available_distances() -> list[str]:
    """Names accepted by :func:`get_distance`."""
    return [distance.value for distance in Distance]


def get_distance(name: str | Distance) -> Distance:
    """Look up a distance by name (``"mse"``, ``"ssim"``); a :class:`Distance` passes through."""
    if isinstance(name, Distance):
        return name
    try:
        return Distance(name)
    except ValueError:
        raise ValueError(
            f"unknown distance {name!r}; valid distances: {', '.join(available_distances())}"
        ) from None
