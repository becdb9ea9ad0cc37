#!/usr/bin/env python
"""glibc's malloc kept from returning freed memory (``dpvae_core.allocator.keep_freed_memory``,
what every cell process and the command line set) against its adaptive defaults, on LFW20's quick
shapes (64x64x3, 20 classes, latent 16, batch 16): a book-keeping DP-Adam step (the clipped sum,
float32 as a cell on a CPU without native bf16 runs it, and the noise), a non-private Adam step,
and decoding ``--decodes`` latents (generation, the attacks' scoring).

The allocator's settings hold for a whole process, so each setting runs in its own child
process (``DPVAE_MALLOC=default`` for glibc's defaults), the two taking turns for ``--rounds``
rounds; each child times every part ``--repeats`` times, the parts taking turns (medians,
process CPU seconds, which include the system time the kernel spends zero-filling pages faulted
in), and counts its minor page faults per call. Prints per part the median over rounds of each
setting and their ratio (default / kept: above 1 keeping freed memory is faster), the DP-Adam /
non-private step ratio under each, and each child's peak resident memory.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_allocator.py --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this tree's code, not another


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3, help="child processes per setting (3)")
    p.add_argument("--repeats", type=int, default=5, help="timed calls per part and child (5)")
    p.add_argument("--decodes", type=int, default=400, help="latents decoded at once (400)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args()


def child(args: argparse.Namespace) -> None:
    """Time the parts in this process, under the allocator setting its environment asks for."""
    import time

    import torch

    from dpvae_core.allocator import keep_freed_memory
    from models.dp import SampleLoss
    from models.dp.book_keeping import BookKeepingGradients
    from models.dp.engine import noisy_average
    from models.training import channels_last_model, image_layout, vae_per_example_loss
    from models.vae import ConditionalConvVAE, folded_training

    kept = keep_freed_memory()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    vae = channels_last_model(
        ConditionalConvVAE(channels=3, height=64, width=64, num_classes=20, latent_dim=16)
    )
    batch = 16
    x = image_layout(torch.rand(batch, 3, 64, 64))
    y, noise = torch.arange(batch) % 20, torch.randn(batch, 16)
    z, zy = torch.randn(args.decodes, 16), torch.arange(args.decodes) % 20
    engine = BookKeepingGradients(SampleLoss(vae, beta=1.0))
    opt = torch.optim.Adam(vae.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)

    def dp_step() -> None:
        vae.train()
        summed = engine.clipped_sum(x, y, noise, clip_norm=1.0)
        grads = noisy_average(
            summed.grads, clip_norm=1.0, noise_multiplier=1.0, denominator=batch, generator=gen
        )
        for p, g in zip(vae.parameters(), grads, strict=True):
            p.grad = g
        opt.step()

    def nonprivate_step() -> None:
        vae.train()
        opt.zero_grad(set_to_none=True)
        with folded_training(vae):
            vae_per_example_loss(vae, x, y, noise, beta=1.0).sum().backward()
        opt.step()

    def decode() -> None:
        vae.eval()
        with torch.no_grad():
            vae.decode(z, zy)

    parts = {"dp-adam step": dp_step, "non-private step": nonprivate_step, "decode": decode}
    for fn in parts.values():
        fn()
        fn()  # warm: kernels, and the heap grown to its working size
    times: dict[str, list[float]] = {k: [] for k in parts}
    faults: dict[str, int] = dict.fromkeys(parts, 0)
    for _ in range(args.repeats):
        for label, fn in parts.items():
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = time.process_time()
            fn()
            times[label].append(time.process_time() - start)
            faults[label] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    print(
        json.dumps(
            {
                "kept": kept,
                "seconds": {k: float(np.median(v)) for k, v in times.items()},
                "faults": {k: v / args.repeats for k, v in faults.items()},
                "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def run_child(args: argparse.Namespace, setting: str) -> dict:
    env = dict(os.environ)
    if setting == "default":
        env["DPVAE_MALLOC"] = "default"
    else:
        env.pop("DPVAE_MALLOC", None)
    command = [
        sys.executable,
        __file__,
        "--child",
        f"--repeats={args.repeats}",
        f"--decodes={args.decodes}",
        f"--threads={args.threads}",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    args = parse_args()
    if args.child:
        child(args)
        return
    import torch

    print(
        f"LFW20 quick shapes, batch 16, {args.decodes} decodes, {args.rounds} rounds of one child "
        f"per setting taking turns, median of {args.repeats} calls each, {args.threads} "
        f"thread(s), torch {torch.__version__}, CPU time per call"
    )
    results: dict[str, list[dict]] = {"default": [], "kept": []}
    for _ in range(args.rounds):
        for setting in results:
            results[setting].append(run_child(args, setting))
    if not all(r["kept"] for r in results["kept"]) or any(r["kept"] for r in results["default"]):
        print("this C library is not glibc (or mallopt failed): nothing to compare")
        return
    parts = list(results["default"][0]["seconds"])
    print(
        f"{'part':<18}{'default ms':>12}{'kept ms':>10}{'default/kept':>14}"
        f"{'faults default':>16}{'faults kept':>13}"
    )
    med = {
        s: {p: float(np.median([r["seconds"][p] for r in results[s]])) for p in parts}
        for s in results
    }
    for p in parts:
        fd = np.median([r["faults"][p] for r in results["default"]])
        fk = np.median([r["faults"][p] for r in results["kept"]])
        print(
            f"{p:<18}{med['default'][p] * 1e3:>12.1f}{med['kept'][p] * 1e3:>10.1f}"
            f"{med['default'][p] / med['kept'][p]:>14.2f}{fd:>16.0f}{fk:>13.0f}"
        )
    for s in results:
        ratio = med[s]["dp-adam step"] / med[s]["non-private step"]
        peak = max(r["peak_mb"] for r in results[s])
        print(f"{s}: DP-Adam step / non-private step {ratio:.2f}x, peak resident {peak:.0f} MB")


if __name__ == "__main__":
    main()
