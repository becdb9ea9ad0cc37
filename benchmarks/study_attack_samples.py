#!/usr/bin/env python
"""How many latent samples N the reconstruction attack needs (issue 27, "The attack's N").

The reconstruction attack (the trade-off paper, Eq. 1; :mod:`attacks.reconstruction`) scores a
record by the mean distance (MSE, SSIM) of N decoded posterior samples to it. This study trains one
target VAE of a cell (as the sweep does: :func:`audit.cell.membership.cell_data`, the balanced
D_train of LFW20, :func:`audit.cell.target.train_target`; the quick profile's architecture with
``--epochs``), or loads one (``--model``, e.g. a sweep cell's ``model.pt``), and attacks the
cell's D_atk (:func:`audit.cell.membership.attack_data`, ``--records`` members + as many
non-members) with the repository's attack (:func:`attacks.registry.build_attack`, the cell's
attack seed) at each N of ``--samples``. For each N and distance it reports:

- MI AP (:class:`attacks.metrics.AttackMetrics`) and its 95 % stratified bootstrap interval over
  records (:func:`attacks.uncertainty.bootstrap_intervals`);
- the bootstrap standard error of MI AP and the difference to the largest N's MI AP with a
  paired bootstrap interval: every draw resamples the records (members and non-members apart,
  as ``bootstrap_intervals`` does) once and scores that same resample at every N;
- the Monte Carlo noise of the scores: each record's per-sample standard deviation s_i of the
  distance (from the largest N's samples), the median standard error s_i / sqrt(N) of its score
  against the standard deviation of the scores across records, and the share of the scores'
  variance that is Monte Carlo noise;
- the Monte Carlo spread of MI AP itself: the largest N's samples split into disjoint blocks of
  N (e.g. 15 blocks of 20 from 300), MI AP of each block's means: their standard deviation and
  their mean minus the largest N's MI AP (the attenuation that noisier scores cause);
- the attack's wall time at N over its time at the largest N (same process, one thread).

Record i's latent noise is the first N x latent_dim draws of its own stream
(:func:`attacks.reconstruction.record_noise_rng`), so a smaller N decodes a prefix of a larger
N's samples. The largest N runs with a tap on the attack's distances
(``attacks.distances.distance._TO_RECORDS``) that keeps every per-sample value; the script checks
that their mean is the attack's score, and that each smaller N's scores (from its own attack run)
are the prefix means of those samples.

Usage (one thread; LFW20, 40 epochs: about 6 minutes at 100 + 100 records, 10 at 200 + 200,
the attack at N = 300 half of it; docs/attack-studies.md has the figures):

    OMP_NUM_THREADS=1 python benchmarks/study_attack_samples.py --data-home DIR \\
        --epochs 40 --records 200 --out results/attack_samples_lfw20_e40.json

``--profile standard`` takes that profile's architecture (latent 100); ``--mech cdp --param 0.5``
trains the target with DP-Adam at z = 0.5.

``--save-model PATH`` keeps the trained target; ``--model PATH`` attacks a saved one instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attacks.distances.distance as distance_registry  # noqa: E402
from attacks import AttackData, Distance  # noqa: E402
from attacks.metrics import AttackMetrics  # noqa: E402
from attacks.registry import build_attack  # noqa: E402
from attacks.uncertainty import _weighted_ap_auc, bootstrap_intervals  # noqa: E402
from audit import io  # noqa: E402
from audit.attack_plan import attack_settings  # noqa: E402
from audit.cell.membership import attack_data, cell_data  # noqa: E402
from audit.cell.target import train_target  # noqa: E402
from audit.datasets import dataset_split, load_dataset  # noqa: E402
from audit.mechanisms import Context, get_mechanism, make_cell  # noqa: E402
from audit.profiles import ProfileName, profile_for_dataset
from dpvae_core.progress import null_progress  # noqa: E402
from dpvae_core.seeding import Purpose, derive_seed  # noqa: E402
from models.factory import model_family  # noqa: E402

DEFAULT_SAMPLES = (5, 10, 20, 50, 100, 300)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--dataset", default="lfw20")
    p.add_argument("--data-home", type=Path, default=None)
    p.add_argument("--profile", default="quick", choices=[x.value for x in ProfileName])
    p.add_argument("--epochs", type=int, default=40, help="target VAE epochs (quick LFW20: 120)")
    p.add_argument("--mech", default="none", help="the target's mechanism (e.g. cdp)")
    p.add_argument("--param", type=float, default=None, help="its grid value (cdp: z)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--records", type=int, default=100, help="members (and non-members) attacked")
    p.add_argument("--samples", type=int, nargs="+", default=list(DEFAULT_SAMPLES))
    p.add_argument("--draws", type=int, default=2000, help="bootstrap draws")
    p.add_argument("--model", type=Path, default=None, help="attack this saved state instead")
    p.add_argument("--save-model", type=Path, default=None)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="write the table as JSON here")
    return p.parse_args()


@contextmanager
def per_sample_tap(store: dict[Distance, list[np.ndarray]]) -> Iterator[None]:
    """Keep every (R, S) block of per-sample values the attack's distances compute, per distance,
    in call order; the values the attack sees are unchanged."""
    originals = dict(distance_registry._TO_RECORDS)

    def tapped(distance: Distance, fn):  # noqa: ANN001, ANN202
        def values(recon: torch.Tensor, records: torch.Tensor) -> torch.Tensor:
            out = fn(recon, records)
            store[distance].append(out.detach().cpu().numpy().copy())
            return out

        return values

    for distance, fn in originals.items():
        distance_registry._TO_RECORDS[distance] = tapped(distance, fn)
    try:
        yield
    finally:
        distance_registry._TO_RECORDS.update(originals)


def assemble(blocks: list[np.ndarray], n_samples: int) -> np.ndarray:
    """(n_records, n_samples) from the attack's blocks: per record chunk, sample chunks in order."""
    rows, pending = [], []
    for block in blocks:
        pending.append(block)
        if sum(b.shape[1] for b in pending) == n_samples:
            rows.append(np.concatenate(pending, axis=1))
            pending = []
    if pending:
        raise RuntimeError("the tapped blocks do not add up to whole records")
    return np.concatenate(rows, axis=0)


def stratified_weights(is_member: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """(draws, n) multiplicities: members and non-members each resampled at their own count."""
    weights = np.zeros((draws, is_member.size))
    rows = np.arange(draws)[:, None]
    for group in (np.flatnonzero(is_member), np.flatnonzero(~is_member)):
        picks = group[rng.integers(0, group.size, size=(draws, group.size))]
        np.add.at(weights, (rows, picks), 1.0)
    return weights


def weighted_ap(scores: np.ndarray, is_member: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """MI AP of each row of ``weights`` (B, n) over the records (ties as sklearn), through
    :func:`attacks.uncertainty._weighted_ap_auc`."""
    order = np.argsort(-scores, kind="stable")
    sorted_scores = scores[order]
    ends = np.r_[np.flatnonzero(np.diff(sorted_scores)), scores.size - 1]
    ap, _ = _weighted_ap_auc(weights[:, order], is_member[order], ends)
    return ap


def load_target(path: Path, cell, data):  # noqa: ANN001, ANN201
    """The target VAE saved at ``path`` (a sweep cell's ``model.pt`` or ``--save-model``)."""
    family = model_family(data.shape, data.num_classes)
    model = family.target_vae(
        latent_dim=cell.profile.latent_dim,
        per_example_gradients=get_mechanism(cell.mech).per_example_gradients,
    )
    model.load_state_dict(io.load_state(path)["model"])
    return family.for_inference(model).eval(), family


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    samples = sorted(set(args.samples))
    n_max = samples[-1]

    dataset = load_dataset(args.dataset, data_home=args.data_home)
    profile = replace(
        profile_for_dataset(ProfileName(args.profile), args.dataset),
        epochs=args.epochs,
        attack_records=2 * args.records,
    )
    mech = get_mechanism(args.mech)
    cell = make_cell(
        args.dataset,
        mech.name,
        mech.param_name,
        args.param,
        args.seed,
        profile,
        {"profile_name": args.profile, "data_sha256": dataset.content_hash},
    )
    split = dataset_split(dataset, args.seed)
    data = cell_data(dataset, split, cell)
    ctx = Context(device="cpu", progress=null_progress)
    start = time.perf_counter()
    if args.model is not None:
        model, family = load_target(args.model, cell, data)
        train_s = None
    else:
        target = train_target(cell, data, ctx)
        model, family = target.model, target.family
        train_s = time.perf_counter() - start
        if args.save_model is not None:
            io.save_state(args.save_model, {"model": model.state_dict()})
    atk: AttackData = attack_data(data, cell)
    is_member = atk.is_member
    print(
        f"{args.dataset} {args.mech} seed {args.seed}: |D_train| = {len(data.train[0])}, "
        f"{args.epochs} epochs"
        + (f" ({train_s:.0f} s)" if train_s is not None else f" (loaded {args.model})")
        + f"; D_atk {int(is_member.sum())} members + {int((~is_member).sum())} non-members",
        flush=True,
    )

    attack_seed = derive_seed(args.seed, Purpose.ATTACK)
    warm = build_attack(  # untimed: compiles SSIM's kernel, first-call allocations
        "reconstruction",
        seed=attack_seed,
        device="cpu",
        settings=attack_settings(attack_samples=2, modality=family.modality),
    )
    warm.run(model, AttackData(x=atk.x[:4], y=atk.y[:4], is_member=np.arange(4) % 2 == 0))
    scores: dict[int, dict[Distance, np.ndarray]] = {}
    seconds: dict[int, float] = {}
    store: dict[Distance, list[np.ndarray]] = {d: [] for d in Distance}
    for n in samples:
        settings = attack_settings(attack_samples=n, modality=family.modality)
        attack = build_attack("reconstruction", seed=attack_seed, device="cpu", settings=settings)
        tap = per_sample_tap(store) if n == n_max else nullcontext()
        with tap:
            t0 = time.perf_counter()
            results = attack.run(model, atk)
            seconds[n] = time.perf_counter() - t0
        scores[n] = {d: r.scores for d, r in results.items()}
        print(f"  N = {n}: {seconds[n]:.1f} s", flush=True)
    distances = list(scores[n_max])
    per_sample = {d: assemble(store[d], n_max) for d in distances}  # distances, not scores

    # checks: the tap's means are the attack's scores; a smaller N's scores are prefix means
    checks = {}
    for d in distances:
        full = d.score(per_sample[d].mean(axis=1))
        spread = float(np.std(scores[n_max][d]))
        checks[d.value] = {
            "tap_vs_attack": float(np.abs(full - scores[n_max][d]).max()),
            "prefix_vs_attack": {
                n: float(np.abs(d.score(per_sample[d][:, :n].mean(axis=1)) - scores[n][d]).max())
                for n in samples
            },
            "score_sd": spread,
        }
        worst = max(checks[d.value]["prefix_vs_attack"].values())
        if worst > 1e-6 * max(spread, 1e-12):
            print(f"  WARNING {d.value}: prefix means differ from the attack's by {worst:.2e}")

    rng = np.random.default_rng([args.seed, args.draws, 0x4E])
    weights = stratified_weights(is_member, args.draws, rng)
    table = []
    for d in distances:
        boot_max = weighted_ap(scores[n_max][d], is_member, weights)
        ap_max = AttackMetrics.from_scores(scores[n_max][d], is_member).mi_ap
        s_i = per_sample[d].std(axis=1, ddof=1)  # per-sample SD of each record's distance
        score_var = float(np.var(scores[n_max][d], ddof=1))
        for n in samples:
            metrics = AttackMetrics.from_scores(scores[n][d], is_member)
            interval = bootstrap_intervals(
                scores[n][d], is_member, seed=args.seed, draws=args.draws
            )
            boot = weighted_ap(scores[n][d], is_member, weights)
            diff = boot - boot_max
            blocks = n_max // n
            block_aps = [
                AttackMetrics.from_scores(
                    d.score(per_sample[d][:, k * n : (k + 1) * n].mean(axis=1)), is_member
                ).mi_ap
                for k in range(blocks)
            ]
            mc_se = s_i / np.sqrt(n)
            table.append(
                {
                    "distance": d.value,
                    "n_samples": n,
                    "mi_ap": metrics.mi_ap,
                    "mi_auc": metrics.mi_auc,
                    "mi_ap_low": interval.mi_ap_low,
                    "mi_ap_high": interval.mi_ap_high,
                    "mi_ap_boot_se": float(boot.std(ddof=1)),
                    "diff_to_max": metrics.mi_ap - ap_max,
                    "diff_low": float(np.quantile(diff, 0.025)),
                    "diff_high": float(np.quantile(diff, 0.975)),
                    "diff_boot_se": float(diff.std(ddof=1)),
                    "mc_blocks": blocks,
                    "mc_block_ap_mean_minus_max": float(np.mean(block_aps) - ap_max),
                    "mc_block_ap_sd": float(np.std(block_aps, ddof=1)) if blocks > 1 else None,
                    "mc_se_median": float(np.median(mc_se)),
                    "score_sd": float(np.sqrt(score_var)),
                    "mc_var_share": float(np.mean(mc_se**2) / np.var(scores[n][d], ddof=1)),
                    "seconds": seconds[n],
                    "time_ratio": seconds[n] / seconds[n_max],
                }
            )

    print(
        "\ndistance  N    MI AP  [95 % boot]       SE     dAP vs N_max [paired 95 %]   "
        "MC: block SD  block bias  SE/score SD  var share  time"
    )
    for row in table:
        block_sd = row["mc_block_ap_sd"]
        print(
            f"{row['distance']:<8} {row['n_samples']:>4}  {row['mi_ap']:.3f}  "
            f"[{row['mi_ap_low']:.3f}, {row['mi_ap_high']:.3f}]  {row['mi_ap_boot_se']:.3f}  "
            f"{row['diff_to_max']:+.4f} [{row['diff_low']:+.4f}, {row['diff_high']:+.4f}]   "
            f"{'' if block_sd is None else f'{block_sd:.4f}':>12}  "
            f"{row['mc_block_ap_mean_minus_max']:+.4f}  "
            f"{row['mc_se_median'] / row['score_sd']:>11.3f}  {row['mc_var_share']:>9.3f}  "
            f"{row['time_ratio']:.3f}"
        )
    chosen = {}
    for d in distances:
        rows = [r for r in table if r["distance"] == d.value]
        se = next(r["mi_ap_boot_se"] for r in rows if r["n_samples"] == n_max)
        ok = [abs(r["diff_to_max"]) < se for r in rows]
        # the smallest N from which on every larger N also differs by less than one SE
        chosen[d.value] = next(r["n_samples"] for i, r in enumerate(rows) if all(ok[i:]))
    print(f"\nsmallest N with |MI AP(N) - MI AP({n_max})| < its bootstrap SE: {chosen}")

    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {
                    "command": " ".join(sys.argv),
                    "dataset": args.dataset,
                    "mech": args.mech,
                    "param": args.param,
                    "seed": args.seed,
                    "epochs": args.epochs,
                    "model": None if args.model is None else str(args.model),
                    "train_s": train_s,
                    "members": int(is_member.sum()),
                    "nonmembers": int((~is_member).sum()),
                    "draws": args.draws,
                    "threads": args.threads,
                    "checks": checks,
                    "smallest_n_within_se": chosen,
                    "rows": table,
                },
                indent=1,
            )
            + "\n"
        )
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
