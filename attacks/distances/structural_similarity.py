"""Mean structural similarity (SSIM), pairwise and to records, equal to scikit-image; runs the
compiled kernel on a CPU and float64 torch operations elsewhere."""

from __future__ import annotations

import torch

from attacks.distances.batching import check_pair, check_to_records
from attacks.distances.ssim_numba import numba, ssim_to_records_numba
from attacks.distances.ssim_torch import ssim_to_records_torch
from attacks.distances.ssim_window import check_images

SSIM_NUMBA = numba is not None
"""Whether SSIM on CPU tensors runs the compiled numba kernel (:func:`ssim_numba._nb_ssim_pairs`,
about 5 times faster than the torch path on one core); otherwise, and on accelerators, it runs in
float64 torch operations (:class:`ssim_torch._SsimKernel`). Both agree with scikit-image to about
1e-15."""


def ssim_to_records(recon: torch.Tensor, records: torch.Tensor) -> torch.Tensor:
    """Mean structural similarity of each reconstruction to its record, equal to scikit-image.

    Computes ``skimage.metrics.structural_similarity(recon[r, s], records[r], win_size=7,
    data_range=1.0, channel_axis=0)`` for every pair: a 7x7 uniform window, K1 = 0.01,
    K2 = 0.03, sample covariances (normalised by n - 1 with n = 49), the SSIM map averaged over
    the interior (3 pixels cropped from each border) and then over channels. A record's window
    sums are computed once for all of its S samples.

    Args:
        recon: (R, S, C, H, W) reconstructions in [0, 1], H and W at least 7.
        records: (R, C, H, W) records in [0, 1].

    Returns:
        (R, S) float64 tensor of SSIM values in [-1, 1] (1 for identical images).

    Raises:
        ValueError: if the inputs are not images (use :func:`mse`) or smaller than 7x7.

    Notes:
        Wang et al. (2004), Eq. 13, with scikit-image's uniform-window variant. Computed in
        float64: with float32 window sums, var = E[x^2] - E[x]^2 cancels on flat regions of
        bright images and SSIM drifts by up to 4e-5 from scikit-image's (2e-5 with each image
        centred first), beyond the 1e-5 the tests allow. On a CPU a compiled numba kernel
        (:func:`ssim_numba._nb_ssim_pairs`: running window sums, fused with the formula) scores
        the pairs on as many threads as torch's intra-op count; on an accelerator, or with
        :data:`SSIM_NUMBA` off, float64 torch operations do, in blocks of
        :data:`ssim_torch.SSIM_BLOCK_ELEMENTS` pixels
        (:data:`ssim_torch.SSIM_ACCELERATOR_BLOCK_ELEMENTS`) with
        :data:`batching.DISTANCE_CPU_THREADS` threads.
    """
    check_to_records(recon, records)
    check_images(records)
    if SSIM_NUMBA and recon.device.type == "cpu":
        return ssim_to_records_numba(recon, records)
    return ssim_to_records_torch(recon, records)


def ssim(recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean structural similarity per pair, equal to scikit-image's defaults.

    Args:
        recon: (K, C, H, W) reconstructions in [0, 1], H and W at least 7.
        target: (K, C, H, W) records in [0, 1].

    Returns:
        (K,) float64 tensor of SSIM values in [-1, 1]; empty for K = 0. See
        :func:`ssim_to_records`, which this calls with one sample per record.

    Raises:
        ValueError: if the inputs are not 4-D images (use :func:`mse`) or smaller than 7x7.
    """
    check_pair(recon, target)
    check_images(recon)
    return ssim_to_records(recon.unsqueeze(1), target)[:, 0]
