#!/usr/bin/env python
"""Time one training epoch of the trade-off paper's 64x64x3 VAE: non-private, DP-Adam in every
Opacus grad-sample mode, and term-wise DP-Adam; print each against the non-private epoch.

  python benchmarks/bench_dp_epoch.py [--records 320 | --batches 10] [--repeats 2] [--device cpu]
                                      [--model conv | lstm] [--latent 100] [--no-termwise]
                                      [--precisions float32 bf16]

Every path is the real training loop (``models.training.train_vae``,
``models.dp.train_dp_vae``, ``models.dp.termwise_loop.train_termwise_vae``) on random data,
one epoch, no validation set. The DP epochs run ceil(N / B) Poisson-sampled steps of expected
size B, the non-private epoch ceil(N / B) shuffled batches of size B. Each path first runs one
untimed warm-up step; the reported times are the fastest of ``--repeats`` interleaved epochs,
as wall time and as this process's CPU time (``time.process_time``). On a shared machine the
CPU time with ``--threads 1`` is the stable measure of the work each path does. A DP epoch's
Poisson batches hold N records on average only (one seed's six batches of 32 held 205, not 192),
so the last columns divide each path's CPU time by the records it trained on: the ratio an
epoch has in expectation, against the first precision's non-private epoch and against the
non-private epoch of the path's own precision. ``--precisions float32 bf16`` runs every path in
each precision, taking turns (bf16 needs native bf16: AVX-512 BF16 or AMX on a CPU).

Ghost clipping: the loss is a sum of per-example terms, so Opacus's ghost clipping applies to DP-
Adam; Opacus 1.6 has ghost norms for Linear layers only, so the conv layers (most of the work)
materialise per-layer per-example gradients anyway, and a second backward pass follows. It
cannot clip per partition. ``bk`` is book-keeping (``models.dp.book_keeping``, the default): one
input-only backward pass, per-layer ghost or materialised norms, one re-weighted weight-gradient
product per layer. Term-wise epochs use the default mode for the sample-wise term and either
per-partition method for the batch-wise term (b = 4 partitions, alpha = 100, MMD):
``autograd`` (one backward pass per partition) or ``opacus`` (the default mode with one group
per partition; for bk, one encoder pass and one product per partition).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable
from dataclasses import replace

import torch

from dpvae_core.allocator import keep_freed_memory
from dpvae_core.precision import check_precision_supported
from models.divergences import Divergence
from models.dp import (
    DEFAULT_GRAD_SAMPLE_MODE,
    DPSettings,
    GradSampleMode,
    train_dp_vae,
)
from models.dp.termwise_loop import PartitionGradients, TermwiseSettings, train_termwise_vae
from models.lstm_vae import LstmVAE
from models.training import Pair, VAETrainSettings, train_vae
from models.vae import ConditionalConvVAE

SHAPE = (3, 64, 64)
CLASSES, LATENT = 20, 100
#: The trade-off paper's MotionSense records: 10 s windows at 50 Hz of 12 device-motion channels, 6
#: classes.
SERIES_SHAPE = (500, 12)
SERIES_CLASSES = 6


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=320, help="random records in the epoch")
    p.add_argument(
        "--batches",
        type=int,
        default=None,
        help="batches per epoch (sets --records to batches * batch size)",
    )
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument(
        "--latent", type=int, default=LATENT, help="latent size (LFW20's quick profile: 16)"
    )
    p.add_argument(
        "--model",
        choices=["conv", "lstm"],
        default="conv",
        help="conv: the trade-off paper's 64x64x3 VAE; lstm: its LSTM VAE on 500 x 12 series (the "
        "non-private epoch uses fused nn.LSTMs, DP epochs Opacus's DPLSTM, as the pipeline does)",
    )
    p.add_argument("--length", type=int, default=SERIES_SHAPE[0], help="series length (lstm)")
    p.add_argument("--repeats", type=int, default=1, help="timed epochs per path (fastest kept)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: cores)")
    p.add_argument(
        "--modes",
        nargs="+",
        default=[m.value for m in GradSampleMode],
        choices=[m.value for m in GradSampleMode],
    )
    p.add_argument("--no-termwise", action="store_true", help="leave out the term-wise epochs")
    p.add_argument(
        "--precisions",
        nargs="+",
        default=["float32"],
        help="each path in each precision (settings.precision; DP-Adam's book-keeping runs its "
        "per-example gradients in bf16 under bf16); the first one's non-private epoch is the "
        "baseline",
    )
    args = p.parse_args()
    if args.batches is not None:
        args.records = args.batches * args.batch_size
    if args.records < args.batch_size:
        p.error(f"--records must be at least the batch size {args.batch_size}")
    return args


def random_data(n: int, model: str, length: int, seed: int = 0) -> Pair:
    gen = torch.Generator().manual_seed(seed)
    if model == "lstm":
        x = torch.rand(n, length, SERIES_SHAPE[1], generator=gen) * 2 - 1
        return x, torch.randint(0, SERIES_CLASSES, (n,), generator=gen)
    return torch.rand(n, *SHAPE, generator=gen), torch.randint(0, CLASSES, (n,), generator=gen)


def make_model(
    device: str, model: str, length: int, *, private: bool, latent: int = LATENT
) -> torch.nn.Module:
    torch.manual_seed(0)
    if model == "lstm":
        vae = LstmVAE(
            length=length,
            features=SERIES_SHAPE[1],
            num_classes=SERIES_CLASSES,
            latent_dim=latent,
            per_example_gradients=private,
        )
    else:
        vae = ConditionalConvVAE(
            channels=SHAPE[0],
            height=SHAPE[1],
            width=SHAPE[2],
            num_classes=CLASSES,
            latent_dim=latent,
        )
    return vae.to(device)


def paths(
    device: str, modes: list[str], *, termwise_too: bool = True
) -> dict[str, Callable[..., object]]:
    def dp(mode: GradSampleMode) -> DPSettings:
        return DPSettings(noise_multiplier=1.0, clip_norm=10.0, noise_seed=0, grad_sample_mode=mode)

    def termwise(gradients: PartitionGradients) -> TermwiseSettings:
        return TermwiseSettings(
            divergence=Divergence.MMD,
            alpha=100.0,
            partitions=4,
            clip_norm=1.0,
            seed=0,
            gradients=gradients,
        )

    out: dict[str, Callable[..., object]] = {
        "non-private": lambda m, tr, va, s: train_vae(m, tr, va, s),
    }
    for mode in map(GradSampleMode, modes):
        out[f"dp-adam {mode.value}"] = lambda m, tr, va, s, mode=mode: train_dp_vae(
            m, tr, va, s, dp(mode)
        )
    sample = GradSampleMode(DEFAULT_GRAD_SAMPLE_MODE)
    for gradients in PartitionGradients if termwise_too else ():
        out[f"term-wise {sample.value}/{gradients.value}"] = lambda m, tr, va, s, g=gradients: (
            train_termwise_vae(m, tr, va, s, dp(sample), termwise(g))
        )
    return out


def time_once(
    name: str, run: Callable[..., object], data: Pair, settings: VAETrainSettings, args
) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds of this process, records trained on) of one epoch of ``run``:
    a DP epoch's Poisson batches hold N records only on average."""
    device = args.device
    empty = (data[0][:0], data[1][:0])
    model = make_model(
        device,
        args.model,
        args.length,
        private=not name.startswith("non-private"),
        latent=args.latent,
    )
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter(), time.process_time()
    history = run(model, data, empty, settings)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    dp = getattr(history, "dp", None)
    return wall, cpu, len(data[0]) if dp is None else dp.steps * dp.mean_batch_size


def main() -> None:
    args = parse_args()
    kept = keep_freed_memory()  # as every cell process runs (DPVAE_MALLOC=default: glibc's own)
    threads = args.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    data = random_data(args.records, args.model, args.length)
    warm = (data[0][: args.batch_size], data[1][: args.batch_size])
    settings = VAETrainSettings(
        epochs=1, batch_size=args.batch_size, lr=1e-3, beta=1.0, seed=0, device=args.device
    )
    steps = math.ceil(args.records / args.batch_size)
    what = (
        f"LSTM VAE on {args.length} x {SERIES_SHAPE[1]} series ({SERIES_CLASSES} classes"
        if args.model == "lstm"
        else f"64x64x3 conditional VAE ({CLASSES} classes"
    )
    print(
        f"{what}, latent {args.latent}), {args.records} random "
        f"records, batch {args.batch_size}, {steps} steps/epoch, device {args.device}, "
        f"{threads} threads, torch {torch.__version__}, fastest of {args.repeats} "
        f"interleaved epoch(s), freed memory {'kept' if kept else 'returned (glibc defaults)'}"
    )
    for precision in args.precisions:
        check_precision_supported(precision, args.device)
    runs: dict[str, tuple[Callable[..., object], VAETrainSettings]] = {}
    for precision in args.precisions:
        tag = "" if precision == args.precisions[0] else f" {precision}"
        for name, run in paths(args.device, args.modes, termwise_too=not args.no_termwise).items():
            runs[name + tag] = (run, replace(settings, precision=precision))
    best: dict[str, tuple[float, float, float]] = {}
    for name, (run, prec_settings) in list(runs.items()):
        try:
            time_once(name, run, warm, prec_settings, args)  # one step: allocations, kernels
        except Exception as exc:  # noqa: BLE001 - report a mode that cannot run and go on
            print(f"{name}: failed, {type(exc).__name__}: {exc}")
            del runs[name]
    for _ in range(args.repeats):  # interleaved, so that load changes hit every path alike
        for name, (run, prec_settings) in runs.items():
            wall, cpu, records = time_once(name, run, data, prec_settings, args)
            old_wall, old_cpu, _ = best.get(name, (math.inf, math.inf, records))
            best[name] = (min(old_wall, wall), min(old_cpu, cpu), records)
    print(
        f"{'path':<31}{'wall s':>9}{'s/step':>9}{'x non-private':>15}{'cpu s':>9}"
        f"{'x non-private':>15}{'records':>9}{'cpu x per record':>18}{'x same precision':>18}"
    )
    base_wall, base_cpu, base_records = best["non-private"]
    for name, (wall, cpu, records) in best.items():
        per_record = (cpu / records) / (base_cpu / base_records)
        precision = runs[name][1].precision
        tag = "" if precision == args.precisions[0] else f" {precision}"
        _, same_cpu, same_records = best["non-private" + tag]
        same = (cpu / records) / (same_cpu / same_records)
        print(
            f"{name:<31}{wall:>9.2f}{wall / steps:>9.3f}{wall / base_wall:>15.2f}{cpu:>9.2f}"
            f"{cpu / base_cpu:>15.2f}{records:>9.0f}{per_record:>18.2f}{same:>18.2f}"
        )


if __name__ == "__main__":
    main()
