"""Calibration: thresholds = mean +- k sd of measured runs, named by the sweep commands."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from audit.check import calibrate, load_thresholds
from benchmark import main

from .runs import HONEST, runs, write_runs, write_thresholds


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


def test_calibration_writes_the_attack_of_each_entry(tmp_path):
    frame = runs(seeds=(0,))
    other = frame.assign(attack="monte-carlo", distance="pixel-l2")
    both = write_runs(tmp_path / "a", pd.concat([frame, other], ignore_index=True))
    doc = calibrate([both], source_commands=["cmd"])
    keys = {(e["mech"], e["attack"], e["distance"]) for e in doc["entries"]}
    assert ("cdp", "monte-carlo", "pixel-l2") in keys and ("cdp", "reconstruction", "mse") in keys
    assert len(doc["entries"]) == 9  # 3 settings x (mse, ssim, pixel-l2)
    assert load_thresholds(write_thresholds(tmp_path / "t.json", doc))


def test_calibration_drops_an_accuracy_floor_at_or_below_the_majority_rate(tmp_path):
    """On an unbalanced D_test (LFW20: 0.278 of it is one person) a floor above 1/#classes but
    below the majority share cannot tell a classifier from one that always answers that class."""
    settings = [("cdp", "noise_multiplier", 1.0, 0.55, 0.56, 0.62)]
    frames = [runs(settings, seeds=(s,), offset=0.005) for s in range(3)]
    plain = calibrate(
        [write_runs(tmp_path / f"p{s}", f) for s, f in enumerate(frames)], source_commands=["c"]
    )
    assert all(e["min_acc"] is not None for e in plain["entries"])  # 0.6 clears 1/2
    skewed = calibrate(
        [write_runs(tmp_path / f"m{s}", f.assign(acc_majority=0.61)) for s, f in enumerate(frames)],
        source_commands=["c"],
    )
    for e in skewed["entries"]:
        assert e["min_acc"] is None and e["chance_acc"] == 0.61
        assert "at or below chance 0.6100" in e["min_acc_dropped"]


def test_calibration_writes_worst_case_entries_from_the_held_out_column(tmp_path):
    frames = [runs(seeds=(s,)).assign(worst_mi_ap=0.6 + 0.01 * s) for s in range(3)]
    doc = calibrate(
        [write_runs(tmp_path / f"w{s}", f) for s, f in enumerate(frames)], source_commands=["c"]
    )
    worst = [e for e in doc["entries"] if e["attack"] == "worst-case"]
    assert {e["mech"] for e in worst} == {"none", "cdp", "ldp"}
    assert all(e["distance"] == "held-out" for e in worst)
    cdp = next(e for e in worst if e["mech"] == "cdp")
    assert cdp["max_mi_ap"] == pytest.approx(0.61 + 3 * 0.01)  # mean + 3 sd of 0.60/0.61/0.62
