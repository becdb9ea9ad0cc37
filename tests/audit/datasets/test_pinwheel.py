"""``--dataset pinwheel``: PriVAE's clustering task as a benchmark dataset."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from audit.datasets import load_dataset
from audit.profiles import ProfileName, profile_for_dataset
from dpvae_core.records import Modality
from models.factory import PointModels, model_family
from models.priors import GaussianMixturePrior


def test_pinwheel_loads_800_points_in_4_spirals():
    data = load_dataset("pinwheel")
    assert data.modality is Modality.POINTS and data.shape == (2,)
    assert len(data.y) == 800 and np.bincount(data.y).tolist() == [200] * 4
    assert data.content_hash == load_dataset("pinwheel").content_hash  # fixed data


@pytest.mark.parametrize("profile", ["quick", "standard"])
def test_every_profile_takes_paper_004s_settings_and_400_training_points(profile):
    got = profile_for_dataset(ProfileName(profile), "pinwheel")
    assert (got.latent_dim, got.batch_size, got.lr, got.max_train) == (2, 20, 0.01, 400)


def test_the_point_family_is_the_mlp_vae_with_the_mixture_prior():
    family = model_family((2,), 4)
    assert isinstance(family, PointModels)
    vae = family.target_vae(latent_dim=2)
    assert isinstance(vae.prior, GaussianMixturePrior) and vae.noise_shape == (20, 2)
    assert family.target_vae(latent_dim=3).prior is None  # the corners prior is 2-D
    assert family.classifier()(torch.zeros(5, 2)).shape == (5, 4)


def _run(tmp_path: Path, *args: str) -> int:
    """``benchmark.py --dataset pinwheel ARGS`` in this process (quick profile); its status."""
    from benchmark import main

    return main(
        ["--dataset", "pinwheel", *args, "--out", str(tmp_path / "out"), "--no-progress",
         "--profile", "quick"]
    )  # fmt: skip


@pytest.mark.parametrize("mech", ["ldp", "vae-ldp", "dp2vae"])
def test_mechanisms_undefined_for_points_are_refused_before_anything_runs(tmp_path, capsys, mech):
    assert _run(tmp_path, "--mech", mech) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and mech in lines[0] and "points" in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_a_termwise_kl_prior_cell_runs_end_to_end_with_the_latent_columns(tmp_path):
    status = _run(
        tmp_path, "--mech", "cdp-termwise", "--grid", "2", "--epochs", "2",
        "--divergence", "kl-prior", "--alpha", "20", "--partitions", "1",
        "--clip-norm", "0.05", "--clip-norm-2", "0.0005", "--beta", "0",
        "--classifier-epochs", "3", "--gen-records", "200", "--no-report",
    )  # fmt: skip
    assert status == 0
    rows = pd.read_csv(tmp_path / "out" / "runs.csv")
    private = rows[rows["mech"] == "cdp-termwise"].iloc[0]
    assert "divergence=kl-prior" in private["privacy_notes"]
    assert private["n_train"] == 400 and private["latent_dim"] == 2
    for column in ("latent_hoyer", "latent_mmd", "latent_mmd_sparse", "mi_ap", "acc"):
        assert math.isfinite(private[column]), column
    assert 0 < private["epsilon"] < math.inf


@pytest.mark.parametrize("mech", ["ldp", "vae-ldp"])
def test_the_audit_command_refuses_them_too(mech, capsys):
    from benchmark import main

    argv = ["audit", "--dataset", "pinwheel", "--mech", mech, "--grid", "1", "--profile", "quick"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {mech} is defined for") and "points" in err and "\n" not in err
