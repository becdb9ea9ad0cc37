#!/usr/bin/env python
"""Channels-last against the default memory layout, and bf16 autocast where the device has it,
on the 64x64x3 faces' workloads: a target-VAE training step, decoding (most of every attack and
of generation) and a classifier training step; ratios measured in one process, paths alternating.

  python benchmarks/bench_layout.py [--threads 1] [--repeats 5] [--latent-dim 16] [--device cuda]

Each part's throughput is also given as a share of the device's matmul throughput (a square
float32 matmul and, where the device has fast bf16 (a CPU with AVX-512 BF16 or AMX, any CUDA
GPU of compute capability 8 or more), a bf16 one), the ceiling a convolution lowered to matrix
products can approach. FLOPs are counted by ``torch.utils.flop_counter`` (convolutions and
matrix products only). On CUDA every timed call ends with a synchronisation, and the matmul side
is 8192 (1024 on CPU).
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


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_gflops(dtype: torch.dtype, device: torch.device, reps: int = 10) -> float:
    n = 8192 if device.type == "cuda" else 1024
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)
    a @ b
    _sync(device)
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    _sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - start) / 1e9


def has_fast_bf16(device: torch.device) -> bool:
    """Whether ``device`` runs bf16 matrix products natively: a CUDA GPU of compute capability 8
    or more, or a CPU with AVX-512 BF16 or AMX."""
    if device.type == "cuda":
        return torch.cuda.get_device_capability(device)[0] >= 8
    return torch.backends.cpu.get_cpu_capability() in ("AVX512_BF16", "AMX") or any(
        flag in open("/proc/cpuinfo").read() for flag in (" avx512_bf16", " amx_bf16")
    )


def flops(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def workloads(latent_dim: int, batch: int, decode_batch: int, device: torch.device):
    torch.manual_seed(0)
    x = torch.rand(batch, 3, 64, 64, device=device)
    y = torch.arange(batch, device=device) % 20
    noise = torch.randn(batch, latent_dim, device=device)
    z = torch.randn(decode_batch, latent_dim, device=device)
    zy = torch.arange(decode_batch, device=device) % 20

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
        ).to(device)

    def clf():
        torch.manual_seed(0)
        return ResNetClassifier(channels=3, num_classes=20, width=0.5).to(device)

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
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    args = p.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    f32 = matmul_gflops(torch.float32, device)
    bf16 = has_fast_bf16(device)
    bf16_rate = matmul_gflops(torch.bfloat16, device) if bf16 else float("nan")
    where = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"CPU capability {torch.backends.cpu.get_cpu_capability()}"
    )
    print(
        f"{args.threads} thread(s); load averages {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"{where}; float32 matmul {f32:.1f} GFLOP/s; native bf16: {'yes' if bf16 else 'no'}"
        + (f" (bf16 matmul {bf16_rate:.1f} GFLOP/s)" if bf16 else "")
    )
    parts = workloads(args.latent_dim, args.batch, args.decode_batch, device)
    for name, (old, new, n) in parts.items():
        old(), new()  # warm-up
        gflop = flops(old) / 1e9
        fns = {"contiguous": old, "channels_last": new}
        if bf16:
            fns["channels_last+bf16"] = lambda new=new: _bf16(new, device)
        t = median_times({k: _synced(f, device) for k, f in fns.items()}, args.repeats)
        base = t["contiguous"][0]
        cols = "; ".join(
            f"{k} {v[0] * 1e3:.1f} ms ({base / v[0]:.2f}x, {gflop / v[0]:.1f} GFLOP/s = "
            f"{gflop / v[0] / f32:.0%} of float32 matmul"
            + (f", {gflop / v[0] / bf16_rate:.0%} of bf16" if bf16 else "")
            + ")"
            for k, v in t.items()
        )
        print(f"{name} ({n} records, {gflop:.1f} GFLOP): {cols}")


def _synced(fn, device: torch.device):
    def run() -> None:
        fn()
        _sync(device)

    return run


def _bf16(fn, device: torch.device) -> None:
    with torch.autocast(device.type, dtype=torch.bfloat16):
        fn()


if __name__ == "__main__":
    main()
