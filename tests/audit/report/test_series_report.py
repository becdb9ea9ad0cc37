"""The report and the CI gate on series rows: a tiny motionsense sweep (fixture in the real
layout, half-overlapping windows) gives line-plot grids, tables and a gate like image rows."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D

from audit.check import calibrate, check_dir, write_thresholds
from audit.config import SweepConfig
from audit.profiles import PROFILES, ProfileName
from audit.report import write_report
from audit.report.grids import grid_figures, load_target_vae
from audit.report.summaries import load_runs, ordered
from audit.sweep.runner import run_sweep
from benchmark import main
from tests.audit.datasets.fixtures import build_motionsense_fixture
from tests.models.test_lstm_vae import has_dp_lstm

TINY = replace(
    PROFILES[ProfileName.QUICK],
    epochs=2,
    batch_size=4,
    attack_samples=3,
    classifier_epochs=2,
    latent_dim=4,
)


@pytest.fixture(scope="module")
def series_run(tmp_path_factory) -> tuple[Path, Path]:
    """(run directory, data home) of none + cdp + ldp on the motionsense fixture, stride 250."""
    root = tmp_path_factory.mktemp("series")
    home = build_motionsense_fixture(root / "data")
    for mech in ("cdp", "ldp"):  # one --grid per private mechanism
        run_sweep(
            SweepConfig(
                dataset="motionsense",
                mechs=("none", mech),
                profile_name=ProfileName.QUICK,
                profile=TINY,
                seeds=(0,),
                out=root / "out",
                data_home=home,
                grid=(1.0,),
                progress=False,
                window_stride=250,
                report=False,  # the tests write it
                attacks=("reconstruction",),  # the report and gate of series rows: one attack
            )
        )
    return root / "out", home


def test_series_report_draws_line_plots_not_image_grids(series_run):
    run_dir, home = series_run
    report = write_report(run_dir, data_home=home, formats=("png",))
    names = {p.name for p in report.figures}
    for stem in ("accuracy_vs_epsilon", "mi_ap_vs_epsilon", "attack_curves_mse"):
        assert f"motionsense-quick-{stem}.png" in names
    frame = load_runs(run_dir)
    if frame.phi.notna().any():
        assert "motionsense-quick-phi.png" in names
    else:  # a baseline at chance: no phi figure, and the report says why
        assert [s for s in report.skipped if "phi figure skipped" in s], report.skipped
    for mech in ("cdp", "ldp"):
        assert f"motionsense-quick-reconstructions_{mech}.png" in names
        assert f"motionsense-quick-samples_{mech}.png" in names
    assert not [s for s in report.skipped if "grids" in s], report.skipped
    text = report.markdown.read_text()
    assert "| mse |" in text and "| ssim |" not in text  # series: MSE only (per-attack table)

    frame = load_runs(run_dir)
    figures = dict(grid_figures(run_dir, ordered(frame), name="ms", data_home=home, skipped=[]))
    recon = figures["reconstructions_ldp"]
    panels = [ax for ax in recon.axes if ax.get_visible() and ax.axison]
    assert len(panels) == 3 * 8  # original, none, ldp x 4 members + 4 non-members
    for ax in panels:
        lines = [a for a in ax.get_children() if isinstance(a, Line2D)]
        assert len(lines) == 12 and not any(isinstance(a, AxesImage) for a in ax.get_children())
        assert len(lines[0].get_xdata()) == 500  # one 10 s window at 50 Hz
    assert len(figures["samples_cdp"].axes) == 2 * 8  # none, cdp x 8 generated samples


def test_series_models_load_in_their_fast_implementation(series_run):
    from audit.datasets import load_dataset
    from audit.results import load_cell_config

    run_dir, home = series_run
    dataset = load_dataset("motionsense", data_home=home, window_stride=250)
    cells = sorted((run_dir / "cells").glob("*/model.pt"))
    assert len(cells) == 3
    for path in cells:
        cell = load_cell_config(path.parent)
        assert cell.option("window_stride") == 250
        model = load_target_vae(path.parent, cell, dataset)
        assert not has_dp_lstm(model)  # cdp trained with DPLSTMs, saved nn.LSTM keys


def test_the_gate_checks_series_rows(series_run, tmp_path, capsys):
    run_dir, _ = series_run
    thresholds = tmp_path / "thresholds.json"
    doc = calibrate([run_dir], tolerance=0.02, source_commands=["the series_run fixture"])
    write_thresholds(thresholds, doc)
    doc = json.loads(thresholds.read_text())
    assert {e["dataset"] for e in doc["entries"]} == {"motionsense"}
    # one reconstruction entry per cell and one held-out worst-case entry per cell
    assert sorted((e["attack"], e["distance"]) for e in doc["entries"]) == sorted(
        [("reconstruction", "mse")] * 3 + [("worst-case", "held-out")] * 3
    )
    result = check_dir(run_dir, thresholds)
    assert result.passed and result.n_checked == 6 and not result.unchecked

    doctored = tmp_path / "doctored"
    doctored.mkdir()
    frame = pd.read_csv(run_dir / "runs.csv")
    frame.loc[frame.mech == "ldp", "mi_ap"] = 0.99  # a leak the gate must catch
    frame.loc[frame.mech == "none", "acc"] = 0.0
    frame.to_csv(doctored / "runs.csv", index=False)
    assert main(["check", "--thresholds", str(thresholds), str(doctored)]) == 1
    out = capsys.readouterr().out
    assert "motionsense  ldp   εᵢ=1" in out and "max_mi_ap" in out
    floor = next(
        e for e in doc["entries"] if e["mech"] == "none" and e["attack"] == "reconstruction"
    )["min_acc"]
    if floor is None:  # a tiny run's baseline near chance: its floor is dropped, not checked
        assert "FAILED: 1 violation(s)" in out
    else:
        assert "min_acc" in out and "FAILED: 2 violation(s)" in out
    assert math.isclose(next(e for e in doc["entries"] if e["mech"] == "ldp")["param_value"], 1.0)
