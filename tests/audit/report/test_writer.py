"""The report end to end: figures in every format, report.md's tables and intervals, what is
skipped, and the command line's errors."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from audit.report import write_report
from audit.report.stats import t_interval
from audit.report.summaries import load_runs, setting_summary
from benchmark import main

from .synthetic import EXPECTED_SPOTS, synthetic_runs, write_runs, write_scores

FIGURES = (
    "accuracy_vs_epsilon",
    "mi_ap_vs_epsilon",
    "phi",
    "attack_curves_mse",
    "attack_curves_ssim",
)


@pytest.fixture(scope="module")
def reported(tmp_path_factory) -> Path:
    """One full report of the synthetic sweep, through the CLI: 3 seeds, 4 mechanisms, scores in
    every cell but ldp's, no model.pt anywhere."""
    frame = synthetic_runs()
    run_dir = write_runs(tmp_path_factory.mktemp("synthetic"), frame)
    write_scores(run_dir, frame[frame.mech != "ldp"])
    assert main(["report", str(run_dir)]) == 0
    return run_dir


def _markdown(run_dir: Path) -> str:
    return (run_dir / "report" / "report.md").read_text()


def test_report_writes_every_figure_in_both_formats_and_the_markdown(reported):
    for stem in FIGURES:
        for fmt in ("png", "pdf"):
            path = reported / "report" / f"lfw-subset-quick-{stem}.{fmt}"
            assert path.is_file() and path.stat().st_size > 1000, path
    text = _markdown(reported)
    assert "![lfw-subset-quick-mi_ap_vs_epsilon](lfw-subset-quick-mi_ap_vs_epsilon.png)" in text


def test_missing_inputs_are_listed_not_silent(reported):
    skipped = _markdown(reported).split("## Skipped")[1]
    assert "6 of 24 cell(s) have no readable scores.npz" in skipped  # ldp's curves left out
    assert "no cell directory with model.pt for seed 0; image grids skipped" in skipped
    assert not list((reported / "report").glob("*reconstructions*"))


def test_report_out_dir_and_format_options(tmp_path, capsys):
    run_dir = write_runs(tmp_path / "run", synthetic_runs(seeds=(0,)))
    argv = ["report", str(run_dir), "--out", str(tmp_path / "r"), "--format", "png"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert f"report written to {tmp_path / 'r' / 'report.md'}" in out
    # the recommendation, one line per limit (synthetic seed 0: vae-ldp σ=10 under every limit)
    lines = [line for line in out.splitlines() if line.startswith("recommended: ")]
    assert len(lines) == 3 and "MI AP <= 0.55: vae-ldp σ=10 (epsilon 5," in lines[0]
    suffixes = sorted(p.suffix for p in (tmp_path / "r").iterdir())
    # the frontier, accuracy, MI AP and phi figures, report.md, report.html, sweet_spots.csv
    assert suffixes == [".csv", ".html", ".md"] + [".png"] * (suffixes.count(".png"))
    assert (tmp_path / "r" / "lfw-subset-quick-frontier.png").is_file()
    assert "WARNING audit.report" in err and "no cell holds scores.npz" in err  # logged


def test_sweet_spot_table_in_the_markdown_and_its_csv(reported):
    section = _markdown(reported).split("### Sweet spots")[1].split("### Figures")[0]
    lines = [line for line in section.splitlines() if line.startswith("| 0.")]
    assert len(lines) == 12
    for limit, per_mech in EXPECTED_SPOTS.items():
        for mech, label in per_mech.items():
            want = f"**{label}**" if label is not None else "none qualifies"
            assert any(line.startswith(f"| {limit:g} | {mech} | {want} |") for line in lines), (
                limit,
                mech,
                want,
            )
    csv = pd.read_csv(reported / "report" / "sweet_spots.csv", keep_default_na=False)
    assert len(csv) == 12
    chosen = {(r.limit, r.mech): r.setting or None for r in csv.itertuples()}
    assert chosen == {(x, m): s for x, spots in EXPECTED_SPOTS.items() for m, s in spots.items()}


def test_the_report_opens_with_the_recommendation_and_the_frontier(reported):
    text = _markdown(reported)
    head = text.split("## lfw-subset, profile quick")[0]
    assert head.index("## Recommendation") < head.index("frontier.png")
    assert "- **MI AP ≤ 0.75: ldp εᵢ=1000** (ε = 3000, δ = 0.01)" in head
    # delta 0.01 of |D_train| unknown (no n_train column): no delta note without the size
    html = (reported / "report" / "report.html").read_text()
    assert html.index("Recommendation") < html.index("data:image/png;base64,")
    assert 'src="lfw' not in html and "http" not in html.split("<body>")[1]


def test_a_large_delta_is_said_out_loud(tmp_path):
    frame = synthetic_runs(seeds=(0,)).assign(n_train=50, delta=0.02)
    frame.loc[frame.mech == "none", "delta"] = 0.0
    text = write_report(
        write_runs(tmp_path, frame), formats=("png",), images=False
    ).markdown.read_text()
    about = text.split("### About δ")[1].split("## ")[0]
    assert "**cdp: δ = 0.02 with |D_train| = 50.**" in about
    assert "about 1 record(s)" in about and "`--delta" in about
    assert "**ldp:" in about and "fixed by its accounting" in about  # ldp takes no --delta
    methods = text.split("## How ε was computed")[1]
    assert "| δ·|D_train| |" in methods.replace("\\|", "|")
    small = write_report(
        write_runs(tmp_path / "small", frame.assign(delta=1e-5)), formats=("png",), images=False
    ).markdown.read_text()
    assert "### About δ" not in small


def _by_hand(values: list[float]) -> tuple[float, float]:
    """Mean and 95 % t half-width with scipy.stats.t directly."""
    n = len(values)
    return float(np.mean(values)), stats.t.ppf(0.975, n - 1) * np.std(values, ddof=1) / n**0.5


def test_means_and_95pct_t_intervals_match_scipy(reported):
    frame = synthetic_runs()
    cdp = frame[(frame.mech == "cdp") & (frame.param_value == 1.0)]
    acc_mean, acc_hw = _by_hand(cdp[cdp.distance == "mse"].acc.tolist())
    mse_mean, mse_hw = _by_hand(cdp[cdp.distance == "mse"].mi_ap.tolist())
    ssim_mean, ssim_hw = _by_hand(cdp[cdp.distance == "ssim"].mi_ap.tolist())
    lines = _markdown(reported).splitlines()
    # the per-attack table: one row per attack result; the compact table: accuracy per setting
    mse = next(line for line in lines if line.startswith("| cdp | z=1 | mse |"))
    ssim = next(line for line in lines if line.startswith("| cdp | z=1 | ssim |"))
    assert f"| {mse_mean:.3f} ± {mse_hw:.3f} |" in mse
    assert f"| {ssim_mean:.3f} ± {ssim_hw:.3f} |" in ssim
    head = next(line for line in lines if line.startswith("| cdp | z=1 |") and "majority" in line)
    assert f"| {acc_mean:.3f} ± {acc_hw:.3f} (majority" in head
    assert acc_hw == pytest.approx(stats.t.ppf(0.975, 2) * 0.01 / 3**0.5)  # sd of (-.01, 0, .01)
    summary = setting_summary(load_runs(reported)).set_index("param_label")
    assert summary.loc["z=1", "acc"] == pytest.approx(acc_mean)
    assert summary.loc["z=1", "acc_hw"] == pytest.approx(acc_hw)
    assert summary.loc["z=1", "attack_power"] == pytest.approx(ssim_mean)  # max over distances


def test_a_single_seed_shows_no_interval(tmp_path):
    run_dir = write_runs(tmp_path, synthetic_runs(seeds=(0,)))
    text = write_report(run_dir, formats=("png",), images=False).markdown.read_text()
    assert "±" not in text.split("### At a glance")[1].split("### Sweet spots")[0]
    assert math.isnan(t_interval([0.7]).half_width) and t_interval([0.7]).format() == "0.700"


def test_bad_input_is_one_error_line(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    write_runs(tmp_path, synthetic_runs().drop(columns=["mi_ap"]))
    assert main(["report", str(tmp_path)]) == 2
    assert "lacks column(s) ['mi_ap']" in capsys.readouterr().err
    assert main(["report", str(tmp_path), "--format", "gif"]) == 2


def test_bad_limits_are_refused(tmp_path, capsys):
    run_dir = write_runs(tmp_path, synthetic_runs())
    assert main(["report", str(run_dir), "--limits", "0.6", "1.5", "--no-images"]) == 2
    assert "MI AP limits must lie in (0, 1], got [0.6, 1.5]" in capsys.readouterr().err


def test_a_baseline_at_chance_is_said_not_hidden(tmp_path):
    """A baseline not above chance: no phi, no sweet spots, and the report says why."""
    frame = synthetic_runs().assign(utility_valid=False, n_test=60, acc=0.5, phi=math.nan)
    report = write_report(write_runs(tmp_path, frame), images=False, formats=("png",))
    text = report.markdown.read_text()
    assert "not above chance" in text and "binomial test" in text
    assert "no setting qualifies" not in text and "none qualifies" not in text
    head = text.split("## Recommendation")[1].split("\n## ")[0]
    assert "No recommendation: the non-private baseline's accuracy (0.500) is not above" in head
    spots = pd.read_csv(report.sweet_spots, keep_default_na=False)
    assert (spots["setting"] == "").all() and spots["reason"].str.startswith("not computed").all()
    assert not any(p.stem.endswith("phi") for p in report.figures)
    assert any("phi figure skipped" in s and "not above chance" in s for s in report.skipped)


def _audited(frame):
    """``--canary-audit`` columns: private cells bounded at 40 % of their claim, baseline not."""
    private = frame["mech"] != "none"
    return frame.assign(
        epsilon_lower=np.where(private, 0.4 * frame["epsilon"], math.nan),
        epsilon_lower_kind=np.where(private, "local-worst-case", ""),
        epsilon_lower_m=np.where(private, 10**4, 0),
        epsilon_lower_ceiling=np.where(private, 9.0, math.nan),
    )


def test_audited_runs_get_the_claim_vs_bound_figure_and_table(tmp_path):
    run_dir = write_runs(tmp_path, _audited(synthetic_runs(seeds=(0,))))
    report = write_report(run_dir, formats=("png",), images=False)
    figure = report.out_dir / "lfw-subset-quick-claim_vs_bound.png"
    assert figure in report.figures and figure.stat().st_size > 1000
    text = report.markdown.read_text()
    table = text.split("### Claimed ε vs empirical lower bound")[1].split("###")[0]
    assert "| local-worst-case | 10000 | 9 |" in table
    assert "| none |" not in table


def test_runs_without_audits_get_no_claim_vs_bound(tmp_path):
    report = write_report(
        write_runs(tmp_path, synthetic_runs(seeds=(0,))), formats=("png",), images=False
    )
    assert not any("claim_vs_bound" in p.name for p in report.figures)
    assert "Claimed ε vs empirical lower bound" not in report.markdown.read_text()


def test_a_killed_reports_temporary_files_are_removed_by_the_next_report(tmp_path):
    """A report killed mid-write (SIGTERM, SIGKILL: no ``finally`` runs) leaves ``io``'s
    ``.NAME.XXXXXXXX.tmp`` files; the next report removes its own and leaves others' alone."""
    run_dir = write_runs(tmp_path / "run", synthetic_runs(seeds=(0,)))
    folder = run_dir / "report"
    folder.mkdir()
    stale = [folder / ".report.md.a1b2c3d4.tmp", folder / ".x-phi.png.a1b2c3d4.tmp"]
    foreign = [folder / ".runs.csv.a1b2c3d4.tmp", folder / "notes.tmp"]
    for path in stale + foreign:
        path.write_text("half written")
        os.utime(path, (time.time() - 60, time.time() - 60))
    write_report(run_dir, formats=("png",), images=False)
    assert [p for p in stale if p.exists()] == []
    assert all(p.exists() for p in foreign)
