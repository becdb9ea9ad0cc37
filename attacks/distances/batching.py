"""Shape checks shared by the distances, the blocks that bound their working sets, and the
intra-op thread limit they run under on a CPU."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

DISTANCE_CPU_THREADS = 1
"""Intra-op threads of MSE and of the torch SSIM path on a CPU (torch's setting is restored
afterwards; the numba SSIM kernel runs on torch's thread count instead). Their operations are
short and memory-bound: on the shared 2-core benchmark machine a second thread made SSIM 2 to 10
times and MSE 5 times slower (threads waiting for each other at every operation while other
processes hold the cores), and never clearly faster."""


def check_pair(recon: torch.Tensor, target: torch.Tensor) -> None:
    if recon.shape != target.shape:
        raise ValueError(
            f"recon and target must have the same shape (K, *shape), got {tuple(recon.shape)} "
            f"and {tuple(target.shape)}"
        )
    if recon.dim() < 1:
        raise ValueError("recon and target need a leading batch dimension K, got 0-d tensors")


def check_to_records(recon: torch.Tensor, records: torch.Tensor) -> None:
    if recon.dim() != records.dim() + 1 or recon.shape[:1] + recon.shape[2:] != records.shape:
        raise ValueError(
            "recon must be (R, S, *shape) for records (R, *shape), got recon "
            f"{tuple(recon.shape)} and records {tuple(records.shape)}"
        )


def record_blocks(
    n_records: int, n_samples: int, pairs_per_block: int
) -> Iterator[tuple[slice, Iterator[slice]]]:
    """(records, sample blocks) covering R x S pairs, at most ``pairs_per_block`` pairs a block.

    Whole records when S fits in a block (several records a block), else one record at a time,
    its samples split into blocks.
    """
    samples_per_block = max(1, min(n_samples, pairs_per_block))
    records_per_block = max(1, pairs_per_block // max(1, n_samples))
    if samples_per_block < n_samples:
        records_per_block = 1
    for start in range(0, n_records, records_per_block):
        stop = min(start + records_per_block, n_records)
        samples = (
            slice(s, min(s + samples_per_block, n_samples))
            for s in range(0, n_samples, samples_per_block)
        )
        yield slice(start, stop), samples


@contextmanager
def cpu_threads(device: torch.device, n_threads: int) -> Iterator[None]:
    """Run with at most ``n_threads`` intra-op threads on a CPU; torch's count is restored."""
    previous = torch.get_num_threads()
    if device.type != "cpu" or previous <= n_threads:
        yield
        return
    torch.set_num_threads(n_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
