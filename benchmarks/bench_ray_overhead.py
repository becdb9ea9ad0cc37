"""The Ray executor's overhead against the local one, on the same tiny sweep (a ratio).

    python benchmarks/bench_ray_overhead.py [--repeats 2] [--cells-per-seed 3]

Both executors run the same cells (digits, mech none and ldp at two eps_i, seeds 0 and 1, a tiny
profile) into fresh directories, one CPU each way (torch on one thread, one Ray worker), taking
turns in every repeat; ``ray.init`` is timed apart, since a cluster pays it once. Prints the
median wall times and the ratio Ray / local, with and without ``ray.init``, and checks that both
wrote the same metrics. Needs the ray extra (``pip install -e '.[ray]'``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.config import ExecutorName, RaySettings, SweepConfig  # noqa: E402
from audit.profiles import PROFILES, ProfileName  # noqa: E402
from audit.sweep.runner import run_sweep  # noqa: E402

TINY = replace(
    PROFILES[ProfileName.QUICK],
    epochs=5,
    max_train=30,
    attack_samples=3,
    latent_dim=4,
    gen_records=200,
    classifier_epochs=5,
)
METRICS = ["mi_ap", "mi_auc", "acc", "acc_real", "epsilon"]


def config(out: Path, grid: tuple[float, ...], **kw: object) -> SweepConfig:
    return SweepConfig(
        dataset="digits",
        mechs=("none", "ldp"),
        profile_name=ProfileName.QUICK,
        profile=TINY,
        seeds=(0, 1),
        out=out,
        grid=grid,
        progress=False,
        report=False,  # the cells alone: the report costs both executors the same
        **kw,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--cells-per-seed", type=int, default=3, help="1 baseline + ldp values")
    args = p.parse_args()
    import ray

    torch.set_num_threads(1)
    grid = tuple(10.0**k for k in range(1, args.cells_per_seed))
    root = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    start = time.perf_counter()
    ray.init(num_cpus=1, include_dashboard=False, _node_ip_address="127.0.0.1")
    init_s = time.perf_counter() - start
    times: dict[str, list[float]] = {"local": [], "ray": []}
    frames = {}
    for r in range(args.repeats):
        for label in ("local", "ray"):
            extra = (
                {}
                if label == "local"
                else {
                    "executor": ExecutorName.RAY,
                    "ray": RaySettings(cell_cpus=1),
                }
            )
            out = root / f"{label}-{r}"
            start = time.perf_counter()
            result = run_sweep(config(out, grid, **extra))
            times[label].append(time.perf_counter() - start)
            frames[label] = pd.read_csv(result.csv_path)
    ray.shutdown()
    key = ["mech", "param_value", "seed", "distance"]
    a = frames["local"].sort_values(key).reset_index(drop=True)
    b = frames["ray"].sort_values(key).reset_index(drop=True)
    same = np.allclose(a[METRICS].to_numpy(float), b[METRICS].to_numpy(float), equal_nan=True)
    local, on_ray = float(np.median(times["local"])), float(np.median(times["ray"]))
    cells = 2 * args.cells_per_seed
    print(f"{cells} cells, 1 CPU each way, median of {args.repeats}:")
    print(f"  local {local:.1f} s; ray {on_ray:.1f} s = {on_ray / local:.2f}x local")
    print(f"  ray.init {init_s:.1f} s once: {(on_ray + init_s) / local:.2f}x local counting it")
    print(f"  same metrics in both runs.csv: {same}")


if __name__ == "__main__":
    main()
