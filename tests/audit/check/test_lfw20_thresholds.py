"""The LFW20 gate thresholds (``results/thresholds-lfw20.json``): calibrated from the main LFW20
command (docs/lfw20-studies.md) on the real images, able to fail, and met by a fresh run where
the data is present (the folder holding ``lfw_home/`` named by ``DPVAE_LFW_HOME``; skipped with
the reason otherwise)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from audit.check import load_thresholds
from benchmark import main

from .runs import ROOT, write_runs
from .test_thresholds import _committed_limits_as_rows

LFW20_THRESHOLDS = ROOT / "results" / "thresholds-lfw20.json"
#: cdp's default grid (audit.mechanisms.cdp) and the baseline: what the main command runs.
MAIN_COMMAND_GRID = {0.001, 0.01, 0.1, 0.5, 1.0, 2.0, 4.0}
#: The tolerances: 3 sd of MI AP on LFW20's D_atk (200 members, 200 non-members; sd 0.025 from
#: bootstrapping the baseline's scores and from random scores), and on the held-out half the
#: worst case is measured on (100 + 100; sd 0.034 from random scores).
TOLERANCE = {"reconstruction": 0.075, "worst-case": 0.10}
#: D_test's majority-class share on LFW20 (George W Bush, 159 of 572): what a constant answer
#: scores; an accuracy floor must sit above it by more than its tolerance.
MAJORITY_RATE = 0.278


def lfw_home() -> Path | None:
    """Where the real LFW images are (the folder holding ``lfw_home/``), or None."""
    candidate = os.environ.get("DPVAE_LFW_HOME")
    if candidate and (Path(candidate) / "lfw_home" / "lfw_funneled").is_dir():
        return Path(candidate)
    return None


def test_the_lfw20_thresholds_cover_the_main_command_and_can_fail(tmp_path):
    thresholds = load_thresholds(LFW20_THRESHOLDS)
    assert {(t.dataset, t.profile) for t in thresholds} == {("lfw20", "quick")}
    assert all(t.tolerance == TOLERANCE[t.attack] for t in thresholds)
    assert {(t.attack, t.distance) for t in thresholds} == {
        ("reconstruction", "mse"), ("reconstruction", "ssim"), ("worst-case", "held-out")
    }  # fmt: skip
    cdp = {t.param_value for t in thresholds if t.mech == "cdp"}
    assert cdp == MAIN_COMMAND_GRID and {t.mech for t in thresholds} == {"none", "cdp"}
    base = [t for t in thresholds if t.mech == "none"]
    assert base and all(t.min_mi_ap - t.tolerance > 0.75 for t in base)  # it leaks clearly
    floors = {(t.mech, t.param_value) for t in thresholds if t.min_acc is not None}
    assert floors == {("none", None), ("cdp", 0.001)}  # where utility is above the majority
    assert all(t.min_acc - t.tolerance > MAJORITY_RATE for t in thresholds if t.min_acc)
    inside = write_runs(tmp_path / "in", _committed_limits_as_rows(thresholds, shift=-0.005))
    assert main(["check", "--thresholds", str(LFW20_THRESHOLDS), str(inside)]) == 0
    outside = write_runs(tmp_path / "out", _committed_limits_as_rows(thresholds, shift=0.11))
    assert main(["check", "--thresholds", str(LFW20_THRESHOLDS), str(outside)]) == 1


@pytest.mark.slow
def test_a_fresh_lfw20_run_meets_the_thresholds(tmp_path):
    """The baseline and cdp z = 1 on the real LFW20, quick profile, seed 1 (the thresholds came
    from seeds 0 and 2: this is the seed-to-seed check; about an hour on 2 cores), gated by the
    committed LFW20 thresholds."""
    home = lfw_home()
    if home is None:
        pytest.skip(
            "the real LFW20 images are not here: set DPVAE_LFW_HOME to the folder holding lfw_home/"
        )
    out = tmp_path / "lfw20"
    command = [
        sys.executable, str(ROOT / "benchmark.py"), "--dataset", "lfw20", "--data-home",
        str(home), "--mech", "cdp", "--grid", "1", "--profile", "quick", "--seeds", "1",
        "--out", str(out), "--no-progress", "--no-report",
        "--device", "cpu", "--precision", "float32",  # the thresholds' arithmetic, any machine
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=4 * 3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert main(["check", "--thresholds", str(LFW20_THRESHOLDS), str(out)]) == 0
