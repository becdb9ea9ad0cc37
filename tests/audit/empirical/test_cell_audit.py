"""A sweep cell's audit (``--canary-audit``): which audit each mechanism gets, and the columns it
fills."""

from __future__ import annotations

import math

import pytest

from audit.config import CellConfig
from audit.empirical.cell_audit import CANARIES, INPUT_CANARIES, NOT_AUDITED, audit_cell
from audit.privacy.claim import PrivacyClaim
from audit.profiles import PROFILES, ProfileName
from audit.rows.row import COLUMNS

QUICK = PROFILES[ProfileName.QUICK]
OPTIONS = (("profile_name", "quick"),)


def _cell(mech: str, value: float | None, audit: bool = True) -> CellConfig:
    return CellConfig("digits", mech, "p", value, 0, QUICK, OPTIONS, audit=audit)


def _claim(delta: float) -> PrivacyClaim:
    return PrivacyClaim(epsilon=5.0, delta=delta, method="test", accountant="test")


def test_the_columns_are_fourteen_consecutive_row_columns():
    start = COLUMNS.index("epsilon_lower")
    assert tuple(NOT_AUDITED.columns()) == COLUMNS[start : start + 14]
    assert math.isnan(NOT_AUDITED.bound) and NOT_AUDITED.kind == ""


def test_cells_without_the_switch_and_the_baseline_are_not_audited():
    assert audit_cell(_cell("ldp", 1.0, audit=False), None, None, _claim(0)) is NOT_AUDITED
    assert audit_cell(_cell("none", None), None, None, _claim(0)) is NOT_AUDITED


@pytest.mark.parametrize(
    ("mech", "delta"), [("cdp", 1e-5), ("cdp-termwise", 1e-5), ("dp2vae", 1e-5), ("cdp", 0.02)]
)
def test_dp_training_gets_both_one_run_audits(mech, delta):
    """At every delta: at 1/N_train = 0.02 (quick; 2 m delta = 4) the former rule "2 m delta >=
    0.05 proves nothing" skipped both runs, though the f-DP bound can prove up to 4.30 there
    (m = 100, every guess right) and Steinke et al.'s is computed (0 or more)."""
    from dataclasses import replace

    from tests.audit.empirical.fixtures import CTX, tiny_cell, tiny_data, tiny_dp_cell

    cell = tiny_cell() if mech == "cdp" else tiny_dp_cell(mech, z=6.0)
    cell = replace(cell, options=OPTIONS, audit=True)
    got = audit_cell(cell, tiny_data(), CTX, _claim(delta))
    cols = got.columns()
    assert cols["epsilon_lower_kind"] == "one-run-gradient"
    assert (cols["epsilon_lower_m"], cols["epsilon_lower_input_m"]) == (
        CANARIES["quick"],
        INPUT_CANARIES["quick"],
    )
    assert 0 <= cols["epsilon_lower"] <= cols["epsilon_lower_ceiling"]
    assert 0 <= cols["epsilon_lower_input"] <= cols["epsilon_lower_input_ceiling"]
    for column in ("", "_fdp", "_input", "_input_fdp"):  # p-values of the claim, for the gate
        p, bound = cols[f"epsilon_lower{column}_p"], cols[f"epsilon_lower{column}"]
        assert 0 < p <= 1 and (p < 0.05) == (bound > 5.0)
    assert "gradient canaries" in got.note and "input canaries" in got.note


def test_vae_ldp_gets_the_corner_audit_below_its_claim():
    got = audit_cell(_cell("vae-ldp", 10.0), None, None, _claim(1e-3))
    assert got.kind == "local-worst-case" and got.m == 10**4
    assert 0 < got.bound <= got.ceiling and "vae-ldp" in got.note
    assert 0 < got.p_value <= 1 and (got.p_value < 0.05) == (got.bound > 5.0)  # claim 5.0
