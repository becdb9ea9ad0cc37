"""Which attacks a sweep's cells run: the sweep's list, --attack validation, and what each
mechanism's release allows (a fake decoder-only mechanism stands in for dp2vae)."""

from __future__ import annotations

from pathlib import Path

import pytest

import benchmark
from attacks import registry
from attacks.likelihood import LikelihoodAttack
from attacks.registry import available_attacks, get_attack, sweep_attacks
from attacks.threat import Capability, ReleaseKind
from audit import mechanisms
from audit.attack_plan import CELL_DEFAULT_ATTACKS, check_requested, plan_attacks
from audit.config import SweepConfig
from audit.mechanisms.ldp import LocalDP
from audit.profiles import PROFILES, ProfileName
from audit.sweep.plan import build_cells

WHOLE = ReleaseKind.WHOLE_VAE


class DecoderOnlyLdp(LocalDP):
    """ldp as if it published the decoder alone (as dp2vae will)."""

    release = ReleaseKind.DECODER_ONLY


@pytest.fixture
def decoder_only_ldp(monkeypatch):
    monkeypatch.setitem(mechanisms._REGISTRY, "ldp", DecoderOnlyLdp())


def _sweep(tmp_path: Path, mechs=("cdp",), attacks=None) -> SweepConfig:
    return SweepConfig(
        dataset="digits",
        mechs=tuple(m for m in mechs),
        profile_name=ProfileName.QUICK,
        profile=PROFILES[ProfileName.QUICK],
        seeds=(0,),
        out=tmp_path,
        grid=(1.0,),
        attacks=attacks,
    )


ALL = ("reconstruction", "monte-carlo", "latent-search", "likelihood", "domias")


def test_every_registered_attack_can_run_and_the_default_is_every_attack_the_release_allows():
    assert sweep_attacks() == ALL and set(ALL) == set(available_attacks())
    assert CELL_DEFAULT_ATTACKS == ("reconstruction",)  # what a stored config naming none ran
    assert plan_attacks(None, {"none": WHOLE, "cdp": WHOLE}) == {"none": ALL, "cdp": ALL}
    assert plan_attacks(ALL, {"none": WHOLE, "cdp": WHOLE}) == {"none": ALL, "cdp": ALL}


def test_a_default_sweep_plans_every_attack_each_release_allows_and_attack_restricts(tmp_path):
    mechs = ("cdp", "dp2vae")
    default = build_cells(_sweep(tmp_path, mechs=mechs), data_sha256="a" * 64)
    by_mech = {cell.mech: cell.attacks for cell, _ in default}
    assert by_mech == {
        "none": ALL,
        "cdp": ALL,
        "dp2vae": ("monte-carlo", "latent-search", "domias"),  # decoder only: no encoder attack
    }
    assert all(cell.reference_models == 2 for cell, _ in default)  # they calibrate: R = 2
    only = build_cells(_sweep(tmp_path, attacks=("domias", "reconstruction")), data_sha256="a" * 64)
    assert {cell.attacks for cell, _ in only} == {("reconstruction", "domias")}
    assert all(cell.reference_models == 0 for cell, _ in only)  # no attack of them calibrates


def test_each_release_runs_what_it_allows_with_reference_records_and_no_reference_models():
    plan = plan_attacks(
        None,
        {"none": WHOLE, "dp": ReleaseKind.DECODER_ONLY, "syn": ReleaseKind.SAMPLES_ONLY},
    )
    assert plan["dp"] == ("monte-carlo", "latent-search", "domias")  # no encoder attacks
    assert plan["syn"] == ("monte-carlo", "domias")  # domias: D_gen + reference records


def test_an_attack_needing_reference_models_is_planned_nowhere(monkeypatch):
    class Calibrated(LikelihoodAttack):
        name = "calibrated"
        needs = LikelihoodAttack.needs | {Capability.REFERENCE_MODELS}

    only = {"reconstruction": get_attack("reconstruction"), "calibrated": Calibrated}
    monkeypatch.setattr(registry, "_ATTACKS", only)
    assert plan_attacks(None, {"none": WHOLE}) == {"none": ("reconstruction",)}


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (("gan-leaks",), "'gan-leaks' is not a registered attack; allowed: reconstruction, mon"),
        (("reconstruction", "reconstruction"), "--attack names repeat"),
        ((), "--attack needs at least one attack name; allowed: reconstruction, monte-carlo"),
    ],
)
def test_requested_attacks_must_be_registered_and_in_the_sweeps_list(names, message):
    with pytest.raises(ValueError, match=message):
        check_requested(names)


def test_a_decoder_only_release_gets_no_reconstruction_attack(monkeypatch):
    with pytest.raises(ValueError, match="--attack 'reconstruction' does not apply to --mech dp"):
        plan_attacks(["reconstruction"], {"none": WHOLE, "dp": ReleaseKind.DECODER_ONLY})
    monkeypatch.setattr(registry, "_ATTACKS", {"reconstruction": get_attack("reconstruction")})
    with pytest.raises(ValueError, match="no attack of the sweep's list .* applies to --mech dp"):
        plan_attacks(None, {"none": WHOLE, "dp": ReleaseKind.DECODER_ONLY})


def test_cells_carry_their_attacks_in_their_hash(tmp_path):
    default = build_cells(_sweep(tmp_path), data_sha256="a" * 64)
    named = build_cells(_sweep(tmp_path, attacks=("reconstruction",)), data_sha256="a" * 64)
    every = build_cells(_sweep(tmp_path, attacks=ALL), data_sha256="a" * 64)
    assert all(cell.attacks == ("reconstruction",) for cell, _ in named)
    assert all("attacks" not in cell.canonical() for cell, _ in named)  # the config default
    assert all(cell.canonical()["attacks"] == list(ALL) for cell, _ in default + every)
    assert [c.config_hash for c, _ in every] == [c.config_hash for c, _ in default]
    assert not {c.config_hash for c, _ in every} & {c.config_hash for c, _ in named}


def test_attack_on_the_command_line_is_validated_before_any_work(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--dataset", "digits", "--profile", "quick", "--out", str(out), "--no-progress"]
    assert benchmark.main([*argv, "--attack", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --attack 'nope' is not a registered attack")
    assert "allowed: reconstruction, monte-carlo" in err and "\n" not in err
    assert not out.exists()


def test_attack_refused_for_a_mechanism_whose_release_lacks_its_needs(
    tmp_path, capsys, decoder_only_ldp
):
    out = tmp_path / "out"
    argv = ["--dataset", "digits", "--profile", "quick", "--out", str(out), "--no-progress"]
    code = benchmark.main([*argv, "--mech", "ldp", "--attack", "reconstruction"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err == (
        "error: --attack 'reconstruction' does not apply to --mech ldp, which releases "
        "decoder-only (reconstruction needs decoder, encoder); allowed for ldp: monte-carlo, "
        "latent-search, domias"
    )
    assert not out.exists()
    cells = build_cells(_sweep(tmp_path, mechs=("ldp",)), data_sha256="a" * 64)
    assert {cell.attacks for cell, _ in cells if cell.mech == "ldp"} == {
        ("monte-carlo", "latent-search", "domias")
    }
