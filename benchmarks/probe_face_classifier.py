#!/usr/bin/env python
"""The faces' classifier on LFW20's real split: trained on real D_train records (per person, as
the profiles cap them), early-stopped on real D_val, scored on real D_test. What bounds the
accuracy a classifier trained on D_gen can reach (``acc_real`` in a sweep).

  python benchmarks/probe_face_classifier.py --data-home DIR [--seed 0] [--per-person 10] \
      [--kind resnet-half] [--lr 2e-3] [--epochs 80] [--patience 20] [--threads 1]

``--per-person 0`` trains on all of D_train. Prints test and validation accuracy, D_test's
majority rate and the seconds taken.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from audit.cell.membership import balanced_subset
from audit.datasets import load_dataset, stratified_split
from models.classifier_training import ClassifierSettings, accuracy, train_classifier
from models.factory import CLASSIFIER_RECIPES, model_family


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-home", type=Path, required=True)
    p.add_argument("--dataset", default="lfw20")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--per-person", type=int, default=10)
    p.add_argument("--kind", default="resnet-half")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--epochs", type=int, default=80)
    p.add_argument("--patience", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    data = load_dataset(args.dataset, data_home=args.data_home)
    split = stratified_split(data.y, fractions=data.split_fractions, seed=args.seed)
    train_idx = split.train
    if args.per_person:
        k = args.per_person * data.num_classes
        rng = np.random.default_rng(args.seed)
        train_idx = balanced_subset(train_idx, data.y[train_idx], k, rng)

    def pair(idx):
        return torch.from_numpy(data.x[idx]), torch.from_numpy(data.y[idx])

    settings = ClassifierSettings(
        epochs=args.epochs, patience=args.patience, seed=args.seed, **CLASSIFIER_RECIPES[args.kind]
    )
    if args.lr is not None:
        settings = replace(settings, lr=args.lr)
    family = model_family(data.x.shape[1:], data.num_classes)
    load = os.getloadavg()
    start = time.perf_counter()
    model = train_classifier(
        lambda: family.classifier(args.kind), pair(train_idx), pair(split.val), settings
    )
    seconds = time.perf_counter() - start
    test = pair(split.test)
    majority = np.bincount(data.y[split.test]).max() / len(split.test)
    print(
        f"{args.dataset} seed {args.seed}, {len(train_idx)} real D_train records, {args.kind}, "
        f"lr {settings.lr}: test accuracy {accuracy(model, test):.3f} (n = {len(split.test)}, "
        f"majority rate {majority:.3f}), D_val accuracy {accuracy(model, pair(split.val)):.3f}; "
        f"{seconds:.0f} s on {args.threads} thread(s), load averages at start "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )


if __name__ == "__main__":
    main()
