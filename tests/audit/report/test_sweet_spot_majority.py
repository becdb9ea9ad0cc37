"""A sweet spot whose accuracy is at or below D_test's majority rate is marked as carrying no
utility (LFW20's main command: DP-Adam settings at chance on the attack axis whose classifiers on
D_gen score the majority rate, 0.278, or less)."""

from __future__ import annotations

import pandas as pd

from audit.report.markdown import sweet_spot_table


def _spot(acc: float, majority: float | None) -> dict:
    row = {
        "limit": 0.6, "mech": "cdp", "param_label": "z=2", "qualifies": True,
        "epsilon": 5.8, "epsilon_hw": 0.0, "epsilon_n": 3,
        "attack_power": 0.55, "attack_power_hw": 0.1, "attack_power_n": 3,
        "acc": acc, "acc_hw": 0.0, "acc_n": 3,
    }  # fmt: skip
    if majority is not None:
        row["acc_majority"] = majority
    return row


def test_a_sweet_spot_at_or_below_the_majority_rate_is_marked():
    table = sweet_spot_table(pd.DataFrame([_spot(0.278, 0.278), _spot(0.62, 0.278)]))
    at, above = [line for line in table.splitlines() if line.startswith("| 0.6 |")]
    assert "not above the majority rate 0.278: no utility" in at
    assert "majority" not in above


def test_rows_without_a_majority_rate_are_not_marked():
    table = sweet_spot_table(pd.DataFrame([_spot(0.1, None)]))
    assert "majority" not in table
