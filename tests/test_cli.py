"""The command line: bad input is one line and exit status 2, and nothing result-like is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import benchmark

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--dataset", "mnist"], "unknown dataset 'mnist'"),
        (["--mech", "dpsgd"], "unknown mechanism 'dpsgd'"),
        (["--seeds", "-3"], "non-negative"),
        (["--epochs", "0"], "epochs must be a positive integer, got 0"),
        (["--lr", "nan"], "lr must be a positive finite number"),
        (["--grid", "-1"], "positive finite"),
        (["--profile", "huge"], "invalid choice: 'huge'"),
        (["--device", "tpu"], "unknown device 'tpu'"),
        (["--max-train", "many"], "expected an integer or 'all'"),
        (["--dataset", "npz:/does/not/exist.npz"], "does not exist"),
    ],
)
def test_bad_input_is_one_line_and_status_2(argv, message, tmp_path, capsys):
    out = tmp_path / "out"
    code = benchmark.main([*argv, "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("error:") and message in err and "\n" not in err
    assert not out.exists()


def test_lfw20_offline_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "results"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmark.py"),
            "--dataset",
            "lfw20",
            "--mech",
            "none",
            "--out",
            str(out),
            "--data-home",
            str(tmp_path / "no-lfw-here"),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--data-home" in lines[0], proc.stderr
    assert not out.exists()


def test_help_explains_every_option():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmark.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0
    for option in (
        "--dataset",
        "--mech",
        "--profile",
        "--out",
        "--seeds",
        "--device",
        "--no-progress",
        "--overwrite",
        "--attack-records",
        "--clip-norm",
    ):
        assert option in proc.stdout
