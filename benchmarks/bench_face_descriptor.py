"""Time the PyTorch port of dlib's face descriptor against dlib's ``compute_face_descriptor``.

Both paths are the face-embedding classifier's whole descriptor call
(``models.face_embedding.FaceDescriptor``: 64x64 faces resized to 150x150 uint8 chips, then the
network), on the same ``--faces`` faces: real LFW20 faces with ``--data-home``, random images
otherwise. dlib runs its own CPU code (``engine="dlib"``); the port runs channels-last with torch
at 1 and at 2 threads. The paths take turns within each repeat, so that a busy machine slows them
alike; each time is the median of ``--repeats`` (wall and process CPU time). Prints the
configuration, faces/s of each path, the port's speed-up over dlib, and the largest difference
and smallest cosine similarity of the port's codes against dlib's on the same chips.

    .venv/bin/python benchmarks/bench_face_descriptor.py --faces 64 --repeats 3 \
        --data-home /work/shared/data/lfw
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import torch
from timing import median_times

from models.face_embedding import FaceDescriptor, chip_pixels, dlib_available


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faces", type=int, default=64, help="faces a call (default 64)")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats (default 3)")
    parser.add_argument("--data-home", type=Path, help="folder holding lfw_home/ (real faces)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="port's threads")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def faces(args: argparse.Namespace) -> tuple[str, torch.Tensor]:
    if args.data_home is not None:
        from audit.datasets import load_dataset

        ds = load_dataset("lfw20", data_home=args.data_home)
        idx = np.linspace(0, len(ds.x) - 1, args.faces).round().astype(int)
        return f"lfw20 ({len(idx)} real faces)", torch.from_numpy(ds.x[idx])
    gen = torch.Generator().manual_seed(args.seed)
    return f"random ({args.faces} images)", torch.rand(args.faces, 3, 64, 64, generator=gen)


def main() -> None:
    args = parse_args()
    if not dlib_available():
        raise SystemExit("dlib and face-recognition-models are needed: pip install -e '.[faces]'")
    import dlib

    source, x = faces(args)
    reference, port = FaceDescriptor(engine="dlib"), FaceDescriptor()
    print(
        f"torch {torch.__version__}, dlib {dlib.__version__}, {os.cpu_count()} CPUs "
        f"({torch.backends.cpu.get_cpu_capability()}), OMP_NUM_THREADS="
        f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, load {os.getloadavg()}; faces: {source}"
    )

    def run_port(threads: int):
        def run() -> np.ndarray:
            torch.set_num_threads(threads)
            return port(x)

        return run

    paths = {"dlib": lambda: reference(x)}
    paths.update({f"port, {t} thread{'s' * (t > 1)}": run_port(t) for t in args.threads})
    for fn in paths.values():  # warm up (first-call allocations, oneDNN's kernel choice)
        fn()
    times = median_times(paths, args.repeats)
    base = times["dlib"][0]
    for label, (wall, cpu) in times.items():
        print(
            f"{label:16s} {len(x) / wall:8.1f} faces/s  (wall {wall:6.2f} s, CPU {cpu:6.2f} s)  "
            f"{base / wall:5.1f}x dlib"
        )
    # On the same chips: torch's bilinear resizing can round a few pixels differently at another
    # thread count (a float32 difference of 2e-7 across a .5 boundary), which moves a code by
    # about 3e-5.
    pixels = chip_pixels(x)
    ref, codes = reference._codes(pixels), port._codes(pixels)
    cos = (codes * ref).sum(1) / np.linalg.norm(codes, axis=1) / np.linalg.norm(ref, axis=1)
    print(
        f"port vs dlib: max abs difference {np.abs(codes - ref).max():.2e}, smallest cosine "
        f"{cos.min():.12f}, code norms {np.linalg.norm(ref, axis=1).min():.3f}-"
        f"{np.linalg.norm(ref, axis=1).max():.3f} (raw codes, not unit length)"
    )
    print(f"loads at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
