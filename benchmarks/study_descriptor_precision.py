#!/usr/bin/env python
"""Does the face descriptor in bf16 (a bf16 cell's classifier, ``models.face_embedding``) give the
accuracy float32 gives? LFW20's face-embedding classifier scored both ways on the same faces:

* real: trained on real D_train (its regularisation chosen on D_val), scored on real D_test, per
  seed (the cells' ``acc_real``);
* generated: for each trained target VAE in ``--cells`` (a sweep's output folder), ``--generated``
  faces decoded from prior latents with D_val's labels drawn at random (seeded), the classifier
  trained on them (a held-out fifth choosing its regularisation, as a cell does) and scored on
  real D_test (a cell's ``acc``).

Prints per set the two accuracies, their difference, the binomial band 1.96 sqrt(2 p (1 - p) / n)
that ``benchmarks/compare_precision.py`` holds accuracies to, and the largest relative distance
between a face's float32 and bf16 codes.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/study_descriptor_precision.py \\
        --data-home ../shared/data/lfw --seeds 0 1 2 --cells OUT
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this tree's code, not another

from audit.cell.membership import cell_data  # noqa: E402
from audit.datasets import dataset_split, load_dataset  # noqa: E402
from audit.mechanisms import make_cell  # noqa: E402
from audit.profiles import ProfileName, profile_for_dataset  # noqa: E402
from audit.report.grids import load_target_vae  # noqa: E402
from audit.results.cells import load_cell_config  # noqa: E402
from models.face_embedding import descriptor, embedding_accuracy  # noqa: E402

PRECISIONS = ("float32", "bf16")


def band(p: float, n: int) -> float:
    return 1.96 * math.sqrt(2 * p * (1 - p) / n)


def code_distance(faces: torch.Tensor) -> float:
    """The largest ||code_bf16 - code_float32|| / ||code_float32|| over ``faces``."""
    embed = descriptor("cpu")
    a, b = (embed(faces, precision=p) for p in PRECISIONS)
    return float((np.linalg.norm(a - b, axis=1) / np.linalg.norm(a, axis=1)).max())


def report(label: str, accs: dict[str, float], n: int, distance: float) -> float:
    diff = accs["bf16"] - accs["float32"]
    width = band(accs["float32"], n)
    print(
        f"{label:<44} float32 {accs['float32']:.3f}  bf16 {accs['bf16']:.3f}  "
        f"diff {diff:+.3f} (band {width:.3f}{'' if abs(diff) <= width else ', OUTSIDE'})  "
        f"code distance {distance:.2e}",
        flush=True,
    )
    return diff


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-home", required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--cells", type=Path, default=None, help="a sweep's output folder")
    p.add_argument("--generated", type=int, default=1000)
    args = p.parse_args()
    dataset = load_dataset("lfw20", data_home=args.data_home)
    profile = profile_for_dataset(ProfileName.QUICK, "lfw20")
    data = {}
    for seed in args.seeds:
        cell = make_cell("lfw20", "none", None, None, seed, profile, {})
        data[seed] = cell_data(dataset, dataset_split(dataset, seed), cell)
    diffs = []
    for seed, d in data.items():
        accs = {q: embedding_accuracy(d.train, d.val, d.test, precision=q) for q in PRECISIONS}
        diffs.append(report(f"real, seed {seed}", accs, len(d.test[1]), code_distance(d.test[0])))
    cell_dirs = sorted((args.cells / "cells").iterdir()) if args.cells is not None else []
    for cell_dir in cell_dirs:
        cell = load_cell_config(cell_dir)
        if cell.seed not in data:
            continue
        d = data[cell.seed]
        vae = load_target_vae(cell_dir, cell, dataset)
        gen = torch.Generator().manual_seed(1000 + cell.seed)
        y = d.val[1][torch.randint(len(d.val[1]), (args.generated,), generator=gen)]
        z = torch.randn(args.generated, vae.latent_dim, generator=gen)
        with torch.no_grad():
            x = vae.decode(z, y)
        fit = torch.arange(args.generated) % 5 != 0
        accs = {
            q: embedding_accuracy((x[fit], y[fit]), (x[~fit], y[~fit]), d.test, precision=q)
            for q in PRECISIONS
        }
        label = f"generated, {cell.mech} {cell.param_value}, seed {cell.seed}"
        diffs.append(report(label, accs, len(d.test[1]), code_distance(x[:200])))
    print(
        f"\n{len(diffs)} sets: mean difference {np.mean(diffs):+.4f}, largest "
        f"{max(diffs, key=abs):+.3f}"
    )


if __name__ == "__main__":
    main()
