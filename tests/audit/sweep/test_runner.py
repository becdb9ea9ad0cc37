"""Cells, caching, resume and the CSV's integrity under kill -9."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attacks.registry import sweep_attacks
from audit.config import CellConfig, SweepConfig
from audit.profiles import PROFILES, ProfileName
from audit.rows.row import COLUMNS
from audit.sweep.runner import run_sweep
from benchmark import main

ROOT = Path(__file__).resolve().parents[3]
TINY = replace(
    PROFILES[ProfileName.QUICK],
    epochs=2,
    max_train=30,
    attack_samples=3,
    classifier_epochs=2,
    classifier_patience=1,
    latent_dim=4,
)
TINY_ARGS = [
    "--epochs",
    "2",
    "--max-train",
    "30",
    "--attack-samples",
    "3",
    "--classifier-epochs",
    "2",
    "--classifier-patience",
    "1",
    "--latent-dim",
    "4",
    "--attack",  # these tests are of the sweep's mechanics: its cheapest list of attacks
    "reconstruction",
    "--device",  # the same arithmetic on every machine (the defaults are auto)
    "cpu",
    "--precision",
    "float32",
]


def _config(out: Path, **kw) -> SweepConfig:
    base = dict(
        dataset="digits",
        mechs=("none",),
        profile_name=ProfileName.QUICK,
        profile=TINY,
        seeds=(0,),
        out=out,
        progress=False,
        report=False,  # the report's own test below writes it
        attacks=("reconstruction",),  # the sweep's mechanics, at its cheapest list of attacks
    )
    return SweepConfig(**{**base, **kw})


def test_sweep_writes_rows_and_resumes_without_recomputation(tmp_path):
    first = run_sweep(_config(tmp_path, attacks=sweep_attacks()))
    assert (first.ran, first.reused) == (1, 0)
    frame = pd.read_csv(first.csv_path)
    assert set(COLUMNS) <= set(frame.columns)
    assert (frame.precision == "float32").all()  # the default, though the cells do not name it
    assert set(frame.attack) == set(sweep_attacks())  # every attack the release allows
    assert sorted(frame.distance[frame.attack == "reconstruction"]) == ["mse", "ssim"]
    assert frame.worst_case.sum() == 1 and frame.worst_mi_ap.nunique() == 1
    assert (
        "reference=" in frame.privacy_notes[0]
        and "D_test records outside D_atk" in (frame.privacy_notes[0])
    )
    assert frame.mi_ap.between(0, 1).all() and frame.acc.between(0, 1).all()
    assert (frame.acc_base == 0.1).all()
    cell = next((tmp_path / "cells").iterdir())
    for name in ("config.json", "metadata.json", "history.json", "model.pt", "rows.json"):
        assert (cell / name).is_file()
    mtime = (cell / "model.pt").stat().st_mtime_ns
    again = run_sweep(_config(tmp_path, attacks=sweep_attacks()))
    assert (again.ran, again.reused) == (0, 1)
    assert (cell / "model.pt").stat().st_mtime_ns == mtime
    pd.testing.assert_frame_equal(pd.read_csv(again.csv_path), frame)
    redo = run_sweep(_config(tmp_path, overwrite=True, attacks=sweep_attacks()))
    assert (redo.ran, redo.reused) == (1, 0)


def test_same_seed_same_scores(tmp_path):
    a = run_sweep(_config(tmp_path / "a")).rows
    b = run_sweep(_config(tmp_path / "b")).rows
    cols = ["mi_ap", "mi_auc", "acc", "acc_real", "train_test_gap"]
    pd.testing.assert_frame_equal(a[cols], b[cols])


def test_kill_9_leaves_a_valid_csv_and_resume_finishes(tmp_path):
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        str(ROOT / "benchmark.py"),
        "--dataset",
        "digits",
        "--profile",
        "quick",
        "--seeds",
        "0",
        "1",
        "2",
        "--out",
        str(out),
        "--no-progress",
        *TINY_ARGS,
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and not list(out.glob("cells/*/rows.json")):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = len(list(out.glob("cells/*/rows.json")))
    assert finished >= 1
    if (out / "runs.csv").exists():
        frame = pd.read_csv(out / "runs.csv")
        assert len(frame) <= 2 * finished and frame.mi_ap.notna().all()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{finished} reused" in done.stdout
    frame = pd.read_csv(out / "runs.csv")
    assert sorted(frame.seed.unique()) == [0, 1, 2] and len(frame) == 6


def test_a_second_configuration_is_refused_before_any_work(tmp_path, capsys):
    run_sweep(_config(tmp_path))
    cells = sorted(p.name for p in (tmp_path / "cells").iterdir())
    other = _config(tmp_path, profile=replace(TINY, epochs=3), overwrite=True)
    with pytest.raises(ValueError, match=r"epochs: 2 vs 3.*another --out"):
        run_sweep(other)
    assert sorted(p.name for p in (tmp_path / "cells").iterdir()) == cells
    argv = ["--dataset", "digits", "--profile", "quick", "--out", str(tmp_path), "--no-progress"]
    assert main([*argv, *TINY_ARGS, "--epochs", "3"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "epochs: 2 vs 3" in error


def _npz(path: Path, start: int) -> None:
    from sklearn.datasets import load_digits

    digits = load_digits()
    np.savez(path, X=digits.images[start : start + 120] / 16, y=digits.target[start : start + 120])


def test_changed_npz_contents_are_never_reused(tmp_path):
    """Same path, other records: before, '0 cell(s) run, 1 reused' and the cached acc_real of
    the old file (keyed on its name)."""
    data = tmp_path / "data.npz"
    _npz(data, 0)
    first = _config(tmp_path / "a", dataset=f"npz:{data}")
    assert run_sweep(first).ran == 1
    assert run_sweep(first).reused == 1
    _npz(data, 120)
    with pytest.raises(ValueError, match="data_sha256"):
        run_sweep(first)  # the directory holds results of the old data
    shutil.copytree(tmp_path / "a" / "cache", tmp_path / "b" / "cache")
    second = run_sweep(_config(tmp_path / "b", dataset=f"npz:{data}"))
    assert second.ran == 1
    assert len(list((tmp_path / "b" / "cache").glob("acc_real-*.json"))) == 2
    (old,) = pd.read_csv(tmp_path / "a" / "runs.csv").config_hash.unique()
    assert old not in set(second.rows.config_hash)


def test_a_torn_rows_json_is_rerun_and_does_not_stop_other_sweeps(tmp_path, caplog):
    ldp_config = _config(tmp_path, mechs=("ldp",), grid=(10.0,))
    first = run_sweep(ldp_config)
    assert first.ran == 2
    ldp = first.rows.loc[first.rows.mech == "ldp", "config_hash"].iloc[0]
    (tmp_path / "cells" / ldp / "rows.json").write_text('{"schema_version": 1, "rows": [')
    base = run_sweep(_config(tmp_path, overwrite=True))  # another cell; the torn one is named
    assert base.ran == 1 and str(tmp_path / "cells" / ldp / "rows.json") in caplog.text
    again = run_sweep(ldp_config)
    assert (again.ran, again.reused) == (1, 1) and len(again.rows) == 4


def test_two_concurrent_sweeps_compute_each_cell_once(tmp_path):
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        str(ROOT / "benchmark.py"),
        "--dataset",
        "digits",
        "--profile",
        "quick",
        "--out",
        str(out),
        "--no-progress",
        *TINY_ARGS,
    ]
    procs = [
        subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    for stdout, _ in outputs:  # the choices first, before any cell
        assert stdout.startswith("device: cpu (--device cpu)\nprecision: float32 (--precision ")
    lines = sorted(stdout.splitlines()[3].split(";")[0] for stdout, _ in outputs)
    assert lines == ["0 cell(s) run, 1 reused", "1 cell(s) run, 0 reused"]
    assert not list(out.rglob("*.tmp"))


def test_gen_records_sets_the_size_of_d_gen_not_d_train(tmp_path):
    """|D_gen| was |D_train| (50 in quick: a classifier at chance); now the profile's
    gen_records, with D_train's class shares, and every row says if its baseline beat chance."""
    import torch

    from models.generation import gen_labels

    labels = gen_labels(torch.tensor([0] * 6 + [1] * 3 + [2]), 25, seed=0)
    assert len(labels) == 25 and torch.bincount(labels).tolist() == [15, 8, 2]  # 60/30/10 %
    assert not torch.equal(labels, labels.sort().values)  # shuffled, seeded
    assert torch.equal(labels, gen_labels(torch.tensor([0] * 6 + [1] * 3 + [2]), 25, seed=0))

    rows = run_sweep(_config(tmp_path, profile=replace(TINY, gen_records=40))).rows
    assert (rows.n_train == 30).all() and (rows.gen_records == 40).all()
    assert (rows.n_test > 0).all() and rows.utility_valid.dtype == bool


def test_every_sweep_ends_with_its_report_unless_told_not_to(tmp_path, monkeypatch, caplog, capsys):
    """The report comes after runs.csv; when it fails, the cells and runs.csv stand and a
    warning names the error and the command that writes it; --no-report writes none."""
    import audit.report

    def broken(*args, **kwargs):
        raise RuntimeError("no matplotlib backend")

    with monkeypatch.context() as patch:
        patch.setattr(audit.report, "write_report", broken)
        failed = run_sweep(_config(tmp_path, report=True))
    assert failed.report is None and not (tmp_path / "report").exists()
    assert len(pd.read_csv(failed.csv_path)) == 2 and (failed.ran, failed.reused) == (1, 0)
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert "RuntimeError: no matplotlib backend" in warning
    assert f"python benchmark.py report {tmp_path}" in warning

    argv = ["--dataset", "digits", "--profile", "quick", *TINY_ARGS, "--out", str(tmp_path)]
    assert main([*argv, "--no-progress"]) == 0  # the cell is reused; the report is written
    out = capsys.readouterr().out.strip().splitlines()
    report = tmp_path / "report" / "report.md"
    assert f"report: {report}" in out and report.is_file()
    after = out[out.index(f"report: {report}") + 1 :]  # then the recommendation, a line a limit
    assert len(after) == 3 and all(line.startswith("recommended: digits, ") for line in after)
    figures = {p.name for p in (tmp_path / "report").iterdir()}
    for stem in ("attack_curves_mse", "reconstructions_none", "samples_none"):
        assert {f"digits-quick-{stem}.png", f"digits-quick-{stem}.pdf"} <= figures
    assert "attack_index.npz" not in report.read_text()  # the grid read the saved records
    cell = next((tmp_path / "cells").iterdir())
    assert (cell / "attack_index.npz").is_file()

    (tmp_path / "report").rename(tmp_path / "old-report")
    assert main([*argv, "--no-progress", "--no-report"]) == 0
    assert not (tmp_path / "report").exists()
    assert "report:" not in capsys.readouterr().out


def test_the_report_switch_changes_no_cell():
    from audit.sweep.plan import build_cells

    def hashes(report: bool) -> list[str]:
        config = _config(Path("unused"), mechs=("cdp",), report=report)
        return [cell.config_hash for cell, _ in build_cells(config, data_sha256="a" * 64)]

    assert hashes(True) == hashes(False)


def test_audit_switch_fills_epsilon_lower_of_private_cells_only(tmp_path):
    run = run_sweep(_config(tmp_path, mechs=("ldp",), grid=(2.0,), audit=True))
    frame = pd.read_csv(run.csv_path)
    ldp, none = frame[frame.mech == "ldp"], frame[frame.mech == "none"]
    assert np.isfinite(ldp.epsilon_lower).all() and (ldp.epsilon_lower > 0).all()
    assert (ldp.epsilon_lower <= ldp.epsilon).all()
    assert (ldp.epsilon_lower <= ldp.epsilon_lower_ceiling).all()
    assert set(ldp.epsilon_lower_kind) == {"local-worst-case"}
    assert set(ldp.epsilon_lower_m) == {10**4}  # the quick profile's M
    assert ldp.privacy_notes.str.contains("empirical_audit=").all()
    assert none.epsilon_lower.isna().all() and none.epsilon_lower_ceiling.isna().all()
    assert (none.epsilon_lower_m == 0).all()


def test_the_audit_switch_changes_private_cells_only():
    from audit.sweep.plan import build_cells

    def hashes(audit: bool) -> list[str]:
        config = _config(Path("unused"), mechs=("ldp",), grid=(1.0, 2.0), audit=audit)
        return [cell.config_hash for cell, _ in build_cells(config, data_sha256="a" * 64)]

    plain, audited = hashes(False), hashes(True)
    assert plain[0] == audited[0]  # the baseline none is never audited
    assert not set(plain[1:]) & set(audited[1:])  # audited cells hold their bounds


def test_reference_models_are_trained_once_per_seed_and_reused(tmp_path):
    """The baseline cell trains the non-private reference VAEs; the ldp cell of the same seed
    trains its own mechanism-copying ones (the cell's perturbation of the reference records) and
    loads the non-private ones for its ``-nonprivate`` variants; a recomputed sweep loads them
    all. The calibrated variants get rows, scores and a part in the worst case like any other
    result, and each row says how the models it read were trained."""
    from audit.results import scores_key

    attacks = ("latent-search", "likelihood")
    config = _config(tmp_path, mechs=("none", "ldp"), grid=(100.0,))
    first = run_sweep(replace(config, attacks=attacks))
    rows = first.rows.sort_values(["mech", "attack", "variant"])
    expected = {
        ("latent-search", "raw"),
        ("latent-search", "calibrated"),
        ("likelihood", "raw"),
        ("likelihood", "calibrated"),
        ("likelihood", "lira-offline"),
    }
    labelled = {
        ("latent-search", "calibrated-nonprivate"),
        ("likelihood", "calibrated-nonprivate"),
        ("likelihood", "lira-offline-nonprivate"),
    }
    for mech, cell in rows.groupby("mech"):
        want = expected if mech == "none" else expected | labelled
        assert set(zip(cell.attack, cell.variant, strict=True)) == want
        assert cell.worst_case.sum() == 1
    pairs = zip(rows.mech, rows.variant, strict=True)
    trained = dict(zip(pairs, rows.side_models_trained, strict=True))
    assert trained["none", "calibrated"].endswith("non-private Adam")
    assert trained["ldp", "calibrated"].endswith("the cell's mechanism, ldp eps_i=100")
    assert trained["ldp", "calibrated-nonprivate"] == trained["none", "calibrated"]
    notes = dict(zip(rows.mech, rows.privacy_notes, strict=False))
    assert "2 trained in this cell" in notes["none"] and "0 from the cache" in notes["none"]
    copying, plain = notes["ldp"].split(" and non-private reference models: ")
    assert "mechanism-copying" in copying and "2 trained in this cell" in copying
    assert "0 trained in this cell" in plain and "2 from the cache" in plain
    keys = sorted((tmp_path / "reference-models").iterdir())
    assert len(keys) == 2
    for key in keys:
        names = sorted(p.name for p in key.iterdir())
        assert names == ["model_0.pt", "model_1.pt", "reference.json"]
    read = {"none": ["calibrated"], "ldp": ["calibrated", "calibrated-nonprivate"]}
    for mech, variants in read.items():
        cell_dir = tmp_path / "cells" / rows.config_hash[rows.mech == mech].iloc[0]
        with np.load(cell_dir / "scores.npz") as scores:
            for variant in variants:
                assert scores_key("latent-search", "mse", variant) in scores.files
            assert scores_key("likelihood", "iwae-bernoulli", "lira-offline") in scores.files
    mtimes = [(key / "model_0.pt").stat().st_mtime_ns for key in keys]
    redo = run_sweep(replace(config, attacks=attacks, overwrite=True))
    assert (redo.ran, redo.reused) == (2, 0)
    assert [(key / "model_0.pt").stat().st_mtime_ns for key in keys] == mtimes  # not retrained
    again = redo.rows.sort_values(["mech", "attack", "variant"])
    assert all("0 trained in this cell" in n for n in again.privacy_notes)
    np.testing.assert_allclose(again.mi_ap.to_numpy(), rows.mi_ap.to_numpy())


def test_a_sweeps_options_are_checked_once_per_phase_through_one_entry_point(monkeypatch, tmp_path):
    """run_sweep checks the options through check_sweep alone: once before loading the data and
    once with it; build_cells runs once and checks nothing itself."""
    from audit.mechanisms.mechanism import Mechanism
    from audit.sweep import runner as sweep

    calls: list[object] = []
    original = Mechanism.check_options

    def spy(self, options, *, grid, batch_size, data=None):
        calls.append(data)
        return original(self, options, grid=grid, batch_size=batch_size, data=data)

    built = []
    build = sweep.build_cells
    monkeypatch.setattr(Mechanism, "check_options", spy)
    monkeypatch.setattr(sweep, "build_cells", lambda *a, **k: built.append(1) or build(*a, **k))
    big_batch = replace(TINY, batch_size=999)
    config = _config(tmp_path / "out", mechs=("cdp",), profile=big_batch)
    with pytest.raises(ValueError, match="--batch-size 999 exceeds"):
        sweep.run_sweep(config)
    assert [d is None for d in calls] == [True, False] and built == []
    assert not (tmp_path / "out").exists()  # refused before any write


def test_d_gen_labels_read_no_d_train_record():
    """Issue 30, item 8: D_gen's label counts followed D_train's, so adding a D_train record
    changed D_gen deterministically (no finite epsilon for model plus D_gen). They follow D_val's
    shares now: two D_train that differ in one record (of another class) give the same labels."""
    import torch

    from audit.cell.gen_accuracy import generation_labels
    from audit.mechanisms.mechanism import CellData

    cell = CellConfig("digits", "none", "none", None, 0, replace(TINY, gen_records=40))

    def data(train_y: list[int]) -> CellData:
        y = torch.tensor(train_y)
        val_y = torch.tensor([0, 0, 1, 2])
        x = torch.zeros(len(y), 1, 8, 8)
        return CellData((x, y), (x[:4], val_y), (x[:2], y[:2]), 3, len(y) + 6)

    one = generation_labels(cell, data([0, 0, 1, 1, 2]))
    other = generation_labels(cell, data([0, 0, 1, 1, 2, 2]))
    assert torch.equal(one, other)
    assert torch.bincount(one, minlength=3).tolist() == [20, 10, 10]  # D_val's 50/25/25 %
