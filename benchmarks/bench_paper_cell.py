#!/usr/bin/env python
"""What one paper-profile cell costs, from measured fractions: the parts of a cell timed on a few
epochs or records and extrapolated to the paper profile's sizes.

  python benchmarks/bench_paper_cell.py [--dataset lfw20] [--data-home DIR] \
      [--train-epochs 1] [--attack-records 8] [--classifier-epochs 1]

Paper 003's profile (``--profile paper``): the target VAE trains 1000 epochs on all of D_train
(batch 32, latent 100); the reconstruction attack decodes N = 300 samples per record for 2000
attacked records (MSE and SSIM); the classifier trains up to 100 epochs (early stopping) on
2000 generated records, and once per dataset and seed on the real D_train. This script times, on
the dataset's real records and shapes, in one process:

- one epoch of non-private training (Adam) and one of DP-Adam (``cdp``, z = 1, book-keeping
  per-example gradients) on all of D_train;
- the reconstruction attack (MSE and SSIM, N = 300) on ``--attack-records`` records;
- one classifier epoch on 2000 records of the record shape (the dataset's paper-profile
  classifier: LFW20's residual net);

and prints each part's extrapolation and the cell's total for mech none and for a DP-Adam cell.
The validation schedule (a fixed D_val subsample every 10 epochs; ``bench_validation.py``) and
generation are left out (under 2 % of training there).
"""

from __future__ import annotations

import argparse
import math
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch

from attacks import AttackData, Distance, ReconstructionAttack
from audit.config import PROFILES, ProfileName, profile_for_dataset
from audit.datasets import load_dataset, stratified_split
from dpvae_core.progress import null_progress
from models.dp import DPSettings, train_dp_vae
from models.factory import CLASSIFIER_RECIPES, model_family
from models.training import ClassifierSettings, VAETrainSettings, train_classifier, train_vae

PAPER = PROFILES[ProfileName.PAPER]


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="lfw20")
    p.add_argument("--data-home", type=Path, default=None)
    p.add_argument("--train-epochs", type=int, default=1)
    p.add_argument("--attack-records", type=int, default=8)
    p.add_argument("--classifier-epochs", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    data = load_dataset(args.dataset, data_home=args.data_home)
    profile = profile_for_dataset(ProfileName.PAPER, args.dataset)
    split = stratified_split(data.y, fractions=data.split_fractions, seed=0)
    x = torch.from_numpy(data.x[split.train])
    y = torch.from_numpy(data.y[split.train])
    val = (x[:1], y[:1])  # validation is left out: one record, scored once per 10 epochs
    family = model_family(tuple(x.shape[1:]), data.num_classes)
    n_train = len(x)
    print(
        f"{args.dataset}: |D_train| = {n_train} (paper profile: all of it), record "
        f"{tuple(x.shape[1:])}, {data.num_classes} classes; {args.threads} threads"
    )

    def settings(epochs: int) -> VAETrainSettings:
        return VAETrainSettings(
            epochs=epochs, batch_size=PAPER.batch_size, lr=PAPER.lr, beta=PAPER.beta, seed=0
        )

    # warm-up (first-call allocations, kernel selection): one untimed epoch of each loop
    warm = family.target_vae(latent_dim=PAPER.latent_dim, per_example_gradients=False)
    train_vae(warm, (x[:64], y[:64]), val, settings(1))
    dp = DPSettings(noise_multiplier=1.0, clip_norm=1.0, noise_seed=0)
    train_dp_vae(
        family.target_vae(latent_dim=PAPER.latent_dim), (x[:64], y[:64]), val, settings(1), dp
    )
    torch.manual_seed(0)
    model = family.target_vae(latent_dim=PAPER.latent_dim, per_example_gradients=False)
    plain = _timed(lambda: train_vae(model, (x, y), val, settings(args.train_epochs)))
    plain /= args.train_epochs
    torch.manual_seed(0)
    model_dp = family.target_vae(latent_dim=PAPER.latent_dim)
    private = _timed(lambda: train_dp_vae(model_dp, (x, y), val, settings(args.train_epochs), dp))
    private /= args.train_epochs

    k = min(args.attack_records, n_train)
    attack = ReconstructionAttack(
        n_samples=PAPER.attack_samples, distances=(Distance.MSE, Distance.SSIM), seed=0
    )
    records = AttackData(x=x[:k], y=y[:k], is_member=np.arange(k) % 2 == 0)
    inference = family.for_inference(model).eval()
    per_record = _timed(lambda: attack.run(inference, records)) / k

    n_gen = PAPER.gen_records or 2000
    gx = torch.rand((n_gen, *x.shape[1:]))
    gy = torch.randint(data.num_classes, (n_gen,))
    kind = profile.classifier
    csettings = ClassifierSettings(
        epochs=args.classifier_epochs,
        patience=args.classifier_epochs,
        **CLASSIFIER_RECIPES.get(kind or "", {}),
    )
    per_cls_epoch = _timed(
        lambda: train_classifier(
            partial(family.classifier, kind),
            (gx, gy),
            (gx[:64], gy[:64]),
            csettings,
            progress=null_progress,
        )
    )
    per_cls_epoch /= args.classifier_epochs

    atk_records = min(PAPER.attack_records or 2 * n_train, 2 * n_train)
    train_none, train_dp = plain * PAPER.epochs, private * PAPER.epochs
    attack_s = per_record * atk_records
    classifier_s = per_cls_epoch * PAPER.classifier_epochs
    parts = {
        "train, none (1000 epochs)": train_none,
        "train, DP-Adam (1000 epochs)": train_dp,
        f"attack, N = {PAPER.attack_samples}, {atk_records} records, MSE+SSIM": attack_s,
        f"classifier on D_gen ({n_gen} records, <= {PAPER.classifier_epochs} epochs)": (
            classifier_s
        ),
    }
    print(
        f"measured: one epoch none {plain:.2f} s, one epoch DP-Adam {private:.2f} s "
        f"({private / plain:.2f}x), attack {per_record:.2f} s per record, classifier "
        f"{per_cls_epoch:.2f} s per epoch"
    )
    for label, seconds in parts.items():
        print(f"  {label}: {seconds / 3600:.2f} h")
    rest = attack_s + classifier_s
    for label, train in (("none", train_none), ("DP-Adam", train_dp)):
        print(f"one paper-profile cell, mech {label}: {(train + rest) / 3600:.2f} h")
    cells = 25
    for workers in (1, 4, 16, 64):
        total = math.ceil(cells / workers) * (train_dp + rest)
        print(f"  {cells} DP cells x 1 seed on {workers} such machine(s): {total / 3600:.1f} h")


if __name__ == "__main__":
    main()
