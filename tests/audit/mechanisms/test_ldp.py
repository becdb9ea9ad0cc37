"""The ``ldp`` mechanism (Fan's DP image pixelization) as the pipeline uses it.

What the target VAE sees is perturbed (LDP-Full: D_train and D_val; LDP-Train: D_train); the real
D_test and the attack's records stay unperturbed; the claim covers any two records
(channels * eps_i * H * W / m).
"""

from __future__ import annotations

import math

import pytest
import torch

from audit.cell.membership import attack_data
from audit.config import CellConfig
from audit.mechanisms import CellData, Context, Trained, get_mechanism
from audit.mechanisms import make_cell as build_cell
from audit.mechanisms.ldp import LdpScope, default_neighborhood, options_for_images
from audit.profiles import PROFILES, ProfileName
from dpvae_core.progress import null_progress
from models.training import TrainHistory

CTX = Context(device="cpu", progress=null_progress)
MECH = get_mechanism("ldp")


def make_data(channels: int = 1, side: int = 8, n: tuple[int, int, int] = (12, 6, 10)) -> CellData:
    gen = torch.Generator().manual_seed(0)

    def pair(k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.rand(k, channels, side, side, generator=gen), torch.arange(k) % 2

    return CellData(pair(n[0]), pair(n[1]), pair(n[2]), num_classes=2, n_total=sum(n))


def make_cell(eps_i: float = 1000.0, *, seed: int = 0, **options: object) -> CellConfig:
    return build_cell("digits", "ldp", "eps_i", eps_i, seed, PROFILES[ProfileName.QUICK], options)


def clone(data: CellData) -> CellData:
    c = lambda p: (p[0].clone(), p[1].clone())  # noqa: E731
    return CellData(c(data.train), c(data.val), c(data.test), data.num_classes, data.n_total)


def test_registered_with_the_paper_grid_and_options():
    assert MECH.param_name == "eps_i"
    assert MECH.default_grid == (10000, 5000, 1000, 500, 100)
    assert set(MECH.options_type.names()) == {"pixel_block", "neighborhood", "ldp_scope"}


@pytest.mark.parametrize("channels", [1, 3])
def test_full_scope_perturbs_train_and_val_only(channels):
    data = make_data(channels)
    original = clone(data)
    prepared = MECH.prepare(make_cell(100.0), data, CTX)
    for got, real in ((prepared.train, original.train), (prepared.val, original.val)):
        assert got[0].shape == real[0].shape and got[0].dtype == real[0].dtype
        assert bool(((got[0] >= 0) & (got[0] <= 1)).all())
        assert not torch.equal(got[0], real[0])
        assert torch.equal(got[1], real[1])  # labels are not perturbed
    for split in ("train", "val", "test"):  # the real splits are never modified in place
        assert torch.equal(getattr(data, split)[0], getattr(original, split)[0])
    assert prepared.notes["ldp_scope"] == "full"
    assert prepared.notes["pixel_block"] == 1 and prepared.notes["neighborhood"] == 8


def test_train_scope_leaves_val_unperturbed():
    data = make_data()
    prepared = MECH.prepare(make_cell(100.0, ldp_scope="train"), data, CTX)
    assert not torch.equal(prepared.train[0], data.train[0])
    assert prepared.val[0] is data.val[0]
    assert prepared.notes["ldp_scope"] == "train"


def test_perturbation_is_seeded_and_differs_per_cell():
    data = make_data()
    full = MECH.prepare(make_cell(100.0), data, CTX)
    again = MECH.prepare(make_cell(100.0), data, CTX)
    train_only = MECH.prepare(make_cell(100.0, ldp_scope="train"), data, CTX)
    other_seed = MECH.prepare(make_cell(100.0, seed=1), data, CTX)
    assert torch.equal(full.train[0], again.train[0])
    assert not torch.equal(full.train[0], train_only.train[0])
    assert not torch.equal(full.train[0], other_seed.train[0])


def test_two_cells_do_not_share_noise_subtraction_recovers_no_pixel():
    """Same seed, eps_i 1e4 and 2e4 (b = 1, m = 8: scales s1 = 8e-4, s2 = 4e-4). With shared
    Laplace draws n, out_k = x + s_k n wherever unclipped, so (s1 out2 - s2 out1) / (s1 - s2)
    gives x back exactly; with independent draws it misses by about the noise scale."""
    data = make_data(3)
    outs = [MECH.prepare(make_cell(eps), data, CTX).train[0].double() for eps in (1e4, 2e4)]
    s1, s2 = 8 / 1e4, 8 / 2e4
    recovered = (s1 * outs[1] - s2 * outs[0]) / (s1 - s2)
    x = data.train[0].double()
    inside = (outs[0] > 0) & (outs[0] < 1) & (outs[1] > 0) & (outs[1] < 1)
    exact = ((recovered - x).abs() < 1e-6) & inside
    assert inside.float().mean() > 0.9  # the attack would apply to most pixels
    assert exact.float().mean() < 0.01


def test_rows_say_labels_are_released_unperturbed():
    data = make_data()
    assert MECH.prepare(make_cell(), data, CTX).notes["labels"].startswith("not perturbed")


def test_release_notes_name_what_is_computed_outside_the_accounting():
    from audit.rows.filling import release_notes

    plain = release_notes({})["released_outside_accounting"]
    assert "n_train" in plain and "train_test_gap" in plain and "mean_batch_size" not in plain
    dp = release_notes({"mean_batch_size": 3.9})["released_outside_accounting"]
    assert "mean_batch_size" in dp


def test_attack_records_are_the_unperturbed_ones():
    data = make_data()
    cell = make_cell(100.0)
    before = attack_data(data, cell)
    prepared = MECH.prepare(cell, data, CTX)
    after = attack_data(data, cell)
    assert torch.equal(before.x, after.x)
    members = after.x[after.is_member]
    real_rows = {tuple(r.flatten().tolist()) for r in data.train[0]}
    perturbed_rows = {tuple(r.flatten().tolist()) for r in prepared.train[0]}
    assert all(tuple(r.flatten().tolist()) in real_rows for r in members)
    assert not any(tuple(r.flatten().tolist()) in perturbed_rows for r in members)


def test_cells_of_side_b_are_constant():
    data = make_data()
    prepared = MECH.prepare(make_cell(100.0, pixel_block=2), data, CTX)
    x = prepared.train[0]
    torch.testing.assert_close(x[..., 0::2, :], x[..., 1::2, :], rtol=0, atol=0)
    torch.testing.assert_close(x[..., 0::2], x[..., 1::2], rtol=0, atol=0)
    assert prepared.notes["pixel_block"] == 2


def test_huge_epsilon_keeps_the_images():
    data = make_data()
    prepared = MECH.prepare(make_cell(1e9), data, CTX)
    torch.testing.assert_close(prepared.train[0], data.train[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("pixel_block", [1, 2])
def test_claim_covers_any_two_records(channels, pixel_block):
    # 8x8 images, default m = 8: channels * eps_i * 64 / 8, whatever the block side b.
    data = make_data(channels)
    claim = MECH.claim(make_cell(500.0, pixel_block=pixel_block), data, Trained(TrainHistory()))
    assert claim.epsilon == channels * 500.0 * 8 and claim.delta == 0.0
    assert claim.extra["eps_i"] == 500.0
    assert claim.extra["epsilon_m_neighbourhood"] == channels * 500.0
    assert claim.extra["epsilon_dataset_sum"] == data.n_total * channels * 500.0
    assert "Table 2" in claim.extra["notes"]


def test_dataset_sum_reproduces_paper_003_table_2():
    """LFW20: |D| = 1906 RGB images, eps_i = 10000 -> 5.718e+07 (the trade-off paper, Table 2,
    LDP)."""
    data = make_data(3, n=(953, 381, 572))
    claim = MECH.claim(make_cell(10000.0), data, Trained(TrainHistory()))
    assert math.isclose(claim.extra["epsilon_dataset_sum"], 5.718e7)
    assert claim.extra["epsilon_m_neighbourhood"] == 30000.0


def test_default_neighbourhood_is_sqrt_of_pixels():
    assert default_neighborhood(64, 64) == 64
    assert default_neighborhood(25, 25) == 25
    assert default_neighborhood(8, 8) == 8
    opts = options_for_images(MECH.options_of(make_cell(neighborhood=3)), (1, 8, 8))
    assert opts.neighborhood == 3 and opts.scope is LdpScope.FULL and opts.block == 1


def test_cell_not_dividing_the_image_is_refused_with_the_valid_sizes():
    data = make_data()
    with pytest.raises(ValueError, match=r"b=3 does not tile the 8x8 .*valid b: 1, 2, 4, 8"):
        MECH.prepare(make_cell(pixel_block=3), data, CTX)
    with pytest.raises(ValueError, match=r"valid b: 1, 5, 25"):
        options_for_images(MECH.options_of(make_cell(pixel_block=2)), (1, 25, 25))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"ldp_scope": "test"}, "unknown ldp scope 'test'; choose one of: full, train"),
        ({"pixel_block": 0}, "pixel block b must be an integer >= 1, got 0"),
        ({"pixel_block": 2.0}, "pixel block b must be an integer >= 1, got 2.0"),
        ({"neighborhood": 65}, "neighborhood m=65 exceeds the 64 pixels"),
    ],
)
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        MECH.prepare(make_cell(**options), make_data(), CTX)


def test_time_series_records_are_refused():
    with pytest.raises(ValueError, match="needs image records"):
        options_for_images(MECH.options_of(make_cell()), (500, 12))


@pytest.mark.slow  # CI's quick sweep runs these mechanisms end to end (the CI budget)
def test_sweep_end_to_end_for_both_local_mechanisms(tmp_path):
    """A tiny real sweep on digits: ldp and vae-ldp rows with an epsilon, phi and notes."""
    from dataclasses import replace

    from audit.config import SweepConfig
    from audit.sweep.runner import run_sweep

    profile = replace(
        PROFILES[ProfileName.QUICK], epochs=2, max_train=40, attack_samples=4, classifier_epochs=2
    )
    for mech in ("ldp", "vae-ldp"):  # one --grid per private mechanism
        config = SweepConfig(
            dataset="digits",
            mechs=(mech,),
            profile_name=ProfileName.QUICK,
            profile=profile,
            seeds=(0,),
            out=tmp_path,
            grid=(100.0,),
            progress=False,
            attacks=("reconstruction",),  # the mechanism's rows, at the cheapest list of attacks
        )
        rows = run_sweep(config).rows
    private = rows[rows.mech.isin(["ldp", "vae-ldp"])]
    assert set(private.mech) == {"ldp", "vae-ldp"} and len(private) == 4  # 2 distances each
    assert private.epsilon.map(math.isfinite).all()
    assert (private.phi.notna() == private.utility_valid).all()  # phi only above chance
    assert (private.privacy_notes.str.len() > 0).all()
    ldp_row = private[private.mech == "ldp"].iloc[0]
    # digits: 8x8x1, default m = 8: 1 * 100 * 64 / 8 for any two records; 100 for m pixels
    assert ldp_row.epsilon == 800.0 and "ldp_scope=full" in ldp_row.privacy_notes
    assert "epsilon_m_neighbourhood=100.0" in ldp_row.privacy_notes
    assert "labels=not perturbed" in ldp_row.privacy_notes
    for notes in rows.privacy_notes:
        assert "released_outside_accounting=n_train (|D_train|), train_test_gap" in notes
        # "; " separates the notes: every part is one key=value
        assert all("=" in part for part in notes.split("; ")), notes
    vae_row = private[private.mech == "vae-ldp"].iloc[0]
    assert "perturbation_data=val" in vae_row.privacy_notes
    assert "epsilon_analytic" in vae_row.privacy_notes


def test_release_notes_name_the_latent_metrics_and_divergence_flag():
    """Issue 30, item 9: latent_hoyer, latent_mmd, latent_mmd_sparse encode D_train and
    train_diverged reads its losses; the note must name them."""
    from audit.rows.filling import release_notes

    note = release_notes({})["released_outside_accounting"]
    for column in ("latent_hoyer", "latent_mmd", "latent_mmd_sparse", "train_diverged"):
        assert column in note
