#!/usr/bin/env python
"""What one paper-profile cell costs, from measured fractions: the parts of a cell timed on a few
epochs or records and extrapolated to the paper profile's sizes.

  python benchmarks/bench_paper_cell.py [--dataset lfw20] [--data-home DIR] [--device cuda] \
      [--train-epochs 1] [--attack-records 8] [--classifier-epochs 1] [--profile paper]

The trade-off paper's profile (``--profile paper``): the target VAE trains 1000 epochs on all of
D_train (batch 32, latent 100); every attack of the sweep's list the release allows runs on D_atk
(the reconstruction attack decodes N = 300 samples per record, MSE and SSIM); R = 8 reference VAEs
copying the mechanism (and, for a private cell, R non-private ones shared by the seed's cells)
train where the cell leaves at least 20 reference records; the utility classifier is the
dataset's (LFW20's face-embedding: the descriptor on 2000 generated faces and a logistic
regression; else a network trained up to 100 epochs), and once per dataset and seed on the real
D_train. This script times, on the dataset's real records and shapes, on ``--device``, in one
process:

- one epoch of non-private training (Adam) and one of DP-Adam (``cdp``, z = 1, book-keeping
  per-example gradients) on all of D_train;
- every attack of the sweep's list (``attacks.registry.sweep_attacks()``) on
  ``--attack-records`` records, with R stand-in reference models where the cell would train some
  (the attacks' cost does not depend on how the models were trained);
- generation and the utility classifier on |D_gen| records of the record shape;

and prints each part's extrapolation and the cell's total for mech none and for a DP-Adam cell.
The validation schedule (a fixed D_val subsample every 10 epochs; ``bench_validation.py``) is
left out (under 2 % of training there). ``--profile`` estimates another profile's cell the same
way (its epochs, D_train cap, N, R, |D_gen|).
"""

from __future__ import annotations

import argparse
import math
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
from audit.cell.membership import attack_data, cell_data, reference_positions, reference_records
from audit.cell.references import cell_spec
from audit.config import CellConfig
from audit.datasets import dataset_split, load_dataset
from audit.mechanisms import BASELINE, get_mechanism
from audit.mechanisms.mechanism import Context
from audit.profiles import ProfileName, profile_for_dataset
from dpvae_core.progress import null_progress
from models.classifier_training import ClassifierSettings, train_classifier
from models.dp import DPSettings, train_dp_vae
from models.face_embedding import FACE_EMBEDDING, embedding_accuracy
from models.factory import CLASSIFIER_RECIPES, model_family
from models.generation import generate
from models.training import VAETrainSettings, train_vae


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="lfw20")
    p.add_argument("--data-home", type=Path, default=None)
    p.add_argument("--profile", default="paper", choices=[n.value for n in ProfileName])
    p.add_argument("--device", default="cpu")
    p.add_argument("--train-epochs", type=int, default=1)
    p.add_argument("--attack-records", type=int, default=8)
    p.add_argument("--classifier-epochs", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    data = load_dataset(args.dataset, data_home=args.data_home)
    prof = profile_for_dataset(ProfileName(args.profile), args.dataset)
    # the sweep's own records of seed 0's baseline cell: D_train capped, D_atk, reference records
    base = get_mechanism(BASELINE)
    cell = CellConfig(
        args.dataset, BASELINE, base.param_name, None, 0, prof, attacks=sweep_attacks()
    )
    tensors = cell_data(data, dataset_split(data, 0), cell)
    x, y = (t.to(device) for t in tensors.train)
    test_x, test_y = tensors.test
    val = (x[:1], y[:1])  # validation is left out: one record, scored once per 10 epochs
    family = model_family(tuple(x.shape[1:]), data.num_classes)
    n_train, n_atk = len(x), len(attack_data(tensors, cell).is_member)
    n_reference = len(reference_positions(tensors, cell))
    reference = reference_records(tensors, cell)
    spec = cell_spec(cell, tensors, reference)
    refs = 0 if spec is None else spec.n_models
    ref_records = 0 if spec is None else spec.recipe.records_per_model
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"{args.dataset}, profile {args.profile}: |D_train| = {n_train}, |D_atk| = {n_atk}, "
        f"{n_reference} reference records ({refs} reference models of {ref_records} records), "
        f"record {tuple(x.shape[1:])}, {data.num_classes} classes; {where}, "
        f"{args.threads} threads"
    )

    def settings(epochs: int, batch: int = prof.batch_size) -> VAETrainSettings:
        return VAETrainSettings(
            epochs=epochs, batch_size=batch, lr=prof.lr, beta=prof.beta, seed=0,
            device=str(device),
        )  # fmt: skip

    def vae(dp: bool = True) -> torch.nn.Module:
        return family.target_vae(latent_dim=prof.latent_dim, per_example_gradients=dp).to(device)

    # warm-up (first-call allocations, kernel selection): one untimed epoch of each loop
    train_vae(vae(False), (x[:64], y[:64]), val, settings(1))
    dp = DPSettings(noise_multiplier=1.0, clip_norm=1.0, noise_seed=0)
    train_dp_vae(vae(), (x[:64], y[:64]), val, settings(1), dp)
    torch.manual_seed(0)
    model = vae(False)
    plain = device_seconds(
        lambda: train_vae(model, (x, y), val, settings(args.train_epochs)), device
    )
    plain /= args.train_epochs
    torch.manual_seed(0)
    private = device_seconds(
        lambda: train_dp_vae(vae(), (x, y), val, settings(args.train_epochs), dp), device
    )
    private /= args.train_epochs

    # every attack the whole-VAE release allows, with R stand-in reference models
    inference = family.for_inference(model).eval()
    n_gen = prof.gen_records or n_train
    gy = torch.from_numpy(np.arange(n_gen) % data.num_classes)
    out: list[torch.Tensor] = []
    gen = device_seconds(lambda: out.append(generate(inference, gy, seed=0)[0]), device)
    gx = out[0]
    k = min(args.attack_records, n_train)
    records = AttackData(x=x[:k].cpu(), y=y[:k].cpu(), is_member=np.arange(k) % 2 == 0)
    release = Release.of_kind(
        ReleaseKind.WHOLE_VAE,
        model=inference,
        samples=Records(gx, gy),
        reference=reference,
        reference_models=(inference,) * refs,
    )
    release = replace(release, nonprivate_reference_models=(inference,) * refs)
    att = attack_settings(attack_samples=prof.attack_samples, modality=family.modality)
    ctx = Context(device=str(device), progress=null_progress)
    attack_s = {}
    for name in sweep_attacks():
        try:
            seconds = device_seconds(
                lambda n=name: run_release_attacks(
                    [n], release, records, settings=att, seed=0, ctx=ctx
                ),
                device,
            )
        except ValueError:  # the release lacks what the attack needs (no reference records)
            continue
        attack_s[name] = seconds / k * n_atk

    # the utility classifier on D_gen (and, once per dataset and seed, on the real D_train)
    kind = prof.classifier
    if kind == FACE_EMBEDDING:
        reps = math.ceil(n_gen / n_train)
        faces = torch.cat([x.cpu()] * reps)[:n_gen]  # real faces stand in for generated ones
        pair = (faces, gy)
        classifier = device_seconds(
            lambda: embedding_accuracy(pair, pair, (test_x, test_y), device=device), device
        )
        cls_label = f"face-embedding utility on D_gen ({n_gen} faces; D_test's codes once)"
    else:
        csettings = ClassifierSettings(
            epochs=args.classifier_epochs,
            patience=args.classifier_epochs,
            device=str(device),
            **CLASSIFIER_RECIPES.get(kind or "", {}),
        )
        per_epoch = device_seconds(
            lambda: train_classifier(
                partial(family.classifier, kind),
                (gx.cpu(), gy),
                (gx[:64].cpu(), gy[:64]),
                csettings,
                progress=null_progress,
            ),
            device,
        )
        classifier = per_epoch / args.classifier_epochs * prof.classifier_epochs
        cls_label = f"classifier on D_gen ({n_gen} records, <= {prof.classifier_epochs} epochs)"

    epochs = prof.epochs
    ref_share = ref_records / n_train
    train_none, train_dp = plain * epochs, private * epochs
    # a reference model trains as many epochs on ref_records records; batches shrink with them
    ref_dp = refs * private * epochs * ref_share
    ref_plain = refs * plain * epochs * ref_share
    rest = sum(attack_s.values()) + gen + classifier
    print(
        f"measured: one epoch none {plain:.3f} s, one epoch DP-Adam {private:.3f} s "
        f"({private / plain:.2f}x), generation of {n_gen} {gen:.2f} s, "
        + ", ".join(f"{n} {v / n_atk * 1e3:.1f} ms/record" for n, v in attack_s.items())
    )
    parts = {
        f"train, none ({epochs} epochs)": train_none,
        f"train, DP-Adam ({epochs} epochs)": train_dp,
        f"{refs} reference models copying DP-Adam (per DP cell)": ref_dp,
        f"{refs} non-private reference models (once per seed, charged to none)": ref_plain,
        **{
            f"attack {n} (N = {prof.attack_samples}, {n_atk} records)": v
            for n, v in attack_s.items()
        },
        f"generation ({n_gen})": gen,
        cls_label: classifier,
    }
    for label, seconds in parts.items():
        print(f"  {label}: {seconds / 60:.1f} min")
    for label, total in (
        ("none", train_none + ref_plain + rest),
        ("DP-Adam", train_dp + ref_dp + rest),
    ):
        print(f"one {args.profile}-profile cell, mech {label}: {total / 60:.1f} min")
    cells = 25
    for workers in (1, 4, 16, 64):
        total = math.ceil(cells / workers) * (train_dp + ref_dp + rest)
        print(f"  {cells} DP cells x 1 seed on {workers} such machine(s): {total / 3600:.1f} h")


if __name__ == "__main__":
    main()
