"""A sweep cell exported as a release and attacked with ``benchmark.py attack`` gives the cell's
own rows: the same MI AP, AUC and TPR per attack result, and the same held-out worst case."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

import benchmark
from attacks.registry import sweep_attacks
from audit.config import SweepConfig
from audit.profiles import PROFILES, ProfileName
from audit.release.export import export_cell
from audit.sweep.runner import run_sweep

TINY = replace(
    PROFILES[ProfileName.QUICK],
    epochs=2,
    max_train=30,
    attack_samples=3,
    classifier_epochs=2,
    classifier_patience=1,
    latent_dim=4,
    reference_models=0,
)
KEY = ["attack", "distance", "variant"]
SAME = ["mi_ap", "mi_auc", "tpr_at_fpr_1pct", "worst_case", "worst_mi_ap", "attack_members"]


def test_an_exported_cell_gives_the_cells_rows(tmp_path: Path, capsys) -> None:
    config = SweepConfig(
        dataset="digits",
        mechs=("none",),
        profile_name=ProfileName.QUICK,
        profile=TINY,
        seeds=(1,),
        out=tmp_path / "sweep",
        progress=False,
        report=False,
        attacks=sweep_attacks(),
    )
    run_sweep(config)
    sweep = pd.read_csv(tmp_path / "sweep" / "runs.csv")  # both sides as written (CSV floats)
    exported = export_cell(tmp_path / "sweep", sweep.config_hash.iloc[0], tmp_path / "export")
    argv = [*exported.argv, "--out", str(tmp_path / "release"), "--no-progress"]
    assert benchmark.main(argv) == 0, capsys.readouterr().err
    attacked = pd.read_csv(tmp_path / "release" / "runs.csv")
    assert len(attacked) == len(sweep) == 11  # every attack result of the whole-VAE release
    both = sweep.merge(attacked, on=KEY, suffixes=("_sweep", "_release"), validate="one_to_one")
    assert len(both) == len(sweep)
    for column in SAME:  # NaN equals NaN here: TPR at 1 % FPR is empty below 100 non-members
        a, b = both[f"{column}_sweep"], both[f"{column}_release"]
        assert ((a == b) | (a.isna() & b.isna())).all(), column
    assert (attacked.mech == "external").all() and attacked.acc.isna().all()
