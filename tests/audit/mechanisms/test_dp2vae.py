"""``dp2vae``: the mechanism trains the decoder by the DP2-VAE paper's two stages, releases it alone
and claims the valid bound (the paper's value labelled in the notes)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from attacks.threat import ReleaseKind
from audit.mechanisms import CellData, Context
from audit.mechanisms import make_cell as build_cell
from audit.mechanisms.dp2vae import Dp2EpsilonParams, Dp2Options, Dp2Vae, default_subsets
from audit.privacy.dp2vae_accounting import dp2vae_epsilon
from audit.profiles import PROFILES, ProfileName
from dpvae_core.progress import null_progress
from dpvae_core.schedule import dp_sgd_steps

MECH = Dp2Vae()
CTX = Context(device="cpu", progress=null_progress)
SMALL = replace(PROFILES[ProfileName.QUICK], epochs=2, batch_size=4, latent_dim=4)


def make_data(n=(16, 8, 8)) -> CellData:
    gen = torch.Generator().manual_seed(0)

    def pair(k):
        return torch.rand(k, 1, 8, 8, generator=gen), torch.arange(k) % 2

    return CellData(pair(n[0]), pair(n[1]), pair(n[2]), num_classes=2, n_total=sum(n))


def make_cell(z: float = 4.0, **options):
    return build_cell("digits", "dp2vae", "noise_multiplier", z, 0, SMALL, options)


def test_default_subsets_follow_the_paper_ratio_and_stay_at_least_two():
    assert default_subsets(60000) == 1000
    assert default_subsets(50) == 2 and default_subsets(3) == 2 and default_subsets(1) == 1


def test_releases_the_decoder_only_and_declares_its_options():
    assert MECH.release is ReleaseKind.DECODER_ONLY
    assert {"subsets", "max_batch_size", "pretrain_epochs"} <= set(Dp2Options.names())
    with pytest.raises(ValueError, match="subsets must be an integer >= 1, got 0"):
        make_cell(subsets=0)


def test_trains_and_claims_the_valid_bound_with_the_paper_value_labelled():
    from models.factory import model_family

    data, cell = make_data(), make_cell(subsets=2, pretrain_epochs=1)
    torch.manual_seed(0)
    model = model_family((1, 8, 8), 2).target_vae(latent_dim=4, per_example_gradients=True)
    trained = MECH.train(model, MECH.prepare(cell, data, CTX), cell, CTX)
    record = trained.history.dp
    assert record.steps == dp_sgd_steps(n_train=16, batch_size=4, epochs=2)
    claim = MECH.claim(cell, data, trained)
    expected = dp2vae_epsilon(
        n_train=16,
        subsets=2,
        steps=record.steps,
        noise_multiplier=4.0,
        max_batch_size=4,
        delta=1 / 16,
    )
    assert claim.epsilon == pytest.approx(expected)
    paper = claim.extra["epsilon_paper_theorem_3_1"]
    assert math.isfinite(paper) and paper < claim.epsilon
    assert "NOT a bound" in str(claim.extra)


def test_epsilon_on_demand_prints_both_values_the_valid_one_last():
    params = Dp2EpsilonParams(
        n_train=50, batch_size=16, epochs=40, noise_multiplier=4.0, subsets=10
    )
    accounted = MECH.account(params)
    steps = dp_sgd_steps(n_train=50, batch_size=16, epochs=40)
    valid = dp2vae_epsilon(
        n_train=50,
        subsets=10,
        steps=steps,
        noise_multiplier=4.0,
        max_batch_size=16,
        delta=1 / 50,
    )
    assert accounted.value == pytest.approx(valid)
    assert any("epsilon_paper_theorem_3_1" in line for line in accounted.lines)
