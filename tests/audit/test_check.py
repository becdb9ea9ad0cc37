"""The CI gate: violations exit 1, honest runs exit 0, bad thresholds files exit 2; calibration."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit.check import calibrate, load_thresholds, parse_thresholds
from benchmark import main

ROOT = Path(__file__).resolve().parents[2]
# (mech, param_name, param_value, MI AP mse, MI AP ssim, acc) of an honest quick run.
HONEST = [
    ("none", "none", math.nan, 0.62, 0.64, 0.78),
    ("cdp", "noise_multiplier", 1.0, 0.53, 0.55, 0.60),
    ("ldp", "eps_i", 100.0, 0.51, 0.52, 0.55),
]


def runs(settings=HONEST, seeds=(0, 1), offset=0.0) -> pd.DataFrame:
    rows = []
    for seed in seeds:
        for mech, pname, value, mse, ssim, acc in settings:
            for distance, mi in (("mse", mse), ("ssim", ssim)):
                rows.append(
                    {
                        "dataset": "lfw-subset",
                        "mech": mech,
                        "param_name": pname,
                        "param_value": value,
                        "seed": seed,
                        "distance": distance,
                        "profile": "quick",
                        "mi_ap": mi + offset * seed,
                        "acc": acc - offset * seed,
                        "acc_base": 0.5,
                        "config_hash": f"{mech}-{value}-{seed}",
                    }
                )
    return pd.DataFrame(rows)


def write_runs(run_dir: Path, frame: pd.DataFrame) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    frame.to_csv(run_dir / "runs.csv", index=False)
    return run_dir


def entry(**kw) -> dict:
    base = {
        "dataset": "lfw-subset",
        "profile": "quick",
        "mech": "cdp",
        "param_value": None,
        "distance": "any",
        "max_mi_ap": 0.6,
        "min_acc": 0.53,
        "tolerance": 0.02,
        "margin_source": "test",
    }
    return {**base, **kw}


THRESHOLDS = {
    "schema_version": 1,
    "entries": [
        entry(mech="none", max_mi_ap=None, min_mi_ap=0.58, min_acc=0.7),
        entry(mech="cdp", param_value=1.0, max_mi_ap=0.58),
        entry(mech="ldp", max_mi_ap=0.56, min_acc=0.53),
    ],
}


def write_thresholds(path: Path, doc: dict = THRESHOLDS) -> Path:
    path.write_text(json.dumps(doc))
    return path


def run_check(tmp_path: Path, frame: pd.DataFrame, doc: dict = THRESHOLDS) -> int:
    run_dir = write_runs(tmp_path / "run", frame)
    return main(
        ["check", "--thresholds", str(write_thresholds(tmp_path / "t.json", doc)), str(run_dir)]
    )


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
        "distance",
        "metric",
        "observed",
        "limit",
        "tolerance",
    ]
    assert line.split()[:6] == ["lfw-subset", mech, line.split()[2], "1", "ssim", metric]
    assert line.split()[7:] == [limit, "0.0200"]
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


def _with(**kw) -> dict:
    return {"schema_version": 1, "entries": [entry(**kw)]}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (_with(max_mi_AP=0.6), r"entries\[0\]: unknown field\(s\) \['max_mi_AP'\]"),
        (
            {
                "schema_version": 1,
                "entries": [{k: v for k, v in entry().items() if k != "tolerance"}],
            },
            r"missing required field\(s\) \['tolerance'\]",
        ),
        (_with(mech="cdpp"), r"mech 'cdpp' is unknown; choose one of: none, cdp"),
        (_with(distance="l2"), r"distance 'l2' is unknown; choose 'any' or one of: mse, ssim"),
        (_with(profile="fast"), r"profile 'fast' is unknown"),
        (_with(dataset="lfw_subset"), r"unknown dataset 'lfw_subset'"),
        (_with(max_mi_ap=1.5), r"max_mi_ap must be a number in \[0, 1\] or null, got 1.5"),
        (_with(min_acc="0.5"), r"min_acc must be a number in \[0, 1\] or null, got '0.5'"),
        (_with(tolerance=-0.1), r"tolerance must be a number in \[0, 1\], got -0.1"),
        (_with(tolerance=True), r"tolerance must be a number in \[0, 1\], got True"),
        (_with(min_mi_ap=0.5), r"min_mi_ap is the baseline's floor"),
        (_with(mech="none", min_acc=None), r"max_mi_ap applies to private mechanisms"),
        (_with(mech="none", max_mi_ap=None, param_value=1.0), r"param_value must be null"),
        (_with(max_mi_ap=None, min_acc=None), r"sets no limit"),
        (_with(margin_source=" "), r"margin_source must say how the limits were chosen"),
        ({**_with(), "schema_version": 2}, r"schema_version 2, this code reads 1"),
        ({"schema_version": 1, "entries": []}, r"'entries' must be a non-empty list"),
        ({**_with(), "comment": "x"}, r"unknown top-level field\(s\) \['comment'\]"),
    ],
)
def test_schema_validation_names_the_bad_field(tmp_path, capsys, doc, message):
    with pytest.raises(ValueError, match=message):
        parse_thresholds(doc)
    assert run_check(tmp_path, runs(), doc) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1


def test_unreadable_files_are_errors(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json")
    run_dir = write_runs(tmp_path / "run", runs())
    assert main(["check", "--thresholds", str(tmp_path / "bad.json"), str(run_dir)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["check", "--thresholds", str(tmp_path / "none.json"), str(run_dir)]) == 2
    assert main(["check", "--thresholds", str(tmp_path / "bad.json")]) == 2
    assert main(["check", str(run_dir)]) == 2  # neither --thresholds nor --calibrate


def test_calibration_gives_mean_plus_minus_k_sd(tmp_path, capsys):
    dirs = [write_runs(tmp_path / f"seed{s}", runs(seeds=(s,), offset=0.01)) for s in (0, 1, 2)]
    out = tmp_path / "thresholds.json"
    argv = [
        "check",
        "--calibrate",
        *map(str, dirs),
        "--write",
        str(out),
        "--sigmas",
        "2",
        "--tolerance",
        "0.03",
        "--source-command",
        "python benchmark.py --dataset lfw-subset --profile quick",
    ]
    assert main(argv) == 0
    assert f"thresholds written to {out}: 6 entries" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    load_thresholds(out)  # what calibration writes loads again
    by_key = {(e["mech"], e["distance"]): e for e in doc["entries"]}
    for mech, _, value, mse, _, acc in HONEST:
        mi = np.array([mse + 0.01 * s for s in (0, 1, 2)])
        accs = np.array([acc - 0.01 * s for s in (0, 1, 2)])
        e = by_key[(mech, "mse")]
        assert e["profile"] == "quick" and e["tolerance"] == 0.03 and e["chance_acc"] == 0.5
        floor = accs.mean() - 2 * accs.std(ddof=1)
        if floor - 0.03 > 0.5:
            assert e["min_acc"] == pytest.approx(floor)
        else:  # ldp: a floor at or below chance could not fail, so it is not written
            assert e["min_acc"] is None and "at or below chance" in e["min_acc_dropped"]
        if mech == "none":
            assert e["param_value"] is None and e["max_mi_ap"] is None
            assert e["min_mi_ap"] == pytest.approx(mi.mean() - 2 * mi.std(ddof=1))
        else:
            assert e["param_value"] == value and e["min_mi_ap"] is None
            assert e["max_mi_ap"] == pytest.approx(mi.mean() + 2 * mi.std(ddof=1))
        assert f"mean {mi.mean():.4f} sd {mi.std(ddof=1):.4f}" in e["margin_source"]
        assert "from 3 run(s)" in e["margin_source"]
    for d in dirs:  # the runs a gate was calibrated on pass it
        assert main(["check", "--thresholds", str(out), str(d)]) == 0


def test_calibration_counts_identical_cells_once_and_flags_a_single_run(tmp_path):
    run_dir = write_runs(tmp_path / "a", runs(seeds=(0,)))
    doc = calibrate([run_dir, run_dir], source_commands=["cmd"])
    assert all("from 1 run(s)" in e["margin_source"] for e in doc["entries"])
    assert all("no spread measured" in e["margin_source"] for e in doc["entries"])
    cdp = next(e for e in doc["entries"] if e["mech"] == "cdp" and e["distance"] == "mse")
    assert cdp["max_mi_ap"] == pytest.approx(0.53)


def test_calibration_refuses_bad_input(tmp_path, capsys):
    frame = runs()
    frame.loc[0, "mi_ap"] = math.nan
    run_dir = write_runs(tmp_path / "a", frame)
    with pytest.raises(ValueError, match="NaN MI AP or accuracy"):
        calibrate([run_dir], source_commands=["cmd"])
    with pytest.raises(ValueError, match="--sigmas must be a non-negative number"):
        calibrate([run_dir], sigmas=-1, source_commands=["cmd"])
    assert main(["check", "--calibrate", str(run_dir)]) == 2
    assert "needs --write FILE" in capsys.readouterr().err


def _committed_limits_as_rows(thresholds, *, shift: float) -> pd.DataFrame:
    """One row per committed entry, its MI AP ``shift`` inside (< 0) or outside (> 0) its limit."""
    rows = []
    for i, t in enumerate(thresholds):
        mi = t.max_mi_ap + shift if t.max_mi_ap is not None else t.min_mi_ap - shift
        acc = (t.min_acc if t.min_acc is not None else 0.5) + 0.01
        rows.append(
            {
                "dataset": t.dataset,
                "mech": t.mech,
                "param_name": "p",
                "param_value": math.nan if t.param_value is None else t.param_value,
                "seed": 0,
                "distance": t.distance,
                "profile": t.profile,
                "mi_ap": min(max(mi, 0.0), 1.0),
                "acc": acc,
                "config_hash": f"h{i}",
            }
        )
    return pd.DataFrame(rows)


def test_the_committed_thresholds_are_calibrated_and_can_fail(tmp_path):
    path = ROOT / "results" / "thresholds.json"
    thresholds = load_thresholds(path)
    assert all(t.profile == "quick" for t in thresholds)
    # lfw-subset: seeds 0-2 of every cell (and seed 3 of the first cells); series: CI's cells
    runs = {"lfw-subset": ("from 3 run(s)", "from 4 run(s)"), "basicmotions": ("from 3 run(s)",)}
    mechs = {
        "lfw-subset": {"none", "cdp", "cdp-termwise", "ldp", "vae-ldp"},
        "basicmotions": {"none", "cdp", "ldp"},
    }
    assert {t.dataset for t in thresholds} == set(runs)
    for dataset, calibrated in runs.items():
        mine = [t for t in thresholds if t.dataset == dataset]
        assert all(any(c in t.margin_source for c in calibrated) for t in mine)
        assert {t.mech for t in mine} == mechs[dataset]
    assert {t.distance for t in thresholds if t.dataset == "basicmotions"} == {"mse"}
    assert all((t.min_mi_ap is not None) == (t.mech == "none") for t in thresholds)
    inside = write_runs(tmp_path / "in", _committed_limits_as_rows(thresholds, shift=-0.005))
    assert main(["check", "--thresholds", str(path), str(inside)]) == 0
    outside = write_runs(tmp_path / "out", _committed_limits_as_rows(thresholds, shift=0.05))
    assert main(["check", "--thresholds", str(path), str(outside)]) == 1


def test_calibration_never_writes_an_accuracy_floor_at_or_below_chance(tmp_path):
    """A noisy spread gave floors below chance (lfw-subset cdp z=0.5: 0.006, chance 0.5)."""
    noisy = [("cdp", "noise_multiplier", 0.5, 0.55, 0.56, 0.5)]
    dirs = [write_runs(tmp_path / f"s{s}", runs(noisy, seeds=(s,), offset=0.1)) for s in range(3)]
    doc = calibrate(dirs, source_commands=["cmd"])
    for e in doc["entries"]:
        assert e["min_acc"] is None
        assert "at or below chance 0.5000" in e["min_acc_dropped"]
        assert e["max_mi_ap"] is not None  # the entry still gates the attack
    load_thresholds(write_thresholds(tmp_path / "t.json", doc))


@pytest.mark.parametrize("with_chance", [True, False])
def test_the_gate_refuses_an_accuracy_floor_at_or_below_chance(tmp_path, capsys, with_chance):
    low = entry(mech="cdp", param_value=1.0, max_mi_ap=0.58, min_acc=0.3)
    if with_chance:
        low["chance_acc"] = 0.5  # refused when the file is read
    doc = {**THRESHOLDS, "entries": [*THRESHOLDS["entries"][:1], low]}
    assert run_check(tmp_path, runs(), doc) == 2  # without: refused against the rows' acc_base
    err = capsys.readouterr().err.strip()
    assert "at or below chance accuracy 0.5" in err and "\n" not in err


def test_calibration_names_the_sweep_commands_not_the_directories(tmp_path, capsys):
    run_dir = write_runs(tmp_path / "a", runs(seeds=(0,)))
    with pytest.raises(ValueError, match="--source-command"):
        calibrate([run_dir])  # nothing recorded, nothing given: refused
    command = "python benchmark.py --dataset lfw-subset --profile quick --mech all"
    for config_hash in runs(seeds=(0,)).config_hash.unique():
        cell = run_dir / "cells" / config_hash
        cell.mkdir(parents=True)
        (cell / "metadata.json").write_text(json.dumps({"schema_version": 1, "command": command}))
    doc = calibrate([run_dir])
    assert doc["source_commands"] == [command]
    assert str(run_dir) not in json.dumps(doc)
    given = calibrate([run_dir], source_commands=["python benchmark.py --seeds 1"])
    assert given["source_commands"] == ["python benchmark.py --seeds 1"]


def test_the_committed_thresholds_have_no_floor_at_or_below_chance():
    chance = {"lfw-subset": 0.5, "basicmotions": 0.25}  # 2 and 4 classes
    for t in load_thresholds(ROOT / "results" / "thresholds.json"):
        if t.min_acc is None:
            assert t.min_acc_dropped or t.mech == "none"
        else:
            assert t.min_acc - t.tolerance > chance[t.dataset], t
