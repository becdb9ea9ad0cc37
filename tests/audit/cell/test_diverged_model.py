"""A target VAE whose training diverged (NaN outputs) still yields a finished, flagged cell.

Seen on LFW20 (standard profile, vae-ldp sigma = 10): the target's epoch loss went from 1.8e3 to
3e26 and its decoder returned NaN for real records, so the loss evaluation raised and the whole
cell was lost. Here a tiny cell's target is broken the same way (an exploding posterior
variance: exp(logvar / 2) overflows, z is infinite, the decoder returns NaN).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

import audit.mechanisms.mechanism as mechanism_module
from attacks.attack import AttackResult, Variant
from attacks.distances import Distance
from audit.config import CellConfig
from audit.sweep.cell_run import run_cell
from models.generation import finite_records
from models.vae import ConditionalConvVAE, vae_loss_terms
from tests.audit.empirical.fixtures import CTX, TINY_PROFILE, tiny_data

ATTACKS = ("reconstruction", "monte-carlo", "latent-search", "likelihood", "domias")


def test_loss_terms_are_nan_for_a_nan_reconstruction_and_unchanged_for_the_others():
    torch.manual_seed(0)
    x = torch.rand(3, 1, 4, 4)
    recon = torch.rand(3, 1, 4, 4)
    mu, logvar = torch.zeros(3, 2), torch.zeros(3, 2)
    healthy, _ = vae_loss_terms(x, recon, mu, logvar)
    broken = recon.clone()
    broken[1, 0, 2, 2] = math.nan
    rec, _ = vae_loss_terms(x, broken, mu, logvar)
    assert math.isnan(rec[1])
    assert torch.equal(rec[[0, 2]], healthy[[0, 2]])  # bit for bit: the healthy path is untouched


def test_nonfinite_scores_rank_nan_last_and_inf_first_keeping_the_finite_order():
    is_member = np.array([True, True, False, False, True])
    scores = np.array([0.3, math.nan, 0.1, -math.inf, math.inf])
    result = AttackResult(
        attack="likelihood",
        distance=Distance.MSE,
        variant=Variant.RAW,
        scores=scores,
        is_member=is_member,
        n_samples=1,
    ).with_finite_scores()
    assert np.isfinite(result.scores).all()
    assert result.nonfinite == 3
    assert list(np.argsort(-result.scores, kind="stable")) == [4, 0, 2, 1, 3]
    assert result.to_row()["attack_nonfinite"] == 3


def test_generated_nan_records_are_zeroed_and_counted():
    x = torch.rand(4, 1, 2, 2)
    x[2, 0, 1, 1] = math.nan
    x[3, 0, 0, 0] = math.inf
    clean, n_bad = finite_records(x)
    assert n_bad == 2
    assert torch.isfinite(clean).all()
    assert torch.equal(clean[:2], x[:2])


def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.from_numpy((bunch.images[:, None] / 16.0).astype(np.float32))
    return x, torch.from_numpy(bunch.target.astype(np.int64))


def _break(model: ConditionalConvVAE) -> None:
    """The divergence seen on LFW20: a posterior log-variance far past float32's exp range (the
    encoder-using attacks get NaN), and a NaN weight in the decoder (D_gen gets NaN too)."""
    with torch.no_grad():
        model.fc_logvar.bias.fill_(400.0)
        model.fc_dec.bias[0] = math.nan


@pytest.fixture
def diverging_training(monkeypatch):
    real = mechanism_module.train_vae

    def train_then_diverge(model, train, val, settings, *, progress):
        history = real(model, train, val, settings, progress=progress)
        _break(model)
        history.train_loss.append(3.0e26)
        return history

    monkeypatch.setattr(mechanism_module, "train_vae", train_then_diverge)


def test_a_diverged_target_gives_every_attacks_rows_flagged_instead_of_an_error(
    diverging_training,
):
    data = tiny_data()
    x, y = _digits()
    data = replace(data, test=(x[96:200], y[96:200]), n_total=200)  # 40 reference records
    cell = CellConfig(
        dataset="digits",
        mech="none",
        param_name="none",
        param_value=None,
        seed=0,
        profile=replace(TINY_PROFILE, reference_models=1),
        attacks=ATTACKS,
    )
    outcome = run_cell(cell, data, CTX, acc_real=0.5, code_version="test", baseline_hash="x")
    rows = outcome.rows
    assert {r.attack for r in rows} == set(ATTACKS)
    assert all(r.train_diverged for r in rows)
    assert math.isnan(outcome.history["loss_train_real"])
    # the broken decoder's NaN reached the encoder-using attacks and was ranked, not raised on
    assert any(r.attack_nonfinite > 0 for r in rows if r.attack == "reconstruction")
    assert all(0.0 <= r.mi_ap <= 1.0 and 0.0 <= r.mi_auc <= 1.0 for r in rows)
    assert "gen_nonfinite_records_zeroed" in rows[0].privacy_notes
    for key, scores in outcome.scores.items():
        assert np.isfinite(np.asarray(scores, dtype=float)).all(), key
