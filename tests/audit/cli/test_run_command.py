"""The command line: bad input is one line and exit status 2, and nothing result-like is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import benchmark
from audit.cli.run_command import build_run_parser, config_from_args

ROOT = Path(__file__).resolve().parents[3]


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
        (["--dataset", "motionsense", "--window-stride", "0"], "must be a positive integer, got 0"),
        (["--dataset", "motionsense", "--window-stride", "-250"], "positive integer, got -250"),
        (["--dataset", "motionsense", "--window-stride", "2.5"], "invalid int value: '2.5'"),
        (["--dataset", "basicmotions", "--window-stride", "50"], "not to 'basicmotions'"),
        (
            ["--mech", "cdp-termwise", "--termwise-accounting", "composed"],
            "termwise accounting 'composed' is refused",
        ),
    ],
)
def test_bad_input_is_one_line_and_status_2(argv, message, tmp_path, capsys):
    out = tmp_path / "out"
    code = benchmark.main([*argv, "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("error:") and message in err and "\n" not in err
    assert not out.exists()


def test_epsilon_refuses_composed_termwise_accounting(capsys):
    argv = ["epsilon", "--mech", "cdp-termwise", "--n-train", "926", "--batch-size", "32"]
    argv += ["--epochs", "1000", "--noise-multiplier", "1", "--termwise-accounting", "composed"]
    code = benchmark.main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("error:") and "'composed' is refused" in err and "\n" not in err
    assert "allowed: stacked" in err


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

    return build_cells(config_from_args(build_run_parser().parse_args(argv)))


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


QUICK_DIGITS = ["--dataset", "digits", "--profile", "quick"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # options checked against the data before any cell (issue 13, item 4)
        (["--mech", "cdp", "--batch-size", "60"], "--batch-size 60 exceeds |D_train| = 50"),
        (["--mech", "ldp", "--pixel-block", "3"], "pixel block b=3 does not tile the 8x8"),
        (["--mech", "ldp", "--ldp-scope", "some"], "unknown ldp scope 'some'"),
        (["--mech", "vae-ldp", "--perturbation-data", "x"], "unknown perturbation data 'x'"),
        # options that do not apply are refused, not ignored
        (["--mech", "ldp", "--target-epsilon", "5"], "--target-epsilon does not apply to --mech"),
        (["--mech", "ldp", "--clip-norm", "1"], "--clip-norm does not apply to --mech ldp"),
        (["--mech", "none", "--grid", "1"], "--grid does not apply to --mech none"),
        (["--mech", "cdp", "--grid", "1", "--target-epsilon", "5"], "either --target-epsilon"),
        (["--mech", "cdp", "ldp", "--grid", "1"], "cdp: noise_multiplier, ldp: eps_i"),
        (["--mech", "all", "--grid", "1"], "with a --grid each"),
        # item 9: no prefix matching, device names validated
        (["--epoch", "3"], "unrecognized arguments: --epoch"),
        (["--device", "cuda:banana"], "unknown device 'cuda:banana'"),
        (["--device", "cuda:-1"], "unknown device 'cuda:-1'"),
    ],
)
def test_bad_options_stop_before_any_work(argv, message, tmp_path, capsys):
    out = tmp_path / "out"
    code = benchmark.main([*QUICK_DIGITS, *argv, "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("error:") and message in err and "\n" not in err, err
    assert not out.exists()


def test_unusable_out_is_refused_before_training(tmp_path, capsys):
    a_file = tmp_path / "runs.csv"
    a_file.write_text("precious\n")
    for out in (a_file, a_file / "sub"):
        code = benchmark.main([*QUICK_DIGITS, "--out", str(out), "--no-progress"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and err.startswith("error:") and str(a_file) in err, err
        assert "\n" not in err
    assert a_file.read_text() == "precious\n"


def test_report_out_that_is_a_file_is_one_line(tmp_path, capsys):
    from tests.audit.report.synthetic import synthetic_runs, write_runs

    run_dir = tmp_path / "run"
    write_runs(run_dir, synthetic_runs())
    a_file = tmp_path / "report.md"
    a_file.write_text("x")
    code = benchmark.main(["report", str(run_dir), "--out", str(a_file), "--no-images"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "is an existing file" in err and "\n" not in err, err


def test_help_shows_no_meaningless_defaults():
    text = build_run_parser().format_help()
    flat = " ".join(text.split())
    assert "(default: True)" not in flat and "(default: False)" not in flat
    assert "(default: 0)" not in flat  # -v is a counter
    assert "the default) (default" not in flat
    assert "(default: lfw-subset)" in flat  # real defaults are still shown


@pytest.mark.parametrize("sub", ["report", "check"])
def test_subcommands_refuse_abbreviations(sub, tmp_path, capsys):
    flag = "--form" if sub == "report" else "--thresh"
    code = benchmark.main([sub, str(tmp_path), flag, "x"])
    err = capsys.readouterr().err
    assert code == 2
    assert "unrecognized arguments" in err or "is required" in err, err
