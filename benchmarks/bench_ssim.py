"""Time the compiled SSIM against scikit-image's ``structural_similarity`` called pair by pair.

Pairs mimic one attack chunk: ``--records`` targets, each against ``--samples`` noisy
reconstructions, ``--size`` x ``--size`` x ``--channels`` in [0, 1]. Four paths score the same
pairs: scikit-image one pair at a time (the baseline), ``ssim_to_records`` (the attack's layout:
a record's window sums once for its samples) and ``ssim`` (independent pairs), both through the
numba kernel that CPU tensors take, and the float64 torch path (accelerators; the CPU path before
the kernel). The paths take turns within each repeat, so that a busy machine slows them alike,
and each time is the median of ``--repeats``. The kernel's first call (numba's compilation, about
10 s, or loading it from numba's on-disk cache) is timed apart and left out of the ratios. Prints
the configuration, wall and CPU time per pair, the speed-up over the baseline and the largest
difference from it.

    .venv/bin/python benchmarks/bench_ssim.py --records 8 --samples 32 --size 64 --threads 2
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch
from skimage.metrics import structural_similarity
from timing import median_times

from attacks.distances import (
    batching,
    ssim,
    ssim_numba,
    ssim_to_records,
    ssim_torch,
)
from attacks.distances.structural_similarity import SSIM_NUMBA


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=8, help="distinct targets (default 8)")
    parser.add_argument("--samples", type=int, default=32, help="pairs per target (default 32)")
    parser.add_argument("--size", type=int, default=64, help="image side in pixels (default 64)")
    parser.add_argument("--channels", type=int, default=3, help="image channels (default 3)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def make_pairs(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    """(records, samples, C, H, W) float32 reconstructions and their (records, C, H, W) targets."""
    rng = np.random.default_rng(args.seed)
    targets = rng.random((args.records, args.channels, args.size, args.size), dtype=np.float32)
    noise = rng.normal(0.0, 0.1, size=(args.records, args.samples, *targets.shape[1:]))
    return np.clip(targets[:, None] + noise.astype(np.float32), 0.0, 1.0), targets


def skimage_pairwise(recon: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """The baseline: one ``structural_similarity`` call per pair (float64, channel axis 0)."""
    return np.array(
        [
            structural_similarity(
                sample.astype(np.float64), target.astype(np.float64), data_range=1.0, channel_axis=0
            )
            for samples, target in zip(recon, targets, strict=True)
            for sample in samples
        ]
    )


def kernel_line(first_call: float) -> str:
    """The CPU path's kernel, its threads and what its first call cost (compiling or loading)."""
    if not SSIM_NUMBA:
        return "CPU path: torch operations (numba missing): the ratios below are the torch path's"
    numba = ssim_numba.numba
    stats = ssim_numba._nb_ssim_pairs.stats
    how = "loaded from numba's cache" if stats.cache_hits else "compiled"
    threads = torch.get_num_threads()
    return (
        f"CPU path: numba {numba.__version__} kernel on {threads} pool thread(s), "
        f"{ssim_numba.SSIM_RUNS_PER_THREAD if threads > 1 else 1} run(s) of pairs per thread; "
        f"first call {first_call:.2f} s ({how}), not in the timings"
    )


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    recon, targets = make_pairs(args)
    recon_t, targets_t = torch.from_numpy(recon), torch.from_numpy(targets)
    flat_recon = recon_t.flatten(0, 1)
    flat_targets = targets_t.repeat_interleave(args.samples, dim=0)
    n_pairs = flat_recon.shape[0]
    first_call = time.perf_counter()
    attack_values = ssim_to_records(recon_t, targets_t).numpy().ravel()
    first_call = time.perf_counter() - first_call
    reference = skimage_pairwise(recon, targets)
    values = {
        "ssim_to_records (attack)": attack_values,
        "ssim (independent pairs)": ssim(flat_recon, flat_targets).numpy(),
        "torch path (attack)": ssim_torch.ssim_to_records_torch(recon_t, targets_t).numpy().ravel(),
    }
    times = median_times(
        {
            "skimage, pair by pair": lambda: skimage_pairwise(recon, targets),
            "ssim_to_records (attack)": lambda: ssim_to_records(recon_t, targets_t),
            "ssim (independent pairs)": lambda: ssim(flat_recon, flat_targets),
            "torch path (attack)": lambda: ssim_torch.ssim_to_records_torch(recon_t, targets_t),
        },
        args.repeats,
    )
    print(
        f"SSIM benchmark: {n_pairs} pairs ({args.records} records x {args.samples} samples) of "
        f"{args.channels}x{args.size}x{args.size}; torch {torch.__version__}, "
        f"{args.threads} torch threads, {os.cpu_count()} CPUs, median of {args.repeats}"
    )
    print(kernel_line(first_call))
    print(
        f"torch path: {batching.DISTANCE_CPU_THREADS} thread, blocks of "
        f"{ssim_torch.SSIM_BLOCK_ELEMENTS} pixels"
    )
    baseline_wall, baseline_cpu = times["skimage, pair by pair"]
    print(f"{'path':<28}{'wall ms/pair':>14}{'CPU ms/pair':>13}{'speed-up':>10}{'max |diff|':>12}")
    for label, (wall, cpu) in times.items():
        diff = np.abs(values[label] - reference).max() if label in values else 0.0
        print(
            f"{label:<28}{1e3 * wall / n_pairs:>14.4f}{1e3 * cpu / n_pairs:>13.4f}"
            f"{baseline_wall / wall:>9.1f}x{diff:>12.2e}"
        )
    print(
        "speed-up = skimage wall time / path wall time on the same pairs in the same run "
        f"(by CPU time: {baseline_cpu / times['ssim_to_records (attack)'][1]:.1f}x for "
        "ssim_to_records)"
    )


if __name__ == "__main__":
    main()
