"""The series path of the pipeline: model choice by modality, ``ldp`` as the Laplace mechanism
per measurement, ``vae-ldp`` with the LSTM perturbation model, and a tiny end-to-end sweep."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from attacks import Distance
from attacks.distances import distances_for
from audit.config import CellConfig, SweepConfig
from audit.mechanisms import CellData, Context, Trained, get_mechanism, make_cell
from audit.profiles import PROFILES, ProfileName
from audit.sweep.runner import run_sweep
from dpvae_core.progress import null_progress
from dpvae_core.records import Modality
from models.classifier import SmallCNN
from models.factory import Generation, ImageModels, SeriesModels, model_family
from models.har_cnn import HarCNN
from models.lstm_vae import LstmVAE
from models.training import TrainHistory
from models.vae import ConditionalConvVAE
from tests.audit.mechanisms.stats import Z_THRESHOLD, laplace_variance_z

from ..datasets.fixtures import build_motionsense_fixture

CTX = Context(device="cpu", progress=null_progress)
TINY = replace(PROFILES[ProfileName.QUICK], epochs=2, attack_samples=3, classifier_epochs=2)


def series_data(n=(40, 10, 10), shape=(20, 3), *, value: float = 0.0) -> CellData:
    def pair(k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.full((k, *shape), value), torch.arange(k) % 2

    return CellData(pair(n[0]), pair(n[1]), pair(n[2]), num_classes=2, n_total=sum(n))


def cell(mech: str, value: float, **options: object) -> CellConfig:
    profile = replace(TINY, epochs=1, latent_dim=4)
    return make_cell("basicmotions", mech, "p", value, 0, profile, options)


def test_models_follow_the_modality():
    image, series = model_family((1, 8, 8), 3), model_family((500, 12), 6)
    assert isinstance(image, ImageModels) and isinstance(series, SeriesModels)
    assert isinstance(image.target_vae(latent_dim=4), ConditionalConvVAE)
    assert isinstance(image.classifier(), SmallCNN)
    assert image.generation is Generation.PRIOR
    assert distances_for(image.modality) == (Distance.MSE, Distance.SSIM)
    vae = series.target_vae(latent_dim=4)
    assert isinstance(vae, LstmVAE) and vae.record_shape == (500, 12) and vae.num_classes == 6
    assert isinstance(series.classifier(), HarCNN)
    assert series.generation is Generation.CLASS_LATENT
    assert distances_for(series.modality) == (Distance.MSE,) == distances_for("series", ["mse"])
    with pytest.raises(ValueError, match=r"\['ssim'\] do not apply to series records; .* mse"):
        distances_for(series.modality, ["mse", "ssim"])
    with pytest.raises(ValueError, match="neither images"):
        model_family((2, 1, 8, 8), 3)


def test_ldp_grid_depends_on_the_modality():
    ldp = get_mechanism("ldp")
    assert ldp.default_grid_for(Modality.SERIES) == (10.0, 1.0, 0.5, 0.1, 0.01)
    assert ldp.default_grid_for(Modality.IMAGE) == ldp.default_grid


@pytest.mark.statistical
@pytest.mark.parametrize("wrong_factor", [1.0, 0.5])
def test_ldp_series_noise_is_laplace_with_sensitivity_two(wrong_factor):
    """Mid-range values, eps_i = 200: noise Laplace(2 / 200) per value (clipping at +-1 has
    probability e^-100); a sensitivity of 1 (factor 0.5) is rejected by the same check."""
    data = series_data(n=(4000, 10, 10), shape=(25, 2))
    prepared = get_mechanism("ldp").prepare(cell("ldp", 200.0), data, CTX)
    z = laplace_variance_z(prepared.train[0] - data.train[0], scale=wrong_factor * 2 / 200.0)
    assert (abs(z) < Z_THRESHOLD) == (wrong_factor == 1.0)


def test_ldp_series_settings_clipping_and_claim():
    data = series_data(value=0.5)
    data = replace(data, val=(torch.full_like(data.val[0], 3.0), data.val[1]))  # beyond [-1, 1]
    ldp = get_mechanism("ldp")
    full = ldp.prepare(cell("ldp", 1.0), data, CTX)
    assert full.train[0].abs().max() <= 1 and full.val[0].abs().max() <= 1
    assert full.notes["labels"].startswith("not perturbed")
    assert not torch.equal(full.train[0], data.train[0])
    only_train = ldp.prepare(cell("ldp", 1.0, ldp_scope="train"), data, CTX)
    assert torch.equal(only_train.val[0], data.val[0])
    claim = ldp.claim(cell("ldp", 0.5), data, Trained(TrainHistory()))
    assert claim.epsilon == 0.5 * 20 * 3 and claim.delta == 0
    assert claim.extra["eps_per_measurement"] == 0.5
    # windows every 5 of 20 samples: each measurement in up to 4 windows, a window's time steps
    # perturbed 20 + 2 * (15 + 10 + 5) = 80 times in all
    overlap = ldp.claim(cell("ldp", 0.5, window_stride=5), data, Trained(TrainHistory()))
    assert overlap.extra["eps_per_measurement"] == 2.0
    assert overlap.epsilon == 0.5 * 80 * 3
    with pytest.raises(ValueError, match="pixel_block applies to images only"):
        ldp.prepare(cell("ldp", 1.0, pixel_block=2), data, CTX)


def test_vae_ldp_series_uses_the_lstm_perturbation_model():
    data = series_data()
    prepared = get_mechanism("vae-ldp").prepare(cell("vae-ldp", 1.0), data, CTX)
    assert prepared.train[0].shape == data.train[0].shape
    assert prepared.train[0].abs().max() < 1  # an LSTM decoder's range
    assert not torch.equal(prepared.train[0], data.train[0])


def test_tiny_sweep_on_the_motionsense_fixture(tmp_path):
    home = build_motionsense_fixture(tmp_path / "data")
    config = SweepConfig(
        dataset="motionsense",
        mechs=("none", "ldp"),
        profile_name=ProfileName.QUICK,
        profile=replace(TINY, batch_size=3),  # the fixture's D_train holds 3 records
        seeds=(0,),
        out=tmp_path / "out",
        data_home=home,
        grid=(1.0,),
        progress=False,
        attacks=("reconstruction",),  # the mechanism's rows, at the cheapest list of attacks
    )
    rows = run_sweep(config).rows
    assert sorted(rows.mech) == ["ldp", "none"] and set(rows.distance) == {"mse"}
    assert rows.mi_ap.between(0, 1).all() and rows.acc.between(0, 1).all()
    assert (rows.acc_base == 1 / 3).all() and (rows.n_train == 3).all()
    ldp = rows[rows.mech == "ldp"].iloc[0]
    assert ldp.epsilon == 500 * 12 * 1.0 and "generation=class-latent" in ldp.privacy_notes
    for notes in rows.privacy_notes:  # every series row, the baseline included
        assert "series_scaling=fixed per-channel ranges (MotionSense iPhone" in notes
    assert "labels=not perturbed" in ldp.privacy_notes
    # against the motionsense baseline of the same seed, where that baseline beats chance
    assert 0 <= ldp.phi <= 2 if ldp.utility_valid else ldp.phi != ldp.phi
