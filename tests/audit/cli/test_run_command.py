"""The command line: bad input is one line and exit status 2, and nothing result-like is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import benchmark
from audit.cli.run_command import build_run_parser, config_from_args

ROOT = Path(__file__).resolve().parents[3]


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
    assert not (tmp_path / "no-lfw-here").exists()  # the failed download's folders are removed


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
        "--window-stride",
        "--reference-models",
    ):
        assert option in proc.stdout


def test_reference_models_flag_overrides_the_profile(tmp_path):
    argv = ["--dataset", "digits", "--mech", "none", "--out", str(tmp_path)]
    quick = config_from_args(build_run_parser().parse_args([*argv, "--profile", "quick"]))
    assert quick.profile.reference_models == 2
    for value in (0, 5):
        given = build_run_parser().parse_args([*argv, "--reference-models", str(value)])
        assert config_from_args(given).profile.reference_models == value


def _cells(argv: list[str]):
    from audit.sweep.plan import build_cells

    args = build_run_parser().parse_args([*argv, "--precision", "float32"])  # no "auto" in cells
    return build_cells(config_from_args(args))


def test_window_stride_is_recorded_in_every_cell_and_reaches_the_loader(tmp_path, monkeypatch):
    argv = ["--dataset", "motionsense", "--mech", "ldp", "--grid", "1", "--out", str(tmp_path)]
    default, half = _cells(argv), _cells([*argv, "--window-stride", "250"])
    assert [c.option("window_stride") for c, _ in default] == [500, 500]  # the default, recorded
    assert [c.option("window_stride") for c, _ in half] == [250, 250]
    assert {c.config_hash for c, _ in default}.isdisjoint(c.config_hash for c, _ in half)
    assert _cells([*argv, "--window-stride", "500"]) == default  # explicit default: same cells
    assert all(c.option("window_stride") is None for c, _ in _cells(["--dataset", "digits"]))

    seen = {}

    def fake_load(name, *, data_home=None, window_stride=None):
        seen.update(name=name, window_stride=window_stride)
        raise ValueError("stop here")

    monkeypatch.setattr("audit.sweep.runner.load_dataset", fake_load)
    assert benchmark.main([*argv, "--window-stride", "250", "--no-progress"]) == 2
    assert seen == {"name": "motionsense", "window_stride": 250}


def test_series_datasets_get_their_own_quick_epochs():
    from audit.profiles import PROFILES, SERIES_EPOCHS, ProfileName

    quick = ["--profile", "quick", "--mech", "none"]
    series = _cells(["--dataset", "basicmotions", *quick])[0][0]
    image = _cells(["--dataset", "digits", *quick])[0][0]
    assert series.profile.epochs == SERIES_EPOCHS[ProfileName.QUICK] == 200  # in the cell hash
    assert image.profile.epochs == PROFILES[ProfileName.QUICK].epochs == 40
    assert series.profile == image.profile.__class__(**{**vars(image.profile), "epochs": 200})
    given = _cells(["--dataset", "basicmotions", *quick, "--epochs", "7"])[0][0]
    assert given.profile.epochs == 7  # an explicit --epochs still wins
    standard = _cells(["--dataset", "basicmotions", "--mech", "none"])[0][0]
    assert standard.profile == PROFILES[ProfileName.STANDARD]


def test_help_shows_no_meaningless_defaults():
    text = build_run_parser().format_help()
    flat = " ".join(text.split())
    assert "(default: True)" not in flat and "(default: False)" not in flat
    assert "(default: 0)" not in flat  # -v is a counter
    assert "the default) (default" not in flat
    assert "(default: lfw-subset)" in flat  # real defaults are still shown
