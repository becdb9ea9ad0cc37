#!/usr/bin/env python
"""How much does a cell's accuracy on D_gen move with bf16 generation, against how much it moves
with the draw of D_gen itself? The noise a precision change must stay within.

  python benchmarks/study_precision_utility.py RUN_DIR CELL_HASH [--data-home DIR] \
      [--gen-seeds 101 102 103 104 105] [--threads 2] [--device cuda]

For one finished cell (its ``model.pt``), on ``--device``, this reruns the cell's generation and
utility classifier (:func:`audit.cell.gen_accuracy.generate_and_classify`, the sweep's code):

- ``float32``: as the sweep ran it (reproduces the row's ``acc``);
- ``bf16``: the same latents decoded under bf16 autocast (emulated on a CPU without bf16: the
  same rounding of inputs and weights as on a GPU, float32 accumulation);
- ``seed s``: float32 with D_gen's draw, its labels' order, the holdout and the classifier's
  seed taken from seed s instead of the cell's: what another draw of the same release gives.

Prints each accuracy, the draws' mean and standard deviation, and where bf16 falls in units of
that deviation. ``acc`` in a row carries only its test-set binomial interval; the draws' spread
is the larger part of its noise where the generated records carry little identity.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import torch

from audit import io
from audit.cell.gen_accuracy import generate_and_classify
from audit.cell.membership import cell_data
from audit.config import CACHE_SCHEMA
from audit.datasets import dataset_split, load_dataset
from audit.mechanisms import cell_from_canonical
from audit.mechanisms.mechanism import Context
from audit.report.grids import load_target_vae
from audit.results.cells import load_cell_config
from dpvae_core.progress import null_progress
from models.factory import model_family


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("cell")
    p.add_argument("--data-home", type=Path, default=None)
    p.add_argument("--gen-seeds", nargs="+", type=int, default=[101, 102, 103, 104, 105])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    cell_dir = args.run_dir / "cells" / args.cell
    try:
        cell = load_cell_config(cell_dir)
    except ValueError as exc:  # an older cache schema: generation and utility read the same
        if "cache schema" not in str(exc):
            raise
        body = {**io.read_json(cell_dir / "config.json")["config"], "cache_schema": CACHE_SCHEMA}
        cell = cell_from_canonical(body)
        print(f"note: {exc.args[0].split(';')[0]}; read as schema {CACHE_SCHEMA}")
    dataset = load_dataset(cell.dataset, data_home=args.data_home)
    split = dataset_split(dataset, cell.seed)
    data = cell_data(dataset, split, cell)
    family = model_family(dataset.shape, dataset.num_classes)
    model = family.for_inference(load_target_vae(cell_dir, cell, dataset).to(args.device)).eval()
    target = SimpleNamespace(model=model, family=family, prepared=SimpleNamespace(train=data.train))
    ctx = Context(device=args.device, progress=null_progress)
    bf16 = replace(cell, options=(*cell.draws.options, ("precision", "bf16")))
    print(f"cell {args.cell}: {cell.mech} {cell.param_value} seed {cell.seed}, {args.device}")
    runs = {"float32": cell, "bf16": bf16}
    runs.update({f"seed {s}": replace(cell, seed=s) for s in args.gen_seeds})
    acc = {}
    for label, variant in runs.items():
        start = time.perf_counter()
        acc[label] = generate_and_classify(variant, data, target, ctx).acc  # type: ignore[arg-type]
        print(f"  {label:>10}: acc {acc[label]:.3f} ({time.perf_counter() - start:.0f} s)")
    draws = [acc[f"seed {s}"] for s in args.gen_seeds]
    mean, sd = statistics.mean(draws), statistics.stdev(draws)
    print(
        f"draws of D_gen: mean {mean:.3f}, sd {sd:.3f} (n = {len(draws)}); "
        f"bf16 - float32 = {acc['bf16'] - acc['float32']:+.3f} = "
        f"{(acc['bf16'] - acc['float32']) / sd:+.2f} sd"
    )


if __name__ == "__main__":
    main()
