"""The gate on a run: honest runs exit 0, violations exit 1 with a table, bad input exits 2."""

from __future__ import annotations

import copy
import json
import math

import pandas as pd
import pytest

from audit import results
from benchmark import main
from tests.audit.fakes import cell_config, write_cell

from .runs import THRESHOLDS, entry, run_check, runs, write_runs


def test_honest_runs_pass(tmp_path, capsys):
    assert run_check(tmp_path, runs()) == 0
    assert capsys.readouterr().out.splitlines()[0] == "OK: 12 rows checked against 3 thresholds"


def _doctor(frame: pd.DataFrame, mech: str, column: str, value: float) -> pd.DataFrame:
    frame = frame.copy()
    frame.loc[(frame.mech == mech) & (frame.seed == 1) & (frame.distance == "ssim"), column] = value
    return frame


@pytest.mark.parametrize(
    ("mech", "column", "value", "metric", "limit"),
    [
        ("cdp", "mi_ap", 0.61, "max_mi_ap", "0.5800"),  # private attack above its limit + tol
        ("none", "mi_ap", 0.55, "min_mi_ap", "0.5800"),  # baseline attack broke: below its floor
        ("ldp", "acc", 0.5, "min_acc", "0.5300"),  # accuracy below its minimum - tol
        ("cdp", "mi_ap", math.nan, "max_mi_ap", "0.5800"),  # a NaN observation fails too
    ],
)
def test_doctored_runs_fail_with_a_violation_table(
    tmp_path, capsys, mech, column, value, metric, limit
):
    assert run_check(tmp_path, _doctor(runs(), mech, column, value)) == 1
    out = capsys.readouterr().out
    header, line = out.splitlines()[:2]
    assert header.split() == [
        "dataset",
        "mech",
        "param",
        "seed",
        "attack",
        "distance",
        "metric",
        "observed",
        "limit",
        "tolerance",
    ]
    cells = line.split()
    assert cells[:7] == ["lfw-subset", mech, cells[2], "1", "reconstruction", "ssim", metric]
    assert cells[8:] == [limit, "0.0200"]
    assert "FAILED: 1 violation(s)" in out


def test_values_within_the_tolerance_pass(tmp_path):
    assert run_check(tmp_path, _doctor(runs(), "cdp", "mi_ap", 0.599)) == 0
    assert run_check(tmp_path, _doctor(runs(), "none", "mi_ap", 0.561)) == 0


def test_rows_without_an_entry_are_unchecked_not_failed(tmp_path, capsys):
    frame = pd.concat([runs(), runs([("vae-ldp", "sigma", 10.0, 0.9, 0.9, 0.1)])])
    assert run_check(tmp_path, frame) == 0
    out = capsys.readouterr().out
    assert "OK: 12 rows checked against 3 thresholds" in out
    assert "unchecked: 4 row(s) match no threshold entry" in out


def test_specific_entries_tighten_general_ones(tmp_path):
    doc = copy.deepcopy(THRESHOLDS)
    doc["entries"].append(
        entry(
            mech="ldp",
            param_value=100.0,
            distance="ssim",
            max_mi_ap=0.5,
            min_acc=None,
            tolerance=0.0,
        )
    )
    assert run_check(tmp_path, runs(), doc) == 1


def test_a_file_that_matches_no_row_is_an_error(tmp_path, capsys):
    doc = {"schema_version": 1, "entries": [entry(dataset="digits")]}
    assert run_check(tmp_path, runs(), doc) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no entry of the thresholds matches any of the 12 rows")


@pytest.mark.parametrize("with_chance", [True, False])
def test_the_gate_refuses_an_accuracy_floor_at_or_below_chance(tmp_path, capsys, with_chance):
    low = entry(mech="cdp", param_value=1.0, max_mi_ap=0.58, min_acc=0.3)
    if with_chance:
        low["chance_acc"] = 0.5  # refused when the file is read
    doc = {**THRESHOLDS, "entries": [*THRESHOLDS["entries"][:1], low]}
    assert run_check(tmp_path, runs(), doc) == 2  # without: refused against the rows' acc_base
    err = capsys.readouterr().err.strip()
    assert "at or below chance accuracy 0.5" in err and "\n" not in err


def test_unreadable_files_are_errors(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json")
    run_dir = write_runs(tmp_path / "run", runs())
    assert main(["check", "--thresholds", str(tmp_path / "bad.json"), str(run_dir)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["check", "--thresholds", str(tmp_path / "none.json"), str(run_dir)]) == 2
    assert main(["check", "--thresholds", str(tmp_path / "bad.json")]) == 2
    assert main(["check", str(run_dir)]) == 2  # neither --thresholds nor --calibrate


def _with_other_attack(frame: pd.DataFrame, mi_ap: float) -> pd.DataFrame:
    """``frame``'s rows as the reconstruction attack's, plus the same rows as monte-carlo's."""
    other = frame.assign(attack="monte-carlo", distance="pixel-l2", mi_ap=mi_ap)
    return pd.concat([frame.assign(attack="reconstruction"), other], ignore_index=True)


def test_thresholds_are_keyed_by_attack(tmp_path, capsys):
    """An entry without ``attack`` (the committed file's) limits reconstruction rows only."""
    frame = _with_other_attack(runs(), mi_ap=0.99)  # monte-carlo far above every limit
    assert run_check(tmp_path, frame) == 0
    out = capsys.readouterr().out
    assert "OK: 12 rows checked" in out and "unchecked: 12 row(s)" in out
    assert "seed 0 monte-carlo pixel-l2" in out
    doc = copy.deepcopy(THRESHOLDS)
    doc["entries"].append(entry(mech="cdp", attack="monte-carlo", max_mi_ap=0.9, min_acc=None))
    assert run_check(tmp_path, frame, doc) == 1
    violations = [line.split() for line in capsys.readouterr().out.splitlines()[1:5]]
    assert [v[4:7] for v in violations] == [["monte-carlo", "pixel-l2", "max_mi_ap"]] * 4


def test_an_entry_for_an_attack_the_cells_did_not_run_is_not_expected(tmp_path, capsys):
    for mech, value in (("none", None), ("cdp", 1.0)):
        write_cell(tmp_path / "run", cell_config(mech, value), mi_ap=0.55, acc=0.8)
    results.claim_run(tmp_path / "run", [cell_config("none", None), cell_config("cdp", 1.0)])
    doc = {
        "schema_version": 1,
        "entries": [
            entry(dataset="digits", mech="cdp", max_mi_ap=0.6, min_acc=None),
            entry(dataset="digits", mech="cdp", attack="monte-carlo", max_mi_ap=0.6),
        ],
    }
    thresholds = tmp_path / "t.json"
    thresholds.write_text(json.dumps(doc))
    assert main(["check", "--thresholds", str(thresholds), str(tmp_path / "run")]) == 0
    assert "note: threshold entries [1] match no row" in capsys.readouterr().out


def _with_bounds(frame: pd.DataFrame, ldp_bound: float) -> pd.DataFrame:
    """Claims and lower bounds: ldp's claim 3.0 with bound ``ldp_bound``, cdp's 2.0 with 0.5,
    none unaudited (NaN), as ``--canary-audit`` writes them."""
    frame = frame.copy()
    frame["epsilon"] = frame.mech.map({"none": math.inf, "cdp": 2.0, "ldp": 3.0})
    frame["epsilon_lower"] = frame.mech.map({"none": math.nan, "cdp": 0.5, "ldp": ldp_bound})
    return frame


@pytest.mark.parametrize("bound", [2.9, 3.0])
def test_lower_bounds_at_or_below_their_claims_pass(tmp_path, bound):
    assert run_check(tmp_path, _with_bounds(runs(), bound)) == 0


def test_a_lower_bound_above_its_claim_fails_whatever_the_thresholds(tmp_path, capsys):
    frame = _with_bounds(runs(), 2.9)
    frame.loc[
        (frame.mech == "ldp") & (frame.seed == 1) & (frame.distance == "mse"), "epsilon_lower"
    ] = 3.5
    # no threshold entry names ldp: the bound is checked all the same
    doc = copy.deepcopy(THRESHOLDS)
    doc["entries"] = [e for e in doc["entries"] if e["mech"] != "ldp"]
    assert run_check(tmp_path, frame, doc) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "epsilon_lower>epsilon" in x).split()
    assert line[:7] == ["lfw-subset", "ldp", "εᵢ=100", "1", "reconstruction", "mse", line[6]]
    assert line[7:9] == ["3.5000", "3.0000"]
    assert "FAILED: 1 violation(s)" in out


def test_an_input_canary_bound_above_its_claim_fails(tmp_path, capsys):
    frame = _with_bounds(runs(), 2.9)
    frame["epsilon_lower_input"] = frame.mech.map({"none": math.nan, "cdp": 1.5, "ldp": math.nan})
    assert run_check(tmp_path, frame) == 0  # 1.5 below cdp's claim 2.0
    frame.loc[(frame.mech == "cdp") & (frame.seed == 0), "epsilon_lower_input"] = 2.5
    assert run_check(tmp_path, frame) == 1
    out = capsys.readouterr().out
    assert "epsilon_lower_input>epsilon" in out
    assert "epsilon_lower>epsilon" not in out


def test_a_row_whose_training_diverged_fails_whatever_the_thresholds(tmp_path, capsys):
    frame = runs()
    frame["train_diverged"] = False
    assert run_check(tmp_path / "ok", frame) == 0
    frame.loc[(frame.mech == "none") & (frame.seed == 1), "train_diverged"] = True
    assert run_check(tmp_path / "bad", frame) == 1
    out = capsys.readouterr().out
    assert out.count("train_diverged") == 2  # the baseline's two rows (mse, ssim) of seed 1


def test_the_gate_refuses_an_accuracy_floor_at_or_below_the_rows_majority_rate(tmp_path, capsys):
    floor = entry(mech="cdp", param_value=1.0, max_mi_ap=0.58, min_acc=0.56)
    doc = {**THRESHOLDS, "entries": [*THRESHOLDS["entries"][:1], floor]}
    assert run_check(tmp_path / "a", runs(), doc) == 0  # 0.56 - tolerance clears 1/2
    capsys.readouterr()
    assert run_check(tmp_path / "b", runs().assign(acc_majority=0.6), doc) == 2
    err = capsys.readouterr().err.strip()
    assert "at or below chance accuracy 0.6" in err and "\n" not in err


def test_a_worst_case_entry_limits_each_cells_held_out_worst_case(tmp_path, capsys):
    """An entry with attack 'worst-case' reads each cell's worst_mi_ap (one row per cell), not
    its attacks' rows: the same rows pass under a ceiling above their worst case and fail under
    one below it, whatever each attack's own MI AP."""
    frame = runs()  # one worst case per cell, as cells write it: here its best attack's + 0.03
    frame["worst_mi_ap"] = frame.groupby("config_hash")["mi_ap"].transform("max") + 0.03
    for ceiling, status in ((0.62, 0), (0.5, 1)):
        worst = entry(
            mech="cdp", param_value=1.0, attack="worst-case", distance="held-out",
            max_mi_ap=ceiling, min_acc=None,
        )  # fmt: skip
        doc = {**THRESHOLDS, "entries": [*THRESHOLDS["entries"], worst]}
        assert run_check(tmp_path / str(ceiling), frame, doc) == status
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "MISSING" not in text  # the entry found its rows: a violation, not an absence
    violation = next(line for line in text.splitlines() if "worst-case" in line and "0.58" in line)
    assert "held-out" in violation  # cdp z=1's worst case (0.55 + 0.03) broke the ceiling


def test_a_worst_case_entry_is_expected_of_every_planned_cell():
    from audit.check.thresholds import Threshold

    t = Threshold(
        dataset="lfw-subset", mech="cdp", param_value=1.0, distance="held-out", tolerance=0.02,
        margin_source="test", max_mi_ap=0.6, attack="worst-case",
    )  # fmt: skip
    cell = {"dataset": "lfw-subset", "mech": "cdp", "param_value": 1.0, "attacks": ["domias"]}
    assert t.expects(cell)  # whatever attacks the cell ran


def test_an_attack_whose_own_scores_prove_more_than_the_claim_fails(tmp_path, capsys):
    """The planted row: a near-perfect attack on 1000 independently drawn D_atk records proves
    epsilon > 2.5 at delta 1e-6 (audit.empirical.attack_bound); a cdp claim of 2.0 is false."""
    import numpy as np

    from audit.empirical.attack_bound import attack_epsilon_bound

    is_member = np.random.default_rng(0).random(1000) < 0.5
    scores = is_member + np.random.default_rng(1).normal(0, 0.01, 1000)
    planted = attack_epsilon_bound(scores, is_member, delta=1e-6, seed=0, independent=True)
    frame = _with_bounds(runs(), 2.9)
    frame["epsilon_lower_attack"] = math.nan
    assert run_check(tmp_path / "ok", frame) == 0
    frame.loc[(frame.mech == "cdp") & (frame.seed == 0), "epsilon_lower_attack"] = planted.epsilon
    assert run_check(tmp_path / "bad", frame) == 1
    out = capsys.readouterr().out
    assert "epsilon_lower_attack>epsilon" in out and f"{planted.epsilon:.4f}" in out


def test_holm_rejects_step_down_and_more_than_bonferroni():
    from audit.check.checking import holm_rejected

    # Bonferroni (0.05 / 4 = 0.0125) rejects only 0.001; Holm goes on: 0.013 < 0.05 / 3,
    # 0.02 < 0.05 / 2, and stops at 0.5
    assert holm_rejected([0.013, 0.5, 0.001, 0.02]) == [True, False, True, True]
    assert holm_rejected([0.04]) == [True]  # one check: the plain test at 5 %
    assert holm_rejected([0.04, 0.04]) == [False, False]
    assert holm_rejected([]) == []


@pytest.mark.statistical
def test_holm_keeps_the_family_wise_false_failure_rate_at_5_percent():
    """10 true claims per run (p-values uniform, independent), 4000 seeded runs: failing any of
    them uncorrected happens in 1 - 0.95^10 = 40 % of runs; with Holm at most 5 %. Tolerance:
    4 standard deviations of a Binomial(4000, 0.05) share, 0.0138."""
    import numpy as np

    from audit.check.checking import holm_rejected

    p = np.random.default_rng(40).random((4000, 10))
    corrected = np.mean([any(holm_rejected(list(row))) for row in p])
    uncorrected = np.mean((p < 0.05).any(axis=1))
    assert corrected <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / 4000)
    assert uncorrected > 0.35  # what the gate did before


def _attack_bounds(frame: pd.DataFrame, *, p_values: bool) -> pd.DataFrame:
    """Every private row claims 0.95 and its attack's scores prove 1.012 at 95 % (50 of r = 60
    right on m = 200 records, delta 1e-5): each bound is above its claim, p 0.035 at it."""
    from audit.empirical.bounds import one_run_epsilon_bound, one_run_p_value

    frame = frame.copy()
    private = frame.mech != "none"
    frame["epsilon"] = frame.mech.map({"none": math.inf, "cdp": 0.95, "ldp": 0.95})
    bound = one_run_epsilon_bound(m=200, r=60, v=50, delta=1e-5)
    frame["epsilon_lower_attack"] = bound.epsilon
    frame.loc[~private, "epsilon_lower_attack"] = math.nan
    if p_values:
        p = one_run_p_value(m=200, r=60, v=50, epsilon=0.95, delta=1e-5)
        assert bound.epsilon > 0.95 and 0.05 / 8 < p < 0.05
        frame["epsilon_lower_attack_p"] = p
        frame.loc[~private, "epsilon_lower_attack_p"] = math.nan
    return frame


def test_borderline_bounds_pass_under_holm_and_failed_uncorrected(tmp_path, capsys):
    """8 attack rows, each bound just above its claim (p 0.035 < 0.05): alone, each fails at
    95 %, as the gate did before (and still does for rows without p-values); over the 8
    checks Holm needs p < 0.05 / 8 for the first, so the run passes."""
    assert run_check(tmp_path / "uncorrected", _attack_bounds(runs(), p_values=False)) == 1
    out = capsys.readouterr().out
    assert "FAILED: 8 violation(s)" in out and "uncorrected: no p-value stored" in out
    assert run_check(tmp_path / "holm", _attack_bounds(runs(), p_values=True)) == 0


def test_a_clear_violation_still_fails_under_holm(tmp_path, capsys):
    """One attack of cdp seed 0 gets every guess right (60 of 60: bound 2.966, p 1.6e-4 at the
    claim 0.95): below 0.05 / 8, so it fails, named with the correction; the others pass."""
    from audit.empirical.bounds import one_run_epsilon_bound, one_run_p_value

    frame = _attack_bounds(runs(), p_values=True)
    hit = (frame.mech == "cdp") & (frame.seed == 0) & (frame.distance == "mse")
    frame.loc[hit, "epsilon_lower_attack"] = one_run_epsilon_bound(
        m=200, r=60, v=60, delta=1e-5
    ).epsilon
    frame.loc[hit, "epsilon_lower_attack_p"] = one_run_p_value(
        m=200, r=60, v=60, epsilon=0.95, delta=1e-5
    )
    assert run_check(tmp_path, frame) == 1
    out = capsys.readouterr().out
    assert "FAILED: 1 violation(s)" in out
    line = next(x for x in out.splitlines() if "epsilon_lower_attack>epsilon" in x)
    assert line.split()[:8] == [
        "lfw-subset", "cdp", "z=1", "0", "reconstruction", "mse", "epsilon_lower_attack>epsilon",
        "2.9665",
    ]  # fmt: skip
    assert "Holm over 8 bound checks, 0.05 family-wise" in line


def test_a_cells_audit_bound_is_one_check_however_many_rows_repeat_it(tmp_path, capsys):
    """The cell's audit columns repeat on each of its rows: cdp's two cells (seeds 0 and 1, two
    rows each) are 2 checks, not 4. p-values 0.02 and 0.04: Holm over 2 rejects 0.02 (< 0.025)
    and then 0.04 (< 0.05), each on both rows of its cell; 0.02 and 0.06: only the first. Over
    4 checks (counted per row) 0.02 would pass (> 0.0125)."""
    frame = runs()
    frame["epsilon"] = frame.mech.map({"none": math.inf, "cdp": 2.0, "ldp": 3.0})
    frame["epsilon_lower"] = frame.mech.map({"none": math.nan, "cdp": 2.1, "ldp": math.nan})
    frame["epsilon_lower_p"] = frame.mech.map({"none": math.nan, "cdp": 0.02, "ldp": math.nan})
    cdp_seed_1 = (frame.mech == "cdp") & (frame.seed == 1)
    frame.loc[cdp_seed_1, "epsilon_lower_p"] = 0.04
    assert run_check(tmp_path / "a", frame) == 1
    out = capsys.readouterr().out
    assert "FAILED: 4 violation(s)" in out and "Holm over 2 bound checks" in out
    frame.loc[cdp_seed_1, "epsilon_lower_p"] = 0.06
    assert run_check(tmp_path / "b", frame) == 1
    out = capsys.readouterr().out
    assert "FAILED: 2 violation(s)" in out
    failed = [x.split() for x in out.splitlines() if "epsilon_lower>epsilon" in x]
    assert [x[3] for x in failed] == ["0", "0"]  # seed 0's two rows
