#!/usr/bin/env python
"""What validating the target VAE costs, as a ratio to training it (target: at most 10 %).

  python benchmarks/bench_validation.py [--epochs 20] [--train 50] [--val 381] [--threads 2]

The trade-off paper's 64x64x3 conditional VAE (latent 100, 20 classes: LFW20) on random data of the
standard profile's LFW20 sizes (50 D_train records, batch 16; 381 D_val records). Three runs of
the real loop (``models.training.train_vae``), interleaved over ``--repeats``:

- ``train only``: a 1-record D_val scored once, at the end (the baseline: training alone);
- ``every epoch``: all of D_val after every epoch (the loop before the schedule);
- ``schedule``: the default :class:`models.training.ValidationSchedule` (a fixed subsample every
  ``every`` epochs, all of D_val after the last epoch).

Each ratio is (run - train only) / train only, measured over ``--epochs`` epochs. The schedule's
one full pass at the end weighs more over a few epochs than over a profile's hundreds, so the
script also prints the per-pass costs (timed alone in the same run) and the schedule's share
extrapolated to ``--profile-epochs`` (300: the standard profile).
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import replace

import torch
from timing import median_times

from models.training import (
    EVERY_EPOCH,
    VAETrainSettings,
    ValidationSchedule,
    evaluate_vae_loss,
    train_vae,
)
from models.vae import ConditionalConvVAE

SHAPE, CLASSES, LATENT = (3, 64, 64), 20, 100


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=20, help="epochs per timed run")
    p.add_argument("--profile-epochs", type=int, default=300, help="epochs to extrapolate to")
    p.add_argument("--train", type=int, default=50, help="D_train records")
    p.add_argument("--val", type=int, default=381, help="D_val records")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    return p.parse_args()


def records(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, *SHAPE, generator=gen), torch.randint(0, CLASSES, (n,), generator=gen)


def fresh_vae() -> ConditionalConvVAE:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return ConditionalConvVAE(
            channels=SHAPE[0],
            height=SHAPE[1],
            width=SHAPE[2],
            num_classes=CLASSES,
            latent_dim=LATENT,
        )


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    train, val = records(args.train, 1), records(args.val, 2)
    one = (val[0][:1], val[1][:1])
    base = VAETrainSettings(
        epochs=args.epochs, batch_size=args.batch_size, lr=1e-3, beta=1.0, seed=0
    )
    schedule = ValidationSchedule()
    never = ValidationSchedule(every=args.epochs + 1, records=1)
    subset = schedule.subset(val, seed=0)
    model = fresh_vae()
    print(
        f"torch {torch.__version__}, {args.threads} thread(s) of {os.cpu_count()} CPUs; "
        f"{SHAPE} VAE, latent {LATENT}; D_train {args.train}, D_val {args.val}, batch "
        f"{args.batch_size}, {args.epochs} epochs a run, {args.repeats} repeats; schedule: every "
        f"{schedule.every} epochs on {schedule.records} records, all of D_val at the end"
    )
    times = median_times(
        {
            "train only": lambda: train_vae(
                fresh_vae(), train, one, replace(base, validation=never)
            ),
            "every epoch": lambda: train_vae(
                fresh_vae(), train, val, replace(base, validation=EVERY_EPOCH)
            ),
            "schedule": lambda: train_vae(
                fresh_vae(), train, val, replace(base, validation=schedule)
            ),
            "full pass": lambda: evaluate_vae_loss(model, val, beta=1.0, seed=0),
            "subset pass": lambda: evaluate_vae_loss(model, subset, beta=1.0, seed=0),
        },
        args.repeats,
    )
    t_train = times["train only"][0]
    for label in ("every epoch", "schedule"):
        extra = times[label][0] - t_train
        print(
            f"{label:>12}: {times[label][0]:7.2f} s wall; "
            f"validation / training = {extra / t_train:.3f}"
        )
    epoch = t_train / args.epochs
    n_sub = math.ceil(args.profile_epochs / schedule.every) - 1
    share = (n_sub * times["subset pass"][0] + times["full pass"][0]) / (
        args.profile_epochs * epoch
    )
    old = times["full pass"][0] / epoch
    print(
        f"per pass: full D_val {times['full pass'][0]:.3f} s, "
        f"subset {times['subset pass'][0]:.3f} s; training epoch {epoch:.3f} s"
    )
    print(
        f"extrapolated to {args.profile_epochs} epochs: every epoch {old:.3f}, "
        f"schedule {share:.3f} (validation / training)"
    )


if __name__ == "__main__":
    main()
