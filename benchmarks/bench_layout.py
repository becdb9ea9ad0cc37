#!/usr/bin/env python
"""Channels-last against the default memory layout, and bf16 autocast where the CPU has it, on
the 64x64x3 faces' workloads: a target-VAE training step, decoding (most of every attack and of
generation) and a classifier training step; ratios measured in one process, paths alternating.

  python benchmarks/bench_layout.py [--threads 1] [--repeats 5] [--latent-dim 16]

Each part's throughput is also given as a share of the machine's matmul throughput (a 1024^3
float32 matmul and, where the CPU has AVX-512 BF16 or AMX, a bf16 one), the ceiling a
convolution lowered to matrix products can approach. FLOPs are counted by
``torch.utils.flop_counter`` (convolutions and matrix products only).
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from timing import median_times
from torch.nn import functional as F
from torch.utils.flop_counter import FlopCounterMode

from models.resnet_classifier import ResNetClassifier
from models.training import channels_last_model, image_layout, vae_per_example_loss
from models.vae import ConditionalConvVAE


def matmul_gflops(dtype: torch.dtype, n: int = 1024, reps: int = 10) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - start) / 1e9


def has_fast_bf16() -> bool:
    """Whether this CPU runs bf16 matrix products natively (AVX-512 BF16 or AMX)."""
    return torch.backends.cpu.get_cpu_capability() in ("AVX512_BF16", "AMX") or any(
        flag in open("/proc/cpuinfo").read() for flag in (" avx512_bf16", " amx_bf16")
    )


def flops(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def workloads(latent_dim: int, batch: int, decode_batch: int):
    torch.manual_seed(0)
    x = torch.rand(batch, 3, 64, 64)
    y = torch.arange(batch) % 20
    noise = torch.randn(batch, latent_dim)
    z = torch.randn(decode_batch, latent_dim)
    zy = torch.arange(decode_batch) % 20

    def vae_step(model, opt, layout):
        def step():
            loss = vae_per_example_loss(model, layout(x), y, noise, beta=1.0)
            opt.zero_grad(set_to_none=True)
            loss.mean().backward()
            opt.step()

        return step

    def decode(model):
        def run():
            with torch.inference_mode():
                model.decode(z, zy)

        return run

    def clf_step(model, opt, layout):
        def step():
            loss = F.cross_entropy(model(layout(x)), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        return step

    def vae():
        torch.manual_seed(0)
        return ConditionalConvVAE(
            channels=3, height=64, width=64, num_classes=20, latent_dim=latent_dim
        )

    def clf():
        torch.manual_seed(0)
        return ResNetClassifier(channels=3, num_classes=20, width=0.5)

    same = lambda t: t  # noqa: E731
    paths = {}
    for name, make, step, n in (
        ("VAE train step", vae, vae_step, batch),
        ("classifier train step", clf, clf_step, batch),
    ):
        old, new = make(), channels_last_model(make())
        paths[name] = (
            step(old, torch.optim.Adam(old.parameters()), same),
            step(new, torch.optim.Adam(new.parameters()), image_layout),
            n,
        )
    paths["decode"] = (
        decode(vae().eval()),
        decode(channels_last_model(vae().eval())),
        decode_batch,
    )
    return paths


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--latent-dim", type=int, default=16)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--decode-batch", type=int, default=256)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    f32 = matmul_gflops(torch.float32)
    bf16 = has_fast_bf16()
    print(
        f"{args.threads} thread(s); load averages {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}; float32 matmul "
        f"{f32:.1f} GFLOP/s; native bf16: {'yes' if bf16 else 'no'}"
        + (f" (bf16 matmul {matmul_gflops(torch.bfloat16):.1f} GFLOP/s)" if bf16 else "")
    )
    for name, (old, new, n) in workloads(args.latent_dim, args.batch, args.decode_batch).items():
        old(), new()  # warm-up
        gflop = flops(old) / 1e9
        fns = {"contiguous": old, "channels_last": new}
        if bf16:
            fns["channels_last+bf16"] = lambda new=new: _bf16(new)
        t = median_times(fns, args.repeats)
        base = t["contiguous"][0]
        cols = "; ".join(
            f"{k} {v[0] * 1e3:.0f} ms ({base / v[0]:.2f}x, {gflop / v[0]:.1f} GFLOP/s = "
            f"{gflop / v[0] / f32:.0%} of float32 matmul)"
            for k, v in t.items()
        )
        print(f"{name} ({n} records, {gflop:.1f} GFLOP): {cols}")


def _bf16(fn) -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fn()


if __name__ == "__main__":
    main()
