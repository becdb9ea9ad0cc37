"""Mean squared error, pairwise and to records, accumulated in float64."""

from __future__ import annotations

import math

import torch

from attacks.distances.batching import (
    DISTANCE_CPU_THREADS,
    check_pair,
    check_to_records,
    cpu_threads,
    record_blocks,
)

MSE_BLOCK_ELEMENTS = 2**16
"""Reconstructed values per MSE block: a float64 working set of 512 KB, which stays in cache."""


def mse_to_records(recon: torch.Tensor, records: torch.Tensor) -> torch.Tensor:
    """Mean squared error of each reconstruction to its record, accumulated in float64.

    Args:
        recon: (R, S, *shape) reconstructions, S of each record; any trailing shape.
        records: (R, *shape).

    Returns:
        (R, S) float64 tensor, ``mean((recon[r, s] - records[r]) ** 2)``.
    """
    check_to_records(recon, records)
    n_records, n_samples = recon.shape[:2]
    record_size = math.prod(records.shape[1:])
    flat_recon = recon.reshape(n_records, n_samples, record_size)
    flat_records = records.reshape(n_records, 1, record_size)
    out = torch.empty(n_records, n_samples, dtype=torch.float64, device=recon.device)
    blocks = record_blocks(n_records, n_samples, MSE_BLOCK_ELEMENTS // max(1, record_size))
    with cpu_threads(recon.device, DISTANCE_CPU_THREADS):
        for rows, sample_blocks in blocks:
            target = flat_records[rows].to(torch.float64)
            for cols in sample_blocks:
                diff = flat_recon[rows, cols].to(torch.float64, copy=True).sub_(target)
                torch.linalg.vecdot(diff, diff, out=out[rows, cols])
    return out.div_(record_size)


def mse(recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error per pair, accumulated in float64.

    Args:
        recon: (K, *shape) reconstructions; any trailing shape (images, sensor series).
        target: (K, *shape) records, same shape as ``recon``.

    Returns:
        (K,) float64 tensor, ``mean((recon[k] - target[k]) ** 2)``; empty for K = 0.
    """
    check_pair(recon, target)
    return mse_to_records(recon.unsqueeze(1), target)[:, 0]
