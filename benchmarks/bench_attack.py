"""Cost of the reconstruction attack: time against a decode-only floor, and peak memory versus N.

1. Time: the full attack (encode, seeded noise, decode, distances) against a floor that only
   decodes the same number of latents in the same chunks; the ratio is the attack's overhead. The
   paths take turns within each repeat, so that a busy machine slows them alike; each time is the
   median of ``--repeats``.
2. Memory: the attack's peak RSS above a baseline (taken after the model is built and warmed up)
   at N = 30 and N = 300 samples for the same records, each in a fresh subprocess (the peak is a
   high-water mark); streaming keeps the ratio near 1 instead of 10. The children run with a
   fixed glibc mmap threshold (1 MiB), so that freed activations go back to the OS and the peak
   measures what the attack holds; glibc's adaptive threshold adds 20-50 % of allocator slack
   that varies from run to run.
3. ``--paper-scale-estimate``: the trade-off paper's attack (2000 records x N = 300, MSE and
   SSIM, on a 64x64x3 VAE with latent 100) timed on ``--estimate-records`` records and
   extrapolated linearly to 2000 (the attack is a loop over records, so its time is linear in them);
   ``--estimate-records 2000`` runs the whole attack and prints the measured time.

The VAE is the trade-off paper's ``ConditionalConvVAE``, untrained (the cost does not depend on
training).

    .venv/bin/python benchmarks/bench_attack.py --records 8 --samples 30 --size 64 --threads 2
    .venv/bin/python benchmarks/bench_attack.py --paper-scale-estimate --estimate-records 20
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np
import torch
from timing import median_times

from attacks.attack import AttackData
from attacks.distances import Distance, batching
from attacks.distances.structural_similarity import SSIM_NUMBA
from attacks.reconstruction import (
    DEFAULT_MAX_DECODED,
    PAPER_N_SAMPLES,
    ChunkPlan,
    ReconstructionAttack,
)
from models.vae import ConditionalConvVAE

NUM_CLASSES = 10
LATENT_DIM = 100
MEMORY_SAMPLES = (30, 300)
MMAP_THRESHOLD_BYTES = 2**20
PAPER_RECORDS = 2000
PAPER_SIZE, PAPER_CHANNELS = 64, 3
BOTH = (Distance.MSE, Distance.SSIM)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=8, help="records timed (default 8)")
    parser.add_argument("--samples", type=int, default=30, help="N for the timing (default 30)")
    parser.add_argument("--size", type=int, default=64, help="image side in pixels (default 64)")
    parser.add_argument("--channels", type=int, default=3, help="image channels (default 3)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    parser.add_argument("--max-decoded", type=int, default=DEFAULT_MAX_DECODED)
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats (default 3)")
    parser.add_argument(
        "--memory-records", type=int, default=5, help="records per memory run (default 5)"
    )
    parser.add_argument(
        "--paper-scale-estimate",
        action="store_true",
        help=f"time the paper's attack on --estimate-records records, extrapolate to "
        f"{PAPER_RECORDS}",
    )
    parser.add_argument(
        "--estimate-records", type=int, default=20, help="records timed for the estimate (20)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child-memory", type=int, help=argparse.SUPPRESS)
    return parser.parse_args()


def build(
    n_records: int, *, size: int, channels: int, seed: int
) -> tuple[ConditionalConvVAE, AttackData]:
    """An untrained VAE (eval mode) and ``n_records`` random images, half of them 'members'."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = ConditionalConvVAE(
            channels=channels,
            height=size,
            width=size,
            num_classes=NUM_CLASSES,
            latent_dim=LATENT_DIM,
        ).eval()
    gen = torch.Generator().manual_seed(seed)
    data = AttackData(
        x=torch.rand(n_records, channels, size, size, generator=gen),
        y=torch.randint(0, NUM_CLASSES, (n_records,), generator=gen),
        is_member=np.arange(n_records) % 2 == 0,
    )
    return model, data


def decode_floor(
    model: ConditionalConvVAE, data: AttackData, *, n_samples: int, max_decoded: int
) -> None:
    """Decode as many latents as the attack, in the attack's chunks, and nothing else."""
    plan = ChunkPlan.from_budget(n_samples=n_samples, max_decoded=max_decoded)
    gen = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for start in range(0, data.n_records, plan.records_per_chunk):
            y = data.y[start : start + plan.records_per_chunk]
            for n_chunk in plan.sample_chunks(n_samples):
                z = torch.randn(y.shape[0] * n_chunk, LATENT_DIM, generator=gen)
                model.decode(z, y.repeat_interleave(n_chunk))


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB.

    Linux's ``VmHWM`` from /proc/self/status: unlike ``ru_maxrss``, which survives ``exec`` and
    so starts at the parent's peak in a subprocess, it belongs to this process image alone.
    Elsewhere, ``ru_maxrss`` (KiB on Linux, bytes on macOS).
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    scale = 2**20 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def child_memory(args: argparse.Namespace) -> None:
    """Subprocess body: print the attack's peak RSS above the post-build baseline, as JSON."""
    model, data = build(args.memory_records, size=args.size, channels=args.channels, seed=args.seed)
    warm_up = ReconstructionAttack(seed=0, n_samples=1, distances=BOTH)
    warm_up.run(model, AttackData(x=data.x[:2], y=data.y[:2], is_member=np.array([True, False])))
    baseline = peak_rss_mb()
    attack = ReconstructionAttack(
        seed=args.seed, n_samples=args.child_memory, distances=BOTH, max_decoded=args.max_decoded
    )
    attack.run(model, data)
    plan = attack.plan
    per_call = min(plan.records_per_chunk, data.n_records) * plan.samples_per_chunk
    print(json.dumps({"delta_mb": peak_rss_mb() - baseline, "per_call": per_call}))


def measure_memory(args: argparse.Namespace, n_samples: int) -> dict[str, float]:
    """Run :func:`child_memory` for ``n_samples`` in a fresh interpreter."""
    command = [sys.executable, __file__, "--child-memory", str(n_samples)]
    for flag in ("size", "channels", "threads", "max_decoded", "memory_records", "seed"):
        command += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD_BYTES)}
    output = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout
    return json.loads(output.strip().splitlines()[-1])


def configuration(args: argparse.Namespace, *, size: int, channels: int) -> str:
    """One line: what ran where."""
    ssim_path = "numba kernel, torch's count" if SSIM_NUMBA else "torch path, 1"
    return (
        f"{channels}x{size}x{size} ConditionalConvVAE (latent {LATENT_DIM}, untrained); "
        f"torch {torch.__version__}, {args.threads} torch threads (MSE uses "
        f"{batching.DISTANCE_CPU_THREADS}; SSIM: {ssim_path}), "
        f"{os.cpu_count()} CPUs, "
        f"max_decoded {args.max_decoded}"
    )


def time_attack(args: argparse.Namespace) -> None:
    """Attack (MSE, MSE+SSIM) against the decode floor on the same records, then memory."""
    memory = {n: measure_memory(args, n) for n in MEMORY_SAMPLES}
    model, data = build(args.records, size=args.size, channels=args.channels, seed=args.seed)
    budget = {"n_samples": args.samples, "max_decoded": args.max_decoded}
    decode_floor(model, data, n_samples=1, max_decoded=args.max_decoded)  # warm-up
    paths: dict[str, Callable[[], object]] = {
        "decode-only floor": lambda: decode_floor(model, data, **budget)
    }
    for chosen in ((Distance.MSE,), BOTH):
        attack = ReconstructionAttack(seed=args.seed, distances=chosen, **budget)
        label = "attack (" + "+".join(d.value for d in chosen) + ")"
        paths[label] = lambda attack=attack: attack.run(model, data)
    times = median_times(paths, args.repeats)

    plan = ChunkPlan.from_budget(**budget)
    print("Attack benchmark: " + configuration(args, size=args.size, channels=args.channels))
    print(
        f"time: {args.records} records x N={args.samples} = {args.records * args.samples} decodes,"
        f" chunks of {plan.records_per_chunk} records x {plan.samples_per_chunk} samples, "
        f"median of {args.repeats}"
    )
    floor_wall, floor_cpu = times["decode-only floor"]
    print(f"{'path':<24}{'wall s':>10}{'CPU s':>10}{'wall / floor':>14}{'CPU / floor':>14}")
    for label, (wall, cpu) in times.items():
        ratios = f"{wall / floor_wall:>14.2f}{cpu / floor_cpu:>14.2f}"
        print(f"{label:<24}{wall:>10.2f}{cpu:>10.2f}{ratios}")
    print(f"memory: {args.memory_records} records, MSE+SSIM, peak RSS above post-build baseline")
    print(f"{'N':<24}{'decoded/call':>14}{'peak MB':>10}")
    for n_samples, result in memory.items():
        print(f"{n_samples:<24}{result['per_call']:>14d}{result['delta_mb']:>10.1f}")
    low, high = (memory[n]["delta_mb"] for n in MEMORY_SAMPLES)
    print(f"{'peak ratio N=300 / N=30':<38}{high / low:>10.2f}")


def paper_scale_estimate(args: argparse.Namespace) -> None:
    """Time the trade-off paper's attack on a few records and extrapolate linearly to 2000
    records."""
    n_timed = args.estimate_records
    model, data = build(n_timed, size=PAPER_SIZE, channels=PAPER_CHANNELS, seed=args.seed)
    warm_up = AttackData(x=data.x[:2], y=data.y[:2], is_member=np.array([True, False]))
    ReconstructionAttack(seed=0, n_samples=2, distances=BOTH).run(model, warm_up)
    attack = ReconstructionAttack(
        seed=args.seed, n_samples=PAPER_N_SAMPLES, distances=BOTH, max_decoded=args.max_decoded
    )
    done = [0]

    def progress(records: int) -> None:  # a line every 10 % of the records, on stderr
        before, done[0] = done[0], done[0] + records
        if 10 * done[0] // n_timed > 10 * before // n_timed:
            print(
                f"  {done[0]}/{n_timed} records, {time.perf_counter() - wall:.0f} s",
                file=sys.stderr,
            )

    wall, cpu = time.perf_counter(), time.process_time()
    attack.run(model, data, progress=progress)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    scale = PAPER_RECORDS / n_timed
    print("Paper-scale estimate: " + configuration(args, size=PAPER_SIZE, channels=PAPER_CHANNELS))
    print(
        f"timed: {n_timed} records x N={PAPER_N_SAMPLES}, MSE+SSIM: {wall:.1f} s wall, "
        f"{cpu:.1f} s CPU ({1e3 * wall / (n_timed * PAPER_N_SAMPLES):.2f} ms per decoded sample)"
    )
    if n_timed >= PAPER_RECORDS:
        print(f"MEASURED: {n_timed} records x N={PAPER_N_SAMPLES} took {wall / 3600:.2f} h wall")
        return
    print(
        f"ESTIMATE (linear extrapolation from {n_timed} records, not a measurement): "
        f"{PAPER_RECORDS} records x N={PAPER_N_SAMPLES} would take about {wall * scale:,.0f} s "
        f"= {wall * scale / 3600:.2f} h wall on this machine"
    )


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    if args.child_memory is not None:
        child_memory(args)
    elif args.paper_scale_estimate:
        paper_scale_estimate(args)
    else:
        time_attack(args)


if __name__ == "__main__":
    main()
