"""Time the vectorised SSIM against scikit-image's ``structural_similarity`` called pair by pair.

Pairs mimic one attack chunk: ``--records`` targets, each against ``--samples`` noisy
reconstructions, ``--size`` x ``--size`` x ``--channels`` in [0, 1]. Prints the configuration, the
time per pair of each path (best of ``--repeats``), the speed-up and the largest difference.

    .venv/bin/python benchmarks/bench_ssim.py --records 8 --samples 32 --size 64 --threads 2
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch
from skimage.metrics import structural_similarity

from attacks.distances import ssim


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=8, help="distinct targets (default 8)")
    parser.add_argument("--samples", type=int, default=32, help="pairs per target (default 32)")
    parser.add_argument("--size", type=int, default=64, help="image side in pixels (default 64)")
    parser.add_argument("--channels", type=int, default=3, help="image channels (default 3)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def make_pairs(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    """(records * samples, C, H, W) float32 reconstructions and their repeated targets."""
    rng = np.random.default_rng(args.seed)
    shape = (args.records, args.channels, args.size, args.size)
    targets = np.repeat(rng.random(shape, dtype=np.float32), args.samples, axis=0)
    noise = rng.normal(0.0, 0.1, size=targets.shape).astype(np.float32)
    return np.clip(targets + noise, 0.0, 1.0), targets


def best_times(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Fastest wall-clock and fastest process-CPU time of ``repeats`` runs of ``fn``, in seconds.

    CPU time sums over threads; it is the steadier measure on a shared machine.
    """
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def skimage_pairwise(recon: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The reference: one ``structural_similarity`` call per pair (float64, channel axis 0)."""
    return np.array(
        [
            structural_similarity(
                a.astype(np.float64), b.astype(np.float64), data_range=1.0, channel_axis=0
            )
            for a, b in zip(recon, target, strict=True)
        ]
    )


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    recon, target = make_pairs(args)
    recon_t, target_t = torch.from_numpy(recon), torch.from_numpy(target)
    n_pairs = recon.shape[0]
    ours = ssim(recon_t, target_t).numpy()  # warm-up, and the values to compare
    reference = skimage_pairwise(recon, target)
    t_ours = best_times(lambda: ssim(recon_t, target_t), args.repeats)
    t_ref = best_times(lambda: skimage_pairwise(recon, target), args.repeats)
    print(
        f"SSIM benchmark: {n_pairs} pairs ({args.records} records x {args.samples} samples) of "
        f"{args.channels}x{args.size}x{args.size}, torch {torch.__version__}, "
        f"{args.threads} threads, best of {args.repeats}"
    )
    print(f"{'path':<34}{'wall ms/pair':>14}{'CPU ms/pair':>14}")
    for label, (wall, cpu) in (
        ("attacks.distances.ssim (batched)", t_ours),
        ("skimage structural_similarity", t_ref),
    ):
        print(f"{label:<34}{1e3 * wall / n_pairs:>14.4f}{1e3 * cpu / n_pairs:>14.4f}")
    wall_ratio, cpu_ratio = t_ref[0] / t_ours[0], t_ref[1] / t_ours[1]
    print(f"{'speed-up (skimage / ours)':<34}{wall_ratio:>13.1f}x{cpu_ratio:>13.1f}x")
    print(f"{'max |ours - skimage|':<34}{np.abs(ours - reference).max():>14.2e}")


if __name__ == "__main__":
    main()
