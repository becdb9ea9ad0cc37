"""Cost of every attack as a ratio to its own floor, and Monte-Carlo's peak memory against m.

1. Time: each attack on an untrained ``ConditionalConvVAE`` (latent 32, 10 classes) at two image
   sides, against a floor timed alone in the same run, the paths taking turns in every repeat
   (median of ``--repeats``, wall and process CPU):

   * reconstruction: decoding n x N latents in the attack's chunks (as bench_attack.py);
   * likelihood: encoding n records and decoding n x K latents in the attack's chunks;
   * latent-search: the decoder passes the search makes, bare: n x k decodes for the starts,
     n_steps forward-backward passes for the n latents, one last decode;
   * monte-carlo: one float64 matmul pass over all record x sample pairs (the attack makes two
     passes per feature space, on pixels and on PCA features, plus the PCA fit);
   * domias: fitting and evaluating the two scipy KDEs on PCA features already computed (the
     attack adds the PCA fit and projections).

2. Memory: Monte-Carlo's peak RSS above a baseline (the RSS once the data are built and the
   peak reset through /proc/self/clear_refs, Linux only) at two sizes m of D_gen, each in a
   fresh subprocess with a fixed glibc mmap threshold (see bench_attack.py); streaming keeps the
   peak set by the chunks, not by m.

    .venv/bin/python benchmarks/bench_attacks.py            # about a minute on 2 idle cores
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import torch
from bench_attack import MMAP_THRESHOLD_BYTES, peak_rss_mb
from scipy.stats import gaussian_kde
from threadpoolctl import threadpool_limits
from timing import median_times

from attacks.attack import AttackData
from attacks.domias import DomiasAttack
from attacks.features import pca_features
from attacks.latent_search import LatentSearchAttack
from attacks.likelihood import LikelihoodAttack
from attacks.monte_carlo import MonteCarloAttack, squared_distances
from attacks.reconstruction import ChunkPlan, ReconstructionAttack
from attacks.threat import Records, Release
from models.vae import ConditionalConvVAE

NUM_CLASSES = 10
LATENT_DIM = 32
SIZES = (16, 32)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=32, help="attacked records (default 32)")
    parser.add_argument("--samples", type=int, default=16, help="N and K per record (default 16)")
    parser.add_argument("--steps", type=int, default=20, help="latent-search steps (default 20)")
    parser.add_argument("--generated", type=int, default=4000, help="m for timing (default 4000)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats (default 3)")
    parser.add_argument(
        "--memory-generated",
        type=int,
        nargs=2,
        default=(2000, 20000),
        help="two sizes m of D_gen for Monte-Carlo's memory (default 2000 20000)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child-memory", type=int, help=argparse.SUPPRESS)
    return parser.parse_args()


def vae(size: int, seed: int) -> ConditionalConvVAE:
    """An untrained 1 x size x size VAE in eval mode."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return ConditionalConvVAE(
            channels=1, height=size, width=size, num_classes=NUM_CLASSES, latent_dim=LATENT_DIM
        ).eval()


def records(n: int, size: int, seed: int) -> Records:
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, size, size, generator=gen)
    return Records(x, torch.randint(0, NUM_CLASSES, (n,), generator=gen))


def attack_data(n: int, size: int, seed: int) -> AttackData:
    r = records(n, size, seed)
    return AttackData(x=r.x, y=r.y, is_member=np.arange(n) % 2 == 0)


def decode_floor(model, data: AttackData, *, n_samples: int, encode: bool) -> None:
    """Decode n x n_samples latents in the attack's chunks (and encode the records if asked)."""
    plan = ChunkPlan.from_budget(n_samples=n_samples, max_decoded=256)
    gen = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        if encode:
            model.encode(data.x, data.y)
        for start in range(0, data.n_records, plan.records_per_chunk):
            y = data.y[start : start + plan.records_per_chunk]
            for n_chunk in plan.sample_chunks(n_samples):
                z = torch.randn(y.shape[0] * n_chunk, LATENT_DIM, generator=gen)
                model.decode(z, y.repeat_interleave(n_chunk))


def search_floor(model, data: AttackData, attack: LatentSearchAttack) -> None:
    """The decoder passes of the latent search without its bookkeeping."""
    for start in range(0, data.n_records, attack.batch_size):
        y = data.y[start : start + attack.batch_size]
        with torch.no_grad():
            model.decode(
                torch.randn(y.shape[0] * attack.n_starts, LATENT_DIM),
                y.repeat_interleave(attack.n_starts),
            )
        z = torch.randn(y.shape[0], LATENT_DIM, requires_grad=True)
        for _ in range(attack.n_steps):
            torch.autograd.grad(model.decode(z, y).sum(), [z])
        with torch.no_grad():
            model.decode(z, y)


def pairs_floor(data: AttackData, samples: Records, chunk: int) -> None:
    """One pass of float64 squared distances over all record x sample pairs, pixel space."""
    rows = data.x.flatten(1)
    for start in range(0, len(samples), chunk):
        squared_distances(rows, samples.x[start : start + chunk].flatten(1)).min(dim=1)


def kde_floor(points: np.ndarray, gen: np.ndarray, ref: np.ndarray) -> None:
    """Fit and evaluate the two KDEs on projected points (d, n), (d, m), (d, m_ref)."""
    gaussian_kde(gen).logpdf(points) - gaussian_kde(ref).logpdf(points)


def time_size(args: argparse.Namespace, size: int) -> None:
    """Every attack against its floor at one image side."""
    model, data = vae(size, args.seed), attack_data(args.records, size, args.seed)
    samples = records(args.generated, size, args.seed + 1)
    reference = records(500, size, args.seed + 2)
    release = Release(model=model, samples=samples, reference=reference)
    recon = ReconstructionAttack(seed=0, n_samples=args.samples)
    likelihood = LikelihoodAttack(seed=0, n_importance=args.samples)
    search = LatentSearchAttack(seed=0, n_steps=args.steps, n_starts=args.samples)
    monte_carlo = MonteCarloAttack(seed=0)
    domias = DomiasAttack(seed=0)
    project = pca_features(reference, n_components=domias.pca_components, seed=0)
    projected = [project(r).numpy().T for r in (data.x, samples.x, reference.x)]
    pairs: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
        "reconstruction": (
            lambda: recon.run_release(release, data),
            lambda: decode_floor(model, data, n_samples=args.samples, encode=False),
        ),
        "likelihood": (
            lambda: likelihood.run_release(release, data),
            lambda: decode_floor(model, data, n_samples=args.samples, encode=True),
        ),
        "latent-search": (
            lambda: search.run_release(release, data),
            lambda: search_floor(model, data, search),
        ),
        "monte-carlo": (
            lambda: monte_carlo.run_release(release, data),
            lambda: pairs_floor(data, samples, monte_carlo.sample_chunk),
        ),
        "domias": (lambda: domias.run_release(release, data), lambda: kde_floor(*projected)),
    }
    for attack_fn, floor_fn in pairs.values():  # warm-up
        attack_fn()
        floor_fn()
    paths = {}
    for name, (attack_fn, floor_fn) in pairs.items():
        paths[name] = attack_fn
        paths[name + " floor"] = floor_fn
    times = median_times(paths, args.repeats)
    print(
        f"\n1x{size}x{size}, latent {LATENT_DIM}: n={args.records}, N=K=k={args.samples}, "
        f"{args.steps} search steps, m={args.generated}, median of {args.repeats}"
    )
    print(f"{'attack':<16}{'wall s':>9}{'floor s':>9}{'wall/floor':>12}{'CPU/floor':>11}")
    for name in pairs:
        (wall, cpu), (floor_wall, floor_cpu) = times[name], times[name + " floor"]
        print(
            f"{name:<16}{wall:>9.3f}{floor_wall:>9.3f}{wall / floor_wall:>12.2f}"
            f"{cpu / floor_cpu:>11.2f}"
        )


def child_memory(args: argparse.Namespace) -> None:
    """Subprocess body: Monte-Carlo's peak RSS above the post-build baseline, as JSON."""
    size = SIZES[-1]
    data = attack_data(200, size, args.seed)
    samples = records(args.child_memory, size, args.seed + 1)
    reference = records(500, size, args.seed + 2)
    release = Release(samples=samples, reference=reference)
    small = Release(samples=records(50, size, 9), reference=reference)
    MonteCarloAttack(seed=0).run_release(small, data)  # warm-up
    baseline = reset_peak_rss_mb()
    MonteCarloAttack(seed=0).run_release(release, data)
    data_mb = samples.x.numel() * samples.x.element_size() / 2**20
    print(json.dumps({"delta_mb": peak_rss_mb() - baseline, "d_gen_mb": data_mb}))


def reset_peak_rss_mb() -> float:
    """Reset this process's peak RSS to its current RSS (Linux: ``5 > /proc/self/clear_refs``)
    and return it in MB, so that building D_gen's transients does not hide the attack's peak."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise OSError("no VmRSS in /proc/self/status")


def measure_memory(args: argparse.Namespace, m: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--child-memory", str(m), "--threads", str(args.threads)]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD_BYTES)}
    output = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    threadpool_limits(args.threads)  # BLAS/LAPACK threads of numpy, scipy and sklearn's PCA
    if args.child_memory is not None:
        child_memory(args)
        return
    print(
        f"Attack cost benchmark: untrained ConditionalConvVAE, torch {torch.__version__}, "
        f"{args.threads} torch and BLAS threads, {os.cpu_count()} CPUs"
    )
    for size in SIZES:
        time_size(args, size)
    print(f"\nmonte-carlo peak RSS above baseline, 200 records of 1x{SIZES[-1]}x{SIZES[-1]}:")
    for m in args.memory_generated:
        result = measure_memory(args, m)
        print(
            f"  m={m:>6}: {result['delta_mb']:7.1f} MB "
            f"(D_gen itself, held by the caller: {result['d_gen_mb']:.1f} MB)"
        )


if __name__ == "__main__":
    main()
