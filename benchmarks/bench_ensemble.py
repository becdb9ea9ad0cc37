#!/usr/bin/env python
"""A cell's target VAE and its reference models trained one after another (solo, what a cell
does on the CPU) against one ensemble (models/ensemble.py, what a cell does on CUDA).

  OMP_NUM_THREADS=1 python benchmarks/bench_ensemble.py [--threads 1] [--device cpu] \
      [--sizes 200 186 186] [--side 64] [--epochs 2] [--repeats 3] [--precision float32] [--dp]

``--dp``: DP-Adam (z = 1, C = 1), solo ``train_dp_vae`` (book-keeping clipping) against
``models/dp/dp_ensemble.py`` (per-record gradients from torch.func, clipped and noised per
member).

The workload is LFW20's quick shapes on synthetic records (timing does not depend on the
pixels): 64x64x3 images, 20 classes, latent size 16, batch 16, lr 2e-3; the target trains on
200 records and each of the R = 2 reference models on 186 (min(half the 372 reference records,
|D_train|)), so the members step out of phase and the ensemble pads. The two paths take turns
in every repeat, each from the same freshly initialised models and seeds; the medians are
printed with the ratio solo / ensemble (above 1: the ensemble is faster).

Then, from the last repeat, each member's distance to its solo run, ||w_ens - w_solo|| /
||w_solo - w_init||, beside the distance between two solo runs of the same member (0 on the
CPU; on CUDA it shows cuDNN's own run-to-run spread), and the tolerance of
tests/models/test_ensemble.py for these shapes (2 T gamma_n, n = batch x 64 x 64; with ``--dp``,
tests/models/dp/test_dp_ensemble.py's, n = the parameter count).
"""

from __future__ import annotations

import argparse
import math

import torch
from timing import device_seconds

from models.dp import DPSettings, train_dp_vae
from models.dp.dp_ensemble import DPEnsembleMember, train_dp_vae_ensemble
from models.ensemble import EnsembleMember, train_vae_ensemble
from models.training import VAETrainSettings, ValidationSchedule, train_vae
from models.vae import ConditionalConvVAE

CLASSES, LATENT, BATCH, LR = 20, 16, 16, 2e-3


def _members(args: argparse.Namespace) -> list[EnsembleMember]:
    gen = torch.Generator().manual_seed(0)
    side = args.side
    members = []
    for i, n in enumerate(args.sizes):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(100 + i)
            model = ConditionalConvVAE(
                channels=3, height=side, width=side, num_classes=CLASSES, latent_dim=LATENT
            )
        train = (
            torch.rand(n, 3, side, side, generator=gen),
            torch.randint(0, CLASSES, (n,), generator=gen),
        )
        val = (torch.rand(32, 3, side, side, generator=gen), torch.randint(0, CLASSES, (32,)))
        settings = VAETrainSettings(
            epochs=args.epochs,
            batch_size=BATCH,
            lr=LR,
            beta=1.0,
            seed=1000 + i,
            device=args.device,
            validation=ValidationSchedule(every=10, records=32),
            precision=args.precision,
        )
        members.append(EnsembleMember(model=model, train=train, val=val, settings=settings))
    return members


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().double().cpu().flatten() for p in model.parameters()])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: as is)")
    p.add_argument("--sizes", type=int, nargs="+", default=[200, 186, 186])
    p.add_argument("--side", type=int, default=64, help="image side (8: digits' shapes)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--precision", default="float32")
    p.add_argument("--dp", action="store_true", help="DP-Adam instead of non-private Adam")
    args = p.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(
        f"device {args.device}, {torch.get_num_threads()} threads, members {args.sizes}, "
        f"{args.epochs} epochs, {args.precision}, {'DP-Adam' if args.dp else 'Adam'}, "
        f"torch {torch.__version__}"
    )
    times: dict[str, list[float]] = {"solo": [], "ensemble": []}
    finals: dict[str, list[list[torch.Tensor]]] = {"solo": [], "ensemble": []}
    init = [_flat(m.model) for m in _members(args)]

    def dp(i: int) -> DPSettings:
        return DPSettings(noise_multiplier=1.0, clip_norm=1.0, noise_seed=2000 + i)

    def solo() -> list[EnsembleMember]:
        members = _members(args)
        for i, m in enumerate(members):
            if args.dp:
                train_dp_vae(m.model, m.train, m.val, m.settings, dp(i))
            else:
                train_vae(m.model, m.train, m.val, m.settings)
        return members

    def together() -> list[EnsembleMember]:
        members = _members(args)
        if args.dp:
            train_dp_vae_ensemble(
                [
                    DPEnsembleMember(m.model, m.train, m.val, m.settings, dp(i))
                    for i, m in enumerate(members)
                ]
            )
        else:
            train_vae_ensemble(members)
        return members

    for _ in range(args.repeats + 1):  # the first round warms up and is not counted
        for label, fn in (("solo", solo), ("ensemble", together)):
            out: list[list[EnsembleMember]] = []
            seconds = device_seconds(lambda fn=fn, out=out: out.append(fn()), args.device)
            times[label].append(seconds)
            finals[label].append([_flat(m.model) for m in out[0]])
    med = {k: sorted(v[1:])[len(v[1:]) // 2] for k, v in times.items()}
    print(f"solo     {med['solo']:8.2f} s  (median of {args.repeats}: {times['solo'][1:]})")
    print(f"ensemble {med['ensemble']:8.2f} s  (median of {args.repeats}: {times['ensemble'][1:]})")
    print(f"ratio solo / ensemble: {med['solo'] / med['ensemble']:.2f}")
    u = torch.finfo(torch.float32).eps / 2
    n = init[0].numel() if args.dp else BATCH * args.side * args.side  # DP: a record's norm over P
    gamma = n * u / (1 - n * u)
    for i, size in enumerate(args.sizes):
        solo_w, other_w, ens_w = (
            finals["solo"][-1][i],
            finals["solo"][-2][i],
            finals["ensemble"][-1][i],
        )
        moved = float((solo_w - init[i]).norm())
        steps = args.epochs * math.ceil(size / BATCH)
        print(
            f"member {i} ({size} records): "
            f"|ens - solo| {float((ens_w - solo_w).norm()) / moved:.2e}"
            f", |solo - solo| {float((other_w - solo_w).norm()) / moved:.2e}"
            f", tolerance 2 T gamma_n {2 * steps * gamma:.2e}"
        )


if __name__ == "__main__":
    main()
