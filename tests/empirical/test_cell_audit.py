"""A sweep cell's audit (``--audit``): which audit each mechanism gets, and the columns it fills."""

from __future__ import annotations

import math

from audit.config import PROFILES, CellConfig, MechanismName, ProfileName
from audit.empirical.cell_audit import CANARIES, NOT_AUDITED, audit_cell
from audit.privacy.claim import PrivacyClaim
from audit.rows import COLUMNS

QUICK = PROFILES[ProfileName.QUICK]
OPTIONS = (("profile_name", "quick"),)


def _cell(mech: MechanismName, value: float | None, audit: bool = True) -> CellConfig:
    return CellConfig("digits", mech, "p", value, 0, QUICK, OPTIONS, audit=audit)


def _claim(delta: float) -> PrivacyClaim:
    return PrivacyClaim(epsilon=5.0, delta=delta, method="test", accountant="test")


def test_the_columns_are_the_rows_last_four():
    assert tuple(NOT_AUDITED.columns()) == COLUMNS[-4:]
    assert math.isnan(NOT_AUDITED.bound) and NOT_AUDITED.kind == ""


def test_cells_without_the_switch_and_the_baseline_are_not_audited():
    assert (
        audit_cell(_cell(MechanismName.LDP, 1.0, audit=False), None, None, _claim(0)) is NOT_AUDITED
    )
    assert audit_cell(_cell(MechanismName.NONE, None), None, None, _claim(0)) is NOT_AUDITED


def test_cdp_termwise_says_it_is_not_audited():
    got = audit_cell(_cell(MechanismName.CDP_TERMWISE, 1.0), None, None, _claim(1e-5))
    assert got.kind == "not-audited" and math.isnan(got.bound) and "cdp-termwise" in got.note


def test_cdp_skips_the_extra_run_where_no_bound_is_provable():
    """At delta = 1/N_train = 0.02 (quick), 2 m delta = 4 >= 0.05: Steinke et al.'s bound is 0
    whatever the outcome, so no training run is spent (data None would fail if one ran)."""
    got = audit_cell(_cell(MechanismName.CDP, 1.0), None, None, _claim(0.02))
    assert (got.bound, got.ceiling, got.m, got.kind) == (
        0.0,
        0.0,
        CANARIES["quick"],
        "one-run-gradient",
    )
    assert "not run" in got.note and "--delta" in got.note


def test_vae_ldp_gets_the_corner_audit_below_its_claim():
    got = audit_cell(_cell(MechanismName.VAE_LDP, 10.0), None, None, _claim(1e-3))
    assert got.kind == "local-worst-case" and got.m == 10**4
    assert 0 < got.bound <= got.ceiling and "vae-ldp" in got.note
