"""Runs and thresholds files written by hand for the gate's tests: an honest quick run's rows
(a bare runs.csv, as code before the attack column wrote it) and a thresholds document."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from benchmark import main

ROOT = Path(__file__).resolve().parents[3]
# (mech, param_name, param_value, MI AP mse, MI AP ssim, acc) of an honest quick run.
HONEST = [
    ("none", "none", math.nan, 0.62, 0.64, 0.78),
    ("cdp", "noise_multiplier", 1.0, 0.53, 0.55, 0.60),
    ("ldp", "eps_i", 100.0, 0.51, 0.52, 0.55),
]


def runs(settings=HONEST, seeds=(0, 1), offset=0.0) -> pd.DataFrame:
    rows = []
    for seed in seeds:
        for mech, pname, value, mse, ssim, acc in settings:
            for distance, mi in (("mse", mse), ("ssim", ssim)):
                rows.append(
                    {
                        "dataset": "lfw-subset",
                        "mech": mech,
                        "param_name": pname,
                        "param_value": value,
                        "seed": seed,
                        "attack": "reconstruction",
                        "distance": distance,
                        "variant": "mean",
                        "profile": "quick",
                        "mi_ap": mi + offset * seed,
                        "acc": acc - offset * seed,
                        "acc_base": 0.5,
                        "config_hash": f"{mech}-{value}-{seed}",
                    }
                )
    return pd.DataFrame(rows)


def write_runs(run_dir: Path, frame: pd.DataFrame) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    frame.to_csv(run_dir / "runs.csv", index=False)
    return run_dir


def entry(**kw) -> dict:
    base = {
        "dataset": "lfw-subset",
        "profile": "quick",
        "mech": "cdp",
        "param_value": None,
        "distance": "any",
        "max_mi_ap": 0.6,
        "min_acc": 0.53,
        "tolerance": 0.02,
        "margin_source": "test",
    }
    return {**base, **kw}


THRESHOLDS = {
    "schema_version": 1,
    "entries": [
        entry(mech="none", max_mi_ap=None, min_mi_ap=0.58, min_acc=0.7),
        entry(mech="cdp", param_value=1.0, max_mi_ap=0.58),
        entry(mech="ldp", max_mi_ap=0.56, min_acc=0.53),
    ],
}


def write_thresholds(path: Path, doc: dict = THRESHOLDS) -> Path:
    path.write_text(json.dumps(doc))
    return path


def run_check(tmp_path: Path, frame: pd.DataFrame, doc: dict = THRESHOLDS) -> int:
    run_dir = write_runs(tmp_path / "run", frame)
    return main(
        ["check", "--thresholds", str(write_thresholds(tmp_path / "t.json", doc)), str(run_dir)]
    )
