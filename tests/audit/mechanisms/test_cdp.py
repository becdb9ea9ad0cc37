"""The ``cdp`` and ``cdp-termwise`` mechanisms as the pipeline uses them: options, refusal of a
batch-wise term in standard DP-Adam, clip-norm sources, target epsilon, claims, and a sweep."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd
import pytest
import torch

from audit.config import CellConfig, SweepConfig
from audit.mechanisms import CellData, Context, Trained, get_mechanism
from audit.mechanisms import make_cell as build_cell
from audit.mechanisms.cdp import MEDIAN_SOURCE
from audit.mechanisms.cdp_termwise import partition_sensitivity
from audit.mechanisms.dp_adam_options import ClipNormRule, parse_clip_norm
from audit.privacy.dp_sgd_accounting import cdp_claim, dp_sgd_epsilon
from audit.privacy.termwise_accounting import termwise_epsilon
from audit.profiles import PROFILES, ProfileName
from audit.sweep.runner import run_sweep
from dpvae_core.progress import null_progress
from dpvae_core.schedule import dp_sgd_steps
from models.dp import DEFAULT_CLIP_NORM, DPRun, GradSampleMode
from models.training import TrainHistory

CTX = Context(device="cpu", progress=null_progress)
CDP, TERMWISE = get_mechanism("cdp"), get_mechanism("cdp-termwise")
SMALL = replace(PROFILES[ProfileName.QUICK], epochs=2, batch_size=4, latent_dim=4)


def make_data(n: tuple[int, int, int] = (16, 6, 10)) -> CellData:
    gen = torch.Generator().manual_seed(0)

    def pair(k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.rand(k, 1, 8, 8, generator=gen), torch.arange(k) % 2

    return CellData(pair(n[0]), pair(n[1]), pair(n[2]), num_classes=2, n_total=sum(n))


def make_cell(mech="cdp", z: float = 1.0, **options: object) -> CellConfig:
    return build_cell("digits", mech, "noise_multiplier", z, 0, SMALL, options)


def make_model(data: CellData):
    from models.vae import ConditionalConvVAE

    torch.manual_seed(0)
    return ConditionalConvVAE(
        channels=1, height=8, width=8, num_classes=data.num_classes, latent_dim=SMALL.latent_dim
    )


def train(mech, cell: CellConfig, data: CellData) -> TrainHistory:
    prepared = mech.prepare(cell, data, CTX)
    return mech.train(make_model(data), prepared, cell, CTX)


def test_registered_with_the_grid_and_options():
    for mech in (CDP, TERMWISE):
        assert mech.param_name == "noise_multiplier"
        assert mech.default_grid == (0.001, 0.01, 0.1, 0.5, 1.0, 2.0, 4.0)
        names = set(mech.options_type.names())
        assert {"clip_norm", "target_epsilon", "delta", "conversion"} <= names
    assert {"clip_norm_2", "partitions", "termwise_accounting"} <= set(
        TERMWISE.options_type.names()
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"divergence": "mmd"}, "cannot train a batch-wise divergence.*cdp-termwise"),
        ({"alpha": 100.0}, "alpha=100.0"),
        ({"clip_norm": "abc"}, "clip norm must be a positive number or 'median', got 'abc'"),
        ({"clip_norm": "-1"}, "got '-1'"),
        ({"delta": 2.0}, "delta"),
        ({"conversion": "fancy"}, "fancy"),
        ({"target_epsilon": 0.0}, "target epsilon"),
    ],
)
def test_cdp_rejects_bad_options_before_training(options, message):
    with pytest.raises(ValueError, match=message):
        CDP.check_options(CDP.options_type.from_mapping(options), grid=(1.0,), batch_size=32)
    with pytest.raises(ValueError, match=message):
        CDP.prepare(make_cell(**options), make_data(), CTX)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"divergence": "kl"}, "unknown divergence 'kl'; choose one of: mmd, sparse"),
        ({"alpha": -1.0}, "alpha"),
        ({"partitions": 0}, "partitions"),
        ({"clip_norm_2": -0.5}, "C2"),
        ({"termwise_accounting": "both"}, "both"),
    ],
)
def test_termwise_rejects_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        options = TERMWISE.options_type.from_mapping(options)
        TERMWISE.check_options(options, grid=(1.0,), batch_size=32)


def test_termwise_accepts_a_divergence():
    TERMWISE.check_options(
        TERMWISE.options_type.from_mapping(
            {"divergence": "sparse", "alpha": 10.0, "partitions": 2}
        ),
        grid=(1.0,),
        batch_size=32,
    )


def test_parse_clip_norm():
    assert parse_clip_norm("median") is ClipNormRule.MEDIAN
    assert parse_clip_norm(" Median ") is ClipNormRule.MEDIAN
    assert parse_clip_norm("2.5") == 2.5 and parse_clip_norm(3) == 3.0


def test_cdp_trains_with_the_default_clip_norm_and_claims_the_steps_it_ran():
    data, cell = make_data(), make_cell()
    history = train(CDP, cell, data)
    assert history.history.dp.clip_norm == DEFAULT_CLIP_NORM
    assert history.history.dp.steps == dp_sgd_steps(n_train=16, batch_size=4, epochs=2)
    claim = CDP.claim(cell, data, history)
    expected = cdp_claim(n_train=16, batch_size=4, epochs=2, noise_multiplier=1.0)
    assert claim.epsilon == expected.epsilon and claim.delta == 1 / 16
    assert claim.method == "opacus-rdp/improved" and claim.accountant == "rdp"
    assert claim.extra["clip_norm_source"] == f"default {DEFAULT_CLIP_NORM:g}"


def dp_run(*, steps: int) -> DPRun:
    """A DP run record at z = 1 of ``steps`` steps (what the claim reads)."""
    return DPRun(
        noise_multiplier=1.0,
        clip_norm=1.0,
        steps=steps,
        sample_rate=0.25,
        mean_batch_size=4.0,
        grad_sample_mode=GradSampleMode.BK,
    )


def test_claim_refuses_a_history_with_other_steps():
    data, cell = make_data(), make_cell()
    history = Trained(TrainHistory(dp=dp_run(steps=3)))
    with pytest.raises(RuntimeError, match="ran 3 noisy steps but the accountant counts 8"):
        CDP.claim(cell, data, history)
    with pytest.raises(RuntimeError, match="recorded no DP run"):
        CDP.claim(cell, data, Trained(TrainHistory()))


def test_classic_conversion_and_delta_options():
    data = make_data()
    history = Trained(TrainHistory(dp=dp_run(steps=8)))
    claim = CDP.claim(make_cell(conversion="classic", delta=1e-3), data, history)
    assert claim.method == "opacus-rdp/classic" and claim.delta == 1e-3
    assert claim.epsilon == dp_sgd_epsilon(
        n_train=16, batch_size=4, epochs=2, noise_multiplier=1.0, delta=1e-3, conversion="classic"
    )


def test_median_clip_norm_is_recorded_as_looking_at_private_data():
    data, cell = make_data(), make_cell(clip_norm="median")
    history = train(CDP, cell, data)
    assert history.notes["clip_norm_source"] == MEDIAN_SOURCE
    assert "outside the accounting" in MEDIAN_SOURCE
    assert math.isfinite(history.history.dp.clip_norm) and history.history.dp.clip_norm > 0
    claim = CDP.claim(cell, data, history)
    assert "outside the accounting" in claim.extra["clip_norm_source"]


def test_target_epsilon_replaces_the_grid_value():
    data = make_data()
    cell = make_cell(z=0.001, target_epsilon=5.0)
    z, source = CDP.noise_multiplier(cell, n_train=16)
    assert "grid value 0.001 ignored" in source
    eps = dp_sgd_epsilon(n_train=16, batch_size=4, epochs=2, noise_multiplier=z, delta=1 / 16)
    assert eps <= 5.0 and eps == pytest.approx(5.0, rel=1e-3)
    s, _ = TERMWISE.noise_multiplier(
        make_cell("cdp-termwise", 0.001, target_epsilon=5.0), n_train=16
    )
    assert s > z  # two releases per step need more noise for the same epsilon
    eps_tw = termwise_epsilon(
        n_train=16, batch_size=4, epochs=2, noise_multiplier=s, delta=1 / 16, batch_clip_norm=1.0
    )
    assert eps_tw == pytest.approx(5.0, rel=1e-3)
    assert data.n_total == 32


def test_termwise_claim_names_its_accounting_and_c2_zero_is_dp_adam():
    data = make_data()
    cell = make_cell("cdp-termwise", clip_norm_2=0.0)
    history = train(TERMWISE, cell, data)
    assert history.history.dp.batch_term.clip_norm_2 == 0.0
    claim = TERMWISE.claim(cell, data, history)
    assert claim.method == "opacus-rdp/termwise-no-batch-term/improved"
    assert (
        claim.epsilon == cdp_claim(n_train=16, batch_size=4, epochs=2, noise_multiplier=1.0).epsilon
    )

    cell = make_cell("cdp-termwise", partitions=2)
    history = train(TERMWISE, cell, data)
    assert history.history.dp.batch_term.clip_norm_2 == pytest.approx(0.1 * DEFAULT_CLIP_NORM)
    claim = TERMWISE.claim(cell, data, history)
    assert claim.method == "opacus-rdp/termwise-stacked/improved"
    assert claim.extra["partition_sensitivity"] == 2.0
    assert (
        claim.epsilon > cdp_claim(n_train=16, batch_size=4, epochs=2, noise_multiplier=1.0).epsilon
    )


def test_termwise_refuses_composed_accounting_before_training():
    with pytest.raises(ValueError, match="'composed' is refused.*allowed: stacked"):
        TERMWISE.check_options(
            TERMWISE.options_type.from_mapping({"termwise_accounting": "composed"}),
            grid=(1.0,),
            batch_size=4,
        )


def test_dp_noise_and_termwise_seeds_differ_per_cell(monkeypatch):
    """Cells that differ only in z (or in any option) draw independent DP noise, partitions and
    prior samples; the same cell draws the same."""
    import audit.mechanisms.cdp as cdp_module
    import audit.mechanisms.cdp_termwise as termwise_module

    seen: list[tuple[int, ...]] = []

    def spy_cdp(model, train, val, settings, dp, **kwargs):
        seen.append((dp.noise_seed,))
        return TrainHistory()

    def spy_termwise(model, train, val, settings, dp, termwise, **kwargs):
        seen.append((dp.noise_seed, termwise.seed))
        return TrainHistory()

    monkeypatch.setattr(cdp_module, "train_dp_vae", spy_cdp)
    monkeypatch.setattr(termwise_module, "train_termwise_vae", spy_termwise)
    data = make_data()
    cells = [
        (CDP, make_cell(z=1.0)),
        (CDP, make_cell(z=1.0)),
        (CDP, make_cell(z=2.0)),
        (CDP, make_cell(z=1.0, clip_norm=0.5)),
        (TERMWISE, make_cell("cdp-termwise", z=1.0)),
        (TERMWISE, make_cell("cdp-termwise", z=2.0)),
    ]
    for mech, cell in cells:
        mech.train(None, mech.prepare(cell, data, CTX), cell, CTX)
    assert seen[0] == seen[1]
    noise_seeds = [seen[0][0], *(s[0] for s in seen[2:])]
    assert len(set(noise_seeds)) == len(noise_seeds)
    assert seen[4][1] != seen[5][1]


def test_partition_sensitivity():
    # Per-record (i.i.d.) partitions may hold several records whatever b is: always 2 C2.
    assert partition_sensitivity(n_train=100, partitions=4) == 2.0
    assert partition_sensitivity(n_train=4, partitions=4) == 2.0
    assert partition_sensitivity(n_train=4, partitions=10) == 2.0


TINY = replace(
    PROFILES[ProfileName.QUICK],
    epochs=2,
    max_train=40,
    attack_samples=4,
    classifier_epochs=2,
    classifier_patience=1,
    latent_dim=4,
)


@pytest.mark.slow  # CI's quick sweep runs these mechanisms end to end (the CI budget)
def test_sweep_rows_for_cdp_and_termwise(tmp_path):
    config = SweepConfig(
        dataset="digits",
        mechs=("cdp", "cdp-termwise"),
        profile_name=ProfileName.QUICK,
        profile=TINY,
        seeds=(0,),
        out=tmp_path,
        grid=(1.0,),
        progress=False,
        attacks=("reconstruction",),  # the mechanism's rows, at the cheapest list of attacks
    )
    frame = pd.read_csv(run_sweep(config).csv_path)
    private = frame[frame.mech.isin(["cdp", "cdp-termwise"])]
    assert sorted(private.mech.unique()) == ["cdp", "cdp-termwise"]
    assert len(private) == 4  # two mechanisms x two distances
    assert private.epsilon.map(math.isfinite).all() and (private.epsilon > 0).all()
    assert (private.clip_norm == DEFAULT_CLIP_NORM).all()
    assert (private.phi.notna() == private.utility_valid).all()  # phi only above chance
    termwise = private[private.mech == "cdp-termwise"].iloc[0]
    assert "termwise-stacked" in termwise.epsilon_method
    cdp = private[private.mech == "cdp"].iloc[0]
    assert termwise.epsilon > cdp.epsilon
    for notes in frame.privacy_notes:  # every row, the baseline included
        assert "released_outside_accounting=n_train (|D_train|), train_test_gap" in notes
    assert "so is mean_batch_size" in cdp.privacy_notes
