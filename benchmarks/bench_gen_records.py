#!/usr/bin/env python
"""Utility accuracy against |D_gen|: one non-private baseline VAE per dataset, the classifier
trained on the first n of its generated records for each n.

  python benchmarks/bench_gen_records.py [--dataset digits lfw-subset] [--profile quick]
                                         [--sizes 50 200 500 1000 2000] [--seed 0]

The baseline cell of the profile (mech none) is trained once per dataset; for each n, D_gen is
drawn as the sweep draws it (``models.generation.gen_labels`` of n, labels in D_train's class
shares, the cell's seed), so the sizes share the model and differ in n and the draws. The
classifier settings, hold-out share and test set are the sweep's. Prints one
row per (dataset, n): accuracy on the real D_test, the chance level and the classifier trained on
real D_train for comparison.
"""

from __future__ import annotations

import argparse

import torch

from audit.cell.gen_accuracy import GEN_HOLDOUT, classifier_accuracy, classifier_settings
from audit.cell.membership import cell_data
from audit.config import CellConfig
from audit.datasets import load_dataset, stratified_split
from audit.mechanisms import Context, get_mechanism
from audit.profiles import ProfileName, profile_for_dataset
from dpvae_core.progress import null_progress
from dpvae_core.seeding import Purpose, derive_seed
from models.classifier_training import holdout_split
from models.factory import model_family
from models.generation import gen_labels, generate


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--dataset", nargs="+", default=["digits", "lfw-subset"])
    p.add_argument("--profile", default="quick", choices=[x.value for x in ProfileName])
    p.add_argument("--sizes", nargs="+", type=int, default=[50, 200, 500, 1000, 2000])
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def measure(dataset_name: str, profile_name: ProfileName, sizes: list[int], seed: int) -> None:
    dataset = load_dataset(dataset_name)
    profile = profile_for_dataset(profile_name, dataset_name)
    cell = CellConfig(dataset_name, "none", "none", None, seed, profile, (("profile_name", "x"),))
    split = stratified_split(dataset.y, fractions=dataset.split_fractions, seed=seed)
    data = cell_data(dataset, split, cell)
    ctx = Context(device="cpu", progress=null_progress)
    mech = get_mechanism("none")
    prepared = mech.prepare(cell, data, ctx)
    family = model_family(data.shape, data.num_classes)
    torch.manual_seed(derive_seed(seed, Purpose.INIT) % 2**63)
    model = family.target_vae(latent_dim=profile.latent_dim, per_example_gradients=False)
    mech.train(model, prepared, cell, ctx)
    model = family.for_inference(model).eval()
    settings = classifier_settings(cell, "cpu", "gen")
    real = classifier_accuracy(
        data.train,
        data.val,
        data.test,
        num_classes=data.num_classes,
        settings=classifier_settings(cell, "cpu", "real"),
        ctx=ctx,
        desc="real",
    )
    for n in sorted(sizes):
        labels = gen_labels(data.train[1], n, seed=seed)
        gen_x, gen_y = generate(
            model, labels, seed=seed, method=family.generation, source=prepared.train
        )
        fit, hold = holdout_split(
            n,
            fraction=GEN_HOLDOUT,
            seed=derive_seed(seed, Purpose.GENERATE, "holdout") % 2**32,
        )
        acc = classifier_accuracy(
            (gen_x[fit], gen_y[fit]),
            (gen_x[hold], gen_y[hold]),
            data.test,
            num_classes=data.num_classes,
            settings=settings,
            ctx=ctx,
            desc="gen",
        )
        print(
            f"{dataset_name}\t{profile_name.value}\tn_train={len(data.train[0])}\t"
            f"gen_records={n}\tacc={acc:.3f}\tchance={1 / data.num_classes:.3f}\t"
            f"acc_real={real:.3f}\tn_test={len(data.test[0])}",
            flush=True,
        )


def main() -> None:
    args = parse_args()
    for name in args.dataset:
        measure(name, ProfileName(args.profile), args.sizes, args.seed)


if __name__ == "__main__":
    main()
