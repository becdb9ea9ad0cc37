"""Timing shared by the benchmark scripts (run as ``python benchmarks/bench_*.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np


def median_times(paths: dict[str, Callable[[], object]], repeats: int) -> dict[str, np.ndarray]:
    """Median (wall, process CPU) seconds of each path; the paths take turns in every repeat.

    CPU time sums over threads; it is the steadier measure on a shared machine.
    """
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in paths}
    for _ in range(repeats):
        for label, fn in paths.items():
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            times[label].append((time.perf_counter() - wall, time.process_time() - cpu))
    return {label: np.median(np.array(values), axis=0) for label, values in times.items()}


def device_seconds(fn: Callable[[], object], device) -> float:
    """Wall seconds of one call of ``fn`` on a torch ``device``: a CUDA device is synchronised
    before and after, so queued kernels are counted where they run."""
    import torch  # here, not at the top: the scripts without torch import this module too

    cuda = torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize(device)
    return time.perf_counter() - start
