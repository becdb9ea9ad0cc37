#!/usr/bin/env python
"""Mixed precision against float32, part by part, on one dataset's real records and shapes:
what ``--precision bf16`` (and ``fp16`` on CUDA) buys each part of a cell.

  python benchmarks/bench_precision.py [--dataset lfw20] [--data-home DIR] [--device cuda] \
      [--profile quick] [--precisions float32 bf16 fp16] [--repeats 3] [--attack-records 16] \
      [--no-dp]

On ``--device``, in one process, the precisions take turns in every repeat (the first is the
baseline; medians printed with their ratio to it) on one fixed workload:

- one epoch of non-private training (Adam) on D_train (the profile's cap, batch and latent size);
- one epoch of DP-Adam in the same run (its per-example gradients in bf16 under bf16, the
  clipping float32: :func:`models.dp.engine.dp_precision`; float32 under fp16);
- generation of |D_gen| records;
- every attack of the sweep's list the whole-VAE release allows on ``--attack-records`` records
  (N = the profile's), with one stand-in reference model where an attack calibrates;
- one epoch of the target classifier on D_gen where the profile's classifier is a network
  (LFW20's face descriptor in bf16: ``benchmarks/study_descriptor_precision.py``).

The models are built from one seed, so every precision times the same weights. A device without
the precision (a CPU without native bf16, fp16 off CUDA) is refused up front. Rows before and
after are compared by ``benchmarks/compare_precision.py`` on two sweeps' ``runs.csv``.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import torch
from timing import device_seconds

from attacks import AttackData
from attacks.registry import sweep_attacks
from attacks.threat import Records, Release, ReleaseKind
from audit.attack_plan import attack_settings
from audit.cell.attack_step import run_release_attacks
from audit.cell.membership import cell_data, reference_records
from audit.config import CellConfig
from audit.datasets import dataset_split, load_dataset
from audit.mechanisms import BASELINE, get_mechanism
from audit.mechanisms.mechanism import Context
from audit.profiles import ProfileName, profile_for_dataset
from dpvae_core.precision import check_precision_supported, mixed_precision
from dpvae_core.progress import null_progress
from models.classifier_training import ClassifierSettings, train_classifier
from models.dp import DPSettings, train_dp_vae
from models.face_embedding import FACE_EMBEDDING
from models.factory import CLASSIFIER_RECIPES, model_family
from models.generation import generate
from models.training import VAETrainSettings, train_vae


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="lfw20")
    p.add_argument("--data-home", type=Path, default=None)
    p.add_argument("--profile", default="quick", choices=[n.value for n in ProfileName])
    p.add_argument("--device", default="cpu")
    p.add_argument("--precisions", nargs="+", default=["float32", "bf16"])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--attack-records", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-dp", action="store_true", help="leave out the DP-Adam epoch")
    args = p.parse_args()
    args.precisions = list(dict.fromkeys(args.precisions))  # each once
    for precision in args.precisions:
        check_precision_supported(precision, args.device)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    data = load_dataset(args.dataset, data_home=args.data_home)
    prof = profile_for_dataset(ProfileName(args.profile), args.dataset)
    # the sweep's own records of seed 0's baseline cell: D_train capped, the reference records
    base = get_mechanism(BASELINE)
    cell = CellConfig(
        args.dataset, BASELINE, base.param_name, None, 0, prof, attacks=sweep_attacks()
    )
    tensors = cell_data(data, dataset_split(data, 0), cell)
    x, y = tensors.train
    val = (x[:1], y[:1])
    family = model_family(tuple(x.shape[1:]), data.num_classes)
    n_gen = prof.gen_records or len(x)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"{args.dataset}, profile {args.profile}: |D_train| = {len(x)}, batch {prof.batch_size}, "
        f"latent {prof.latent_dim}, |D_gen| = {n_gen}, N = {prof.attack_samples}, "
        f"{args.attack_records} attacked records; {where}, {args.threads} threads; "
        f"medians of {args.repeats}, precisions taking turns"
    )

    def vae(dp: bool = False) -> torch.nn.Module:
        torch.manual_seed(0)
        return family.target_vae(latent_dim=prof.latent_dim, per_example_gradients=dp).to(device)

    def settings(precision: str) -> VAETrainSettings:
        return VAETrainSettings(
            epochs=1, batch_size=prof.batch_size, lr=prof.lr, beta=prof.beta, seed=0,
            device=str(device), precision=precision,
        )  # fmt: skip

    trained = vae()
    train_vae(trained, (x, y), val, settings("float32"))  # the weights every precision attacks
    inference = family.for_inference(trained).eval()
    gy = torch.from_numpy(np.arange(n_gen) % data.num_classes)
    k = min(args.attack_records, len(x))
    records = AttackData(x=x[:k], y=y[:k], is_member=np.arange(k) % 2 == 0)
    att = attack_settings(attack_samples=prof.attack_samples, modality=family.modality)
    ctx = Context(device=str(device), progress=null_progress)
    dp = DPSettings(noise_multiplier=1.0, clip_norm=1.0, noise_seed=0)

    def generation(precision: str) -> torch.Tensor:
        with mixed_precision(device, precision):
            return generate(inference, gy, seed=0)[0]

    gx = generation("float32")
    release = Release.of_kind(
        ReleaseKind.WHOLE_VAE,
        model=inference,
        samples=Records(gx, gy),
        reference=reference_records(tensors, cell),
        reference_models=(inference,),
    )
    release = replace(release, nonprivate_reference_models=(inference,))

    def attack(name: str, precision: str) -> None:
        with mixed_precision(device, precision):
            run_release_attacks([name], release, records, settings=att, seed=0, ctx=ctx)

    parts: dict[str, object] = {
        "train, none (1 epoch)": lambda pr: train_vae(vae(), (x, y), val, settings(pr)),
        "train, DP-Adam (1 epoch)": lambda pr: train_dp_vae(
            vae(True), (x, y), val, settings(pr), dp
        ),
        f"generation ({n_gen})": generation,
    }
    if args.no_dp:
        del parts["train, DP-Adam (1 epoch)"]
    for name in sweep_attacks():
        try:
            attack(name, "float32")  # warm-up; skips what the release does not allow
        except ValueError:
            continue
        parts[f"attack {name}"] = partial(attack, name)
    if prof.classifier != FACE_EMBEDDING:
        recipe = CLASSIFIER_RECIPES.get(prof.classifier or "", {})

        def classifier(precision: str) -> None:
            cs = ClassifierSettings(
                epochs=1, patience=1, device=str(device), precision=precision, **recipe
            )
            train_classifier(
                partial(family.classifier, prof.classifier),
                (gx, gy),
                (gx[:64], gy[:64]),
                cs,
                progress=null_progress,
            )

        parts["classifier on D_gen (1 epoch)"] = classifier
    for fn in parts.values():  # warm-up of every path in every precision (kernel selection)
        for precision in args.precisions:
            fn(precision)
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeats):
        for label, fn in parts.items():
            for precision in args.precisions:
                seconds = device_seconds(lambda f=fn, pr=precision: f(pr), device)
                times.setdefault((label, precision), []).append(seconds)
    base = args.precisions[0]
    header = "".join(f"{pr:>12}" for pr in args.precisions)
    ratios = "".join(f"{base + '/' + pr:>16}" for pr in args.precisions[1:])
    print(f"{'part':48}{header}{ratios}")
    totals = dict.fromkeys(args.precisions, 0.0)
    for label in parts:
        med = {pr: statistics.median(times[(label, pr)]) for pr in args.precisions}
        for pr in args.precisions:
            if "DP-Adam" not in label:
                totals[pr] += med[pr]
        cells = "".join(f"{med[pr]:>11.3f}s" for pr in args.precisions)
        rats = "".join(f"{med[base] / med[pr]:>15.2f}x" for pr in args.precisions[1:])
        print(f"{label:48}{cells}{rats}")
    cells = "".join(f"{totals[pr]:>11.3f}s" for pr in args.precisions)
    rats = "".join(f"{totals[base] / totals[pr]:>15.2f}x" for pr in args.precisions[1:])
    print(f"{'sum of the parts above but DP-Adam':48}{cells}{rats}")


if __name__ == "__main__":
    main()
