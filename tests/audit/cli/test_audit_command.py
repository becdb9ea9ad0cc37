"""``benchmark.py audit``: the bare bound last; bad input one line and status 2."""

from __future__ import annotations

import pytest

import benchmark


def test_vae_ldp_takes_the_documented_delta(capsys) -> None:
    argv = ["audit", "--dataset", "digits", "--mech", "vae-ldp", "--grid", "100"]
    code = benchmark.main([*argv, "--draws", "200", "--delta", "1e-5"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0 and out[0] == "delta = 1e-05 (--delta)"
    float(out[-1])


def test_help_shows_one_percent_sign(capsys) -> None:
    assert benchmark.main(["audit", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "95 % confidence" in out and "%%" not in out


def test_ldp_prints_both_claims_and_the_bare_bound_last(capsys) -> None:
    code = benchmark.main(
        ["audit", "--dataset", "digits", "--mech", "ldp", "--grid", "2", "--draws", "2000"]
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    bound = float(lines[-1])
    # digits: 1 x 8 x 8, m = 8: any-two claim 1 * 2 * 64 / 8 = 16, m-neighbourhood 2
    assert "any-two 16" in lines[0] and "m-neighbourhood 2" in lines[0]
    assert 0 < bound <= 16
    assert any("Clopper-Pearson" in line and "M = 2000" in line for line in lines)


def test_vae_ldp_bound_below_claim(capsys) -> None:
    code = benchmark.main(
        ["audit", "--dataset", "digits", "--mech", "vae-ldp", "--grid", "100", "--draws", "4000"]
    )
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    assert out[0].startswith("delta = ") and "1/|D|" in out[0]
    assert 0 <= float(out[-1]) < float(out[1].split("analytic-gaussian ")[1].split(",")[0])


@pytest.mark.slow
def test_cdp_gradient_canaries_end_to_end(capsys) -> None:
    argv = ["audit", "--dataset", "digits", "--mech", "cdp", "--grid", "2", "--canaries", "200"]
    code = benchmark.main([*argv, "--delta", "1e-5"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    assert "gradient canaries: lower bound" in out[1] and "ceiling" in out[1]
    assert float(out[-1]) >= 0


def test_dp2vae_audits_print_the_papers_value_and_whether_the_bound_refutes_it() -> None:
    from audit.cli.audit_command import _paper_claim_lines
    from audit.privacy.claim import PrivacyClaim

    claim = PrivacyClaim(
        epsilon=50.0,
        delta=1e-5,
        method="t",
        accountant="t",
        extra={"epsilon_paper_theorem_3_1": 1.5},
    )
    assert "does not exceed" in _paper_claim_lines(claim, 1.2)[0]
    assert "EXCEEDS it" in _paper_claim_lines(claim, 1.8)[0]
    assert _paper_claim_lines(PrivacyClaim(2.0, 1e-5, "t", "t"), 3.0) == []


@pytest.mark.slow
def test_dp2vae_gradient_canaries_end_to_end(capsys) -> None:
    argv = ["audit", "--dataset", "digits", "--mech", "dp2vae", "--grid", "8", "--canaries", "200"]
    code = benchmark.main([*argv, "--delta", "1e-5"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    assert out[0].startswith("dp2vae noise_multiplier=8: claimed epsilon")
    assert "the DP2-VAE paper's Theorem 3.1 value" in out[1]
    assert 0 <= float(out[-1]) < float(out[0].split("claimed epsilon ")[1].split()[0])
