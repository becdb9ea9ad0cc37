#!/usr/bin/env python
"""Which knob of the DP-Adam recipe moves LFW20's accuracy on D_gen at z = 0.01 and 0.1? (issue 39)

For each z, seed and setting this trains ONLY the target VAE of an LFW20 ``cdp`` cell (the quick
profile's shapes and records: 10 faces a person, latent 16, |D_gen| = 1000, the face-embedding
classifier) and measures ``acc``, the sweep's column: the target classifier trained on D_gen,
accuracy on real D_test. It calls the sweep's own steps (:func:`audit.cell.target.train_target`,
:func:`audit.cell.gen_accuracy.generate_and_classify`) on a cell built as the sweep builds it
(:func:`audit.mechanisms.make_cell` with :func:`audit.profiles.profile_for_dataset`), and skips the
reference models and the attacks. Settings, each one knob away from the quick recipe:

- ``baseline``: the quick recipe (batch 16, lr 1e-3, C = the default 10, no microbatches);
  ``baseline-cpu``, asked for by name: the same, trained here where ``baseline`` is copied;
- ``batch64``: batch 64 with the epochs kept (so a quarter of the noisy steps, each with 4 times
  the clipped signal over the same noise std z * C);
- ``lr-paper``: the trade-off paper's VAE learning rate for that z on LFW20 (its appendix, Table 2:
  1.82e-4 at z = 0.01, 1.1e-4 at z = 0.1);
- ``clip-median``: ``--clip-norm median`` (the heuristic the paper uses: the median per-example
  gradient norm of a short non-private warm-up);
- ``clip-0.03``: the clip norm the paper reports for LFW20 (0.03; its loss is on another scale).
  Where every per-example gradient is clipped at both 10 and 0.03 (on LFW20 the median heuristic
  finds a median norm of about 3.6e3), C scales the clipped sum and the noise alike and Adam
  divides it out: this setting then differs from the baseline only by its noise draw;
- ``microbatch4``: DP-Adam's ``microbatch`` option at 4, where this checkout's cdp has it (else the
  setting is left out and the run says so);
- ``paper-recipe``: every knob at once, as the paper profile sets them for that z
  (:mod:`audit.paper_recipe`: Table 2's learning rate and batch size, the median clip norm,
  microbatches of 4), at this script's epochs and quick records: whether the knobs together do
  what none does alone (the paper's 1000 epochs on all of D_train are the paper profile's).

Each finished run is appended to ``--out`` (a CSV) at once; a rerun skips the runs the file holds.

    OMP_NUM_THREADS=1 python benchmarks/study_recipe_ablation.py \\
        --data-home DIR --epochs 120 --seeds 0 1 \\
        --settings baseline batch64 lr-paper clip-median \\
        --baseline-from results/lfw20-quick-main-runs.csv.gz \\
        --out benchmarks/results/recipe_ablation_lfw20.csv
    python benchmarks/study_recipe_ablation.py \\
        --summary benchmarks/results/recipe_ablation_lfw20.csv

``--epochs`` replaces the quick profile's 120 for every setting alike (a budget: one DP-Adam
epoch of 200 faces is about 3 s of one core); below about 100 epochs even the non-private VAE's
decoder ignores the label (docs/lfw20-faces.md), so a shorter run measures nothing.
``--baseline-from`` copies the baseline's cells from a sweep's rows instead of retraining them:
the same recipe, with the sweep's own draws (a sweep's cell also names its attacks, so its noise
and training keys differ from this script's cell, as every setting's differ from each other) on
that sweep's device. ``--time-one`` trains one
baseline run and prints its parts' seconds.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.cell.gen_accuracy import generate_and_classify  # noqa: E402
from audit.cell.membership import cell_data  # noqa: E402
from audit.cell.target import train_target, training_diverged  # noqa: E402
from audit.datasets import dataset_split, load_dataset  # noqa: E402
from audit.mechanisms import Context, get_mechanism, make_cell  # noqa: E402
from audit.paper_recipe import PAPER_VAE_TABLE  # noqa: E402
from audit.profiles import ProfileName, profile_for_dataset  # noqa: E402
from audit.sweep.runner import code_version  # noqa: E402
from dpvae_core.progress import null_progress  # noqa: E402
from dpvae_core.schedule import dp_sgd_steps  # noqa: E402

DATASET = "lfw20"
MECH = "cdp"

#: The trade-off paper's LFW20 VAE learning rate per noise multiplier (its appendix, Table 2,
#: the CDP columns; batch sizes in the same table: 16 at z = 0.01, 64 at z = 0.1).
PAPER_LR = {0.001: 4.67e-4, 0.01: 1.82e-4, 0.1: 1.1e-4, 0.5: 5.62e-4, 1.0: 4.01e-5}
PAPER_CLIP_NORM = 0.03  # the paper's Table 2, LFW20 ("C, microbatch: 0.03, 4")
MICROBATCH = 4
CODE_VERSION = code_version()  # at start: the code this process imported

FIELDS = (
    "source",
    "z",
    "setting",
    "seed",
    "epochs",
    "batch_size",
    "lr",
    "clip_norm_option",
    "clip_norm",
    "microbatch",
    "steps",
    "epsilon",
    "acc",
    "acc_majority",
    "n_train",
    "n_test",
    "loss_first",
    "loss_last",
    "diverged",
    "train_s",
    "classify_s",
    "cpu_s",
)


def has_microbatch() -> bool:
    """Whether this checkout's cdp takes a ``microbatch`` option."""
    return "microbatch" in get_mechanism(MECH).options_type.__dataclass_fields__


def settings_for(z: float, with_microbatch: bool) -> dict[str, dict[str, Any]]:
    """Each setting's changes: ``profile`` fields and the mechanism's ``options``."""
    settings: dict[str, dict[str, Any]] = {
        "baseline": {},
        # the baseline retrained by this script, where --baseline-from copies "baseline"
        "baseline-cpu": {},
        "batch64": {"profile": {"batch_size": 64}},
        "lr-paper": {"profile": {"lr": PAPER_LR[z]}},
        "clip-median": {"options": {"clip_norm": "median"}},
        "clip-0.03": {"options": {"clip_norm": PAPER_CLIP_NORM}},
    }
    if with_microbatch:
        settings["microbatch4"] = {"options": {"microbatch": MICROBATCH}}
    recipe = PAPER_VAE_TABLE[DATASET][z]
    micro = {"microbatch": MICROBATCH} if with_microbatch else {}
    settings["paper-recipe"] = {
        "profile": {"lr": recipe.lr, "batch_size": recipe.batch_size},
        "options": {"clip_norm": "median", **micro},
    }
    return settings


def run_one(
    dataset: Any, z: float, seed: int, setting: str, change: dict[str, Any], epochs: int
) -> dict[str, Any]:
    profile = profile_for_dataset(ProfileName.QUICK, DATASET)
    profile = replace(profile, epochs=epochs, **change.get("profile", {}))
    options = dict(change.get("options", {}))
    cell = make_cell(DATASET, MECH, "noise_multiplier", z, seed, profile, options)
    data = cell_data(dataset, dataset_split(dataset, seed), cell)
    ctx = Context(device="cpu", progress=null_progress)
    cpu = time.process_time()
    start = time.perf_counter()
    target = train_target(cell, data, ctx)
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    generated = generate_and_classify(cell, data, target, ctx)
    classify_s = time.perf_counter() - start
    test_y = data.test[1].numpy()
    losses = [float(x) for x in target.trained.history.train_loss]
    run = target.trained.history.dp
    return {
        "source": f"this script, cpu, {CODE_VERSION}",
        "z": z,
        "setting": setting,
        "seed": seed,
        "epochs": profile.epochs,
        "batch_size": profile.batch_size,
        "lr": profile.lr,
        "clip_norm_option": options.get("clip_norm", "default"),
        "clip_norm": run.clip_norm if run else math.nan,
        "microbatch": options.get("microbatch", 1),
        "steps": run.steps if run else 0,
        "epsilon": target.claim.epsilon,
        "acc": generated.acc,
        "acc_majority": np.bincount(test_y).max() / len(test_y),
        "n_train": len(data.train[1]),
        "n_test": len(test_y),
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "diverged": training_diverged(losses),
        "train_s": round(train_s, 1),
        "classify_s": round(classify_s, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
    }


def baseline_rows(path: Path, zs: list[float], seeds: list[int]) -> list[dict[str, Any]]:
    """The quick recipe's cells as a sweep ran them (``--baseline-from``: its collected
    ``runs.csv``), on the machine and device that sweep ran on, with that sweep's draws; only the
    columns a sweep row has are filled."""
    import pandas as pd

    runs = pd.read_csv(path)
    runs = runs[(runs["dataset"] == DATASET) & (runs["mech"] == MECH)]
    quick = profile_for_dataset(ProfileName.QUICK, DATASET)
    out = []
    for (z, seed), cell in runs.groupby(["param_value", "seed"]):
        r = cell.iloc[0]
        if float(z) not in zs or int(seed) not in seeds:
            continue
        if (int(r["epochs"]), int(r["batch_size"]), float(r["lr"])) != (
            quick.epochs,
            quick.batch_size,
            quick.lr,
        ):
            continue
        row = {k: math.nan for k in FIELDS}
        row.update(
            source=f"{path.name} ({r['code_version']})",
            z=float(z),
            setting="baseline",
            seed=int(seed),
            epochs=int(r["epochs"]),
            batch_size=int(r["batch_size"]),
            lr=float(r["lr"]),
            clip_norm_option="default",
            clip_norm=float(r["clip_norm"]),
            microbatch=1,
            steps=dp_sgd_steps(
                n_train=int(r["n_train"]), batch_size=int(r["batch_size"]), epochs=int(r["epochs"])
            ),
            epsilon=float(r["epsilon"]),
            acc=float(r["acc"]),
            acc_majority=float(r["acc_majority"]),
            n_train=int(r["n_train"]),
            n_test=int(r["n_test"]),
            diverged=bool(r["train_diverged"]),
        )
        out.append(row)
    return out


def done_keys(path: Path) -> set[tuple[float, str, int, int]]:
    if not path.exists():
        return set()
    with path.open() as f:
        return {
            (float(r["z"]), r["setting"], int(r["seed"]), int(r["epochs"]))
            for r in csv.DictReader(f)
        }


def append(path: Path, row: dict[str, Any]) -> None:
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        writer.writerow({k: row[k] for k in FIELDS})


def summary(path: Path) -> None:
    """Per (z, setting): mean accuracy over seeds, its spread (max - min, and the sd), the
    difference from the baseline's mean, and the majority rate."""
    with path.open() as f:
        rows = list(csv.DictReader(f))
    groups: dict[tuple[int, float, str], list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault((int(r["epochs"]), float(r["z"]), r["setting"]), []).append(r)
    print(
        "| z | setting | epochs | B | lr | C | steps | epsilon | seeds | acc per seed | "
        "mean | spread (max-min) | mean - baseline | mean - baseline-cpu | majority | source |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (epochs, z, setting), group in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1], _order(kv[0][2]))
    ):
        group.sort(key=lambda r: int(r["seed"]))
        acc = [float(r["acc"]) for r in group]
        base_mean, cpu_mean = (
            statistics.mean(float(r["acc"]) for r in groups[(epochs, z, name)])
            if (epochs, z, name) in groups
            else math.nan
            for name in ("baseline", "baseline-cpu")
        )
        mean = statistics.mean(acc)
        first = group[0]
        clip = ", ".join(sorted({f"{float(r['clip_norm']):.3g}" for r in group}))
        print(
            f"| {z:g} | {setting} | {epochs} | {first['batch_size']} | "
            f"{float(first['lr']):.3g} | {clip} | {first['steps']} | "
            f"{float(first['epsilon']):.3g} | {len(acc)} | "
            + ", ".join(f"{a:.3f}" for a in acc)
            + f" | {mean:.3f} | {max(acc) - min(acc):.3f} | {mean - base_mean:+.3f} | "
            f"{mean - cpu_mean:+.3f} | "
            f"{float(first['acc_majority']):.3f} | "
            + "; ".join(sorted({r["source"] for r in group}))
            + " |"
        )


def _order(setting: str) -> int:
    names = [
        "baseline",
        "baseline-cpu",
        "batch64",
        "lr-paper",
        "clip-median",
        "clip-0.03",
        "microbatch4",
        "paper-recipe",
    ]
    return names.index(setting) if setting in names else len(names)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-home", type=Path, default=None, help="the folder holding lfw_home/")
    p.add_argument("--z", type=float, nargs="+", default=[0.01, 0.1])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--epochs", type=int, default=120, help="VAE epochs of every setting")
    p.add_argument("--settings", nargs="+", default=None, help="a subset of the settings")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/recipe_ablation.csv"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--time-one", action="store_true", help="one baseline run, timed")
    p.add_argument(
        "--baseline-from",
        type=Path,
        default=None,
        help="a sweep's runs.csv holding the quick recipe's cells (then the baseline is not "
        "retrained: its rows are copied from there, marked by their source)",
    )
    p.add_argument("--summary", type=Path, default=None, help="print a CSV's table and exit")
    args = p.parse_args()
    if args.summary is not None:
        summary(args.summary)
        return
    if args.data_home is None:
        p.error("--data-home DIR is needed (the folder holding lfw_home/)")
    for z in args.z:
        if z not in PAPER_LR:
            p.error(f"--z {z}: the paper's learning rate is known for {sorted(PAPER_LR)}")
    torch.set_num_threads(args.threads)
    micro = has_microbatch()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); cdp microbatch option: "
        f"{'yes' if micro else 'no (microbatch4 left out)'}",
        flush=True,
    )
    dataset = load_dataset(DATASET, data_home=args.data_home)
    if args.time_one:
        row = run_one(dataset, args.z[0], args.seeds[0], "baseline", {}, args.epochs)
        print(row, flush=True)
        return
    done = done_keys(args.out)
    if args.baseline_from is not None:
        for row in baseline_rows(args.baseline_from, args.z, args.seeds):
            if (row["z"], "baseline", row["seed"], row["epochs"]) not in done:
                append(args.out, row)
                done.add((row["z"], "baseline", row["seed"], row["epochs"]))
    for seed in args.seeds:
        for z in args.z:
            for setting, change in settings_for(z, micro).items():
                wanted = args.settings or [n for n in settings_for(z, micro) if n != "baseline-cpu"]
                if setting not in wanted:
                    continue
                if (z, setting, seed, args.epochs) in done:
                    continue
                row = run_one(dataset, z, seed, setting, change, args.epochs)
                append(args.out, row)
                print(
                    f"z {z:g} {setting} seed {seed}: acc {row['acc']:.3f} (majority "
                    f"{row['acc_majority']:.3f}), C {row['clip_norm']:.3g}, {row['steps']} steps, "
                    f"loss {row['loss_first']:.4g} -> {row['loss_last']:.4g}, "
                    f"train {row['train_s']} s, classify {row['classify_s']} s",
                    flush=True,
                )
    summary(args.out)


if __name__ == "__main__":
    main()
