"""The paper profile's cells take the trade-off paper's recipe (``audit.paper_recipe``,
``audit.sweep.paper_cells``): learning rate and batch size per z on LFW20 and LFW50, the median
clip norm and microbatches of 4 for cdp, each knob left as given on the command line; quick and
standard cells are untouched. The table's batch sizes are checked against the epsilons the paper
prints beside them."""

from __future__ import annotations

import json

import pytest

from audit.cli.run_command import build_run_parser, config_from_args
from audit.mechanisms import cell_from_canonical
from audit.mechanisms.dp_adam_options import ClipNormRule
from audit.paper_recipe import PAPER_VAE_TABLE, paper_vae_recipe
from audit.privacy.dp_sgd_accounting import dp_sgd_epsilon
from audit.profiles import PROFILES, ProfileName
from audit.results import manifest_of
from audit.sweep.plan import build_cells, check_sweep

#: The trade-off paper's Table 2: (N_train, delta) and the printed epsilon per z.
PRINTED = {
    "lfw20": (
        (926, 1.08e-3),
        {0.001: 15948925900.96, 0.01: 321853746.70, 0.1: 372950.22, 0.5: 295.07, 1.0: 56.41},
    ),
    "lfw50": (
        (1375, 7.27e-4),
        {0.001: 47295786259.73, 0.01: 468786259.73, 0.1: 681781.38, 0.5: 353.74, 1.0: 43.31},
    ),
}


def cells(*argv: str):
    argv = ["--out", "x", "--precision", "float32", "--device", "cpu", *argv]
    config = config_from_args(build_run_parser().parse_args(argv))
    return config, build_cells(config)


def by_z(pairs) -> dict[float | None, object]:
    out = {}
    for cell, base in pairs:
        out[cell.param_value] = cell
        out[None] = base
    return out


@pytest.mark.parametrize("dataset", ["lfw20", "lfw50"])
def test_the_table_batch_sizes_give_the_epsilons_the_paper_prints(dataset):
    """Classic conversion, 1000 epochs: every printed epsilon within 2.1 % (the rounding of the
    paper's accountant against ours); the merged cells read the other way miss by far more."""
    (n, delta), printed = PRINTED[dataset]
    for z, eps in printed.items():
        batch = PAPER_VAE_TABLE[dataset][z].batch_size
        ours = dp_sgd_epsilon(
            n_train=n,
            batch_size=batch,
            epochs=1000,
            noise_multiplier=z,
            delta=delta,
            conversion="classic",
        )
        assert abs(ours / eps - 1) < 0.021, (dataset, z, ours, eps)
        other = 48 - batch if batch in (16, 32) else 32  # 16 <-> 32; 64 -> 32
        wrong = dp_sgd_epsilon(
            n_train=n,
            batch_size=other,
            epochs=1000,
            noise_multiplier=z,
            delta=delta,
            conversion="classic",
        )
        assert abs(wrong / eps - 1) > 0.2, (dataset, z, other)


def test_a_z_off_the_table_takes_the_nearest_on_a_log_scale():
    assert paper_vae_recipe("lfw20", 4.0)[0] == PAPER_VAE_TABLE["lfw20"][1.0]
    assert paper_vae_recipe("lfw20", 0.05)[0] == PAPER_VAE_TABLE["lfw20"][0.1]
    assert paper_vae_recipe("lfw20", 0.3)[0] == PAPER_VAE_TABLE["lfw20"][0.5]
    assert "nearest" in paper_vae_recipe("lfw50", 2.0)[1]
    assert paper_vae_recipe("digits", 1.0) is None
    with pytest.raises(ValueError, match="got -1"):
        paper_vae_recipe("lfw20", -1.0)


@pytest.mark.parametrize("dataset", ["lfw20", "lfw50"])
def test_paper_cells_take_the_table_per_setting(dataset):
    config, pairs = cells("--dataset", dataset, "--profile", "paper", "--mech", "cdp")
    got = by_z(pairs)
    table = PAPER_VAE_TABLE[dataset]
    for z, recipe in table.items():
        assert (got[z].profile.lr, got[z].profile.batch_size) == (recipe.lr, recipe.batch_size)
    for z in (2.0, 4.0):
        assert got[z].profile.lr == table[1.0].lr
    cdp = got[0.1]
    assert cdp.profile.epochs == 1000 and cdp.profile.max_train is None
    assert cdp.mech_options.clip_norm is ClipNormRule.MEDIAN and cdp.mech_options.microbatch == 4
    assert cdp.canonical()["options"]["microbatch"] == 4
    assert cdp.canonical()["profile"]["per_setting"] == ("lr", "batch_size")
    assert cell_from_canonical(json.loads(json.dumps(cdp.canonical()))) == cdp  # read back
    body = manifest_of([c.canonical() for c, _ in pairs])  # one run configuration
    assert "lr" not in body["settings"] and body["settings"]["per_setting"] == ["lr", "batch_size"]


def test_command_line_knobs_are_kept():
    _, pairs = cells(
        "--dataset", "lfw20", "--profile", "paper", "--mech", "cdp", "--grid", "0.1",
        "--lr", "1e-3", "--microbatch", "1", "--clip-norm", "0.5",
    )  # fmt: skip
    got = by_z(pairs)
    assert got[0.1].profile.lr == 1e-3 and got[None].profile.lr == 1e-3
    assert got[0.1].profile.batch_size == 64 and got[None].profile.batch_size == 16
    assert got[0.1].profile.per_setting == ("batch_size",)
    assert got[0.1].mech_options.microbatch == 1 and got[0.1].mech_options.clip_norm == 0.5
    assert "microbatch" not in got[0.1].canonical()["options"]


def test_other_mechanisms_and_target_epsilon_keep_the_profiles_values():
    paper = PROFILES[ProfileName.PAPER]
    _, pairs = cells("--dataset", "lfw20", "--profile", "paper", "--mech", "cdp-termwise", "ldp")
    private = [cell for cell, base in pairs if cell is not base]
    assert {cell.mech for cell in private} == {"cdp-termwise", "ldp"}
    for cell in private:
        assert (cell.profile.lr, cell.profile.batch_size) == (paper.lr, paper.batch_size)
        assert cell.mech_options is None
    _, calibrated = cells(
        "--dataset", "lfw20", "--profile", "paper", "--mech", "cdp", "--target-epsilon", "8"
    )
    cell = calibrated[-1][0]
    assert (cell.profile.lr, cell.profile.batch_size) == (paper.lr, paper.batch_size)


def test_other_datasets_take_the_cdp_settings_only():
    _, pairs = cells("--dataset", "digits", "--profile", "paper", "--mech", "cdp", "--grid", "1")
    cell, base = pairs[-1]
    assert cell.profile == base.profile == PROFILES[ProfileName.PAPER]
    assert cell.mech_options.microbatch == 4


@pytest.mark.parametrize("profile", ["quick", "standard"])
def test_quick_and_standard_cells_are_untouched(profile):
    config, pairs = cells("--dataset", "lfw20", "--profile", profile, "--mech", "cdp")
    for cell, base in pairs:
        assert cell.profile == base.profile == config.profile
        assert cell.mech_options is None and not config.profile.per_setting


def test_canary_audit_with_the_median_heuristic_is_refused_before_any_cell():
    config, _ = cells("--dataset", "lfw20", "--profile", "paper", "--mech", "cdp", "--canary-audit")
    with pytest.raises(ValueError, match="--canary-audit needs a fixed --clip-norm for --mech cdp"):
        check_sweep(config)
    config, _ = cells(
        "--dataset", "lfw20", "--profile", "paper", "--mech", "cdp", "--canary-audit",
        "--clip-norm", "1",
    )  # fmt: skip
    check_sweep(config)
