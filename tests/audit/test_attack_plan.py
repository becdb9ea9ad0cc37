"""Which attacks a sweep's cells run: the sweep's list, --attack validation, and what each
mechanism's release allows (a fake decoder-only mechanism stands in for dp2vae)."""

from __future__ import annotations

from pathlib import Path

import pytest

import benchmark
from attacks.threat import ReleaseKind
from audit import mechanisms
from audit.attack_plan import LEGACY_ATTACKS, SWEEP_ATTACKS, check_requested, plan_attacks
from audit.config import PROFILES, MechanismName, ProfileName, SweepConfig
from audit.mechanisms.ldp import LocalDP
from audit.sweep import build_cells

WHOLE = ReleaseKind.WHOLE_VAE


class DecoderOnlyLdp(LocalDP):
    """ldp as if it published the decoder alone (as dp2vae will)."""

    release = ReleaseKind.DECODER_ONLY


@pytest.fixture
def decoder_only_ldp(monkeypatch):
    monkeypatch.setitem(mechanisms._REGISTRY, MechanismName.LDP, DecoderOnlyLdp())


def _sweep(tmp_path: Path, mechs=("cdp",), attacks=None) -> SweepConfig:
    return SweepConfig(
        dataset="digits",
        mechs=tuple(MechanismName(m) for m in mechs),
        profile_name=ProfileName.QUICK,
        profile=PROFILES[ProfileName.QUICK],
        seeds=(0,),
        out=tmp_path,
        grid=(1.0,),
        attacks=attacks,
    )


def test_the_sweep_runs_todays_reconstruction_attack_only():
    assert SWEEP_ATTACKS == ("reconstruction",) == LEGACY_ATTACKS
    assert plan_attacks(None, {"none": WHOLE, "cdp": WHOLE}) == {
        "none": ("reconstruction",),
        "cdp": ("reconstruction",),
    }


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (("gan-leaks",), "'gan-leaks' is not a registered attack; allowed: reconstruction"),
        (("monte-carlo",), "'monte-carlo' is registered but not in the sweep's attack list"),
        (("reconstruction", "reconstruction"), "--attack names repeat"),
        ((), "--attack needs at least one attack name; allowed: reconstruction"),
    ],
)
def test_requested_attacks_must_be_registered_and_in_the_sweeps_list(names, message):
    with pytest.raises(ValueError, match=message):
        check_requested(names)


def test_a_decoder_only_release_gets_no_reconstruction_attack():
    with pytest.raises(ValueError, match="--attack 'reconstruction' does not apply to --mech dp"):
        plan_attacks(["reconstruction"], {"none": WHOLE, "dp": ReleaseKind.DECODER_ONLY})
    with pytest.raises(ValueError, match="no attack of the sweep's list .* applies to --mech dp"):
        plan_attacks(None, {"none": WHOLE, "dp": ReleaseKind.DECODER_ONLY})


def test_cells_carry_their_attacks_and_the_default_list_leaves_hashes_alone(tmp_path):
    default = build_cells(_sweep(tmp_path), data_sha256="a" * 64)
    named = build_cells(_sweep(tmp_path, attacks=("reconstruction",)), data_sha256="a" * 64)
    assert all(cell.attacks == ("reconstruction",) for cell, _ in default)
    assert [c.config_hash for c, _ in default] == [c.config_hash for c, _ in named]
    assert all("attacks" not in cell.canonical() for cell, _ in default)


def test_attack_on_the_command_line_is_validated_before_any_work(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--dataset", "digits", "--profile", "quick", "--out", str(out), "--no-progress"]
    assert benchmark.main([*argv, "--attack", "likelihood"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --attack 'likelihood' is registered but not in the sweep's")
    assert "allowed: reconstruction" in err and "\n" not in err
    assert benchmark.main([*argv, "--attack", "nope"]) == 2
    assert "--attack 'nope' is not a registered attack" in capsys.readouterr().err
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
        "decoder-only (reconstruction needs decoder, encoder); allowed for ldp: none of "
        "reconstruction"
    )
    assert not out.exists()
    with pytest.raises(ValueError, match="no attack of the sweep's list"):
        build_cells(_sweep(tmp_path, mechs=("ldp",)))  # nothing left for ldp's cells to run
