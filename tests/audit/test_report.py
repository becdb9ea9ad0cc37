"""The report: figures in every format, sweet spots with a known answer, t-intervals over seeds."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from audit import io
from audit.config import PROFILES, CellConfig, MechanismName, ProfileName
from audit.metrics import phi_score
from audit.report import (
    CURVE_GRID,
    load_runs,
    pr_on_grid,
    roc_on_grid,
    setting_summary,
    sweet_spots,
    write_report,
)
from audit.stats import column_intervals, t_interval
from benchmark import main
from models.vae import ConditionalConvVAE

SEEDS = (0, 1, 2)
JITTER = (-0.01, 0.0, 0.01)  # per-seed offsets: the mean over seeds is the centre exactly
# (mech, param_name, value, epsilon, MI AP mse, MI AP ssim, acc): centres over seeds.
SETTINGS = [
    ("none", "none", math.nan, math.inf, 0.80, 0.85, 0.80),
    ("cdp", "noise_multiplier", 0.1, 100.0, 0.70, 0.74, 0.70),
    ("cdp", "noise_multiplier", 1.0, 5.0, 0.56, 0.59, 0.60),
    ("cdp", "noise_multiplier", 4.0, 1.0, 0.51, 0.53, 0.45),
    # MSE alone would pass 0.55 and 0.6; the attack's power is the max over distances (SSIM).
    ("ldp", "eps_i", 1000.0, 3000.0, 0.50, 0.62, 0.72),
    ("ldp", "eps_i", 100.0, 300.0, 0.56, 0.57, 0.40),
    ("vae-ldp", "sigma", 1.0, 50.0, 0.55, 0.58, 0.65),
    ("vae-ldp", "sigma", 10.0, 5.0, 0.50, 0.52, 0.66),
]
# limit -> mech -> the label of the best qualifying setting (None: none qualifies).
EXPECTED_SPOTS = {
    0.55: {"none": None, "cdp": "z=4", "ldp": None, "vae-ldp": "σ=10"},
    0.6: {"none": None, "cdp": "z=1", "ldp": "εᵢ=100", "vae-ldp": "σ=10"},
    0.75: {"none": None, "cdp": "z=0.1", "ldp": "εᵢ=1000", "vae-ldp": "σ=10"},
}


def _hash(mech: str, value: float, seed: int) -> str:
    return f"{mech}-{value:g}-{seed}".replace(".", "p")


def synthetic_runs(seeds=SEEDS, settings=SETTINGS) -> pd.DataFrame:
    """runs.csv rows for several mechanisms and seeds; phi from the real formula."""
    rows = []
    for i, seed in enumerate(seeds):
        jitter = JITTER[i] if len(seeds) == len(JITTER) else 0.0
        base = settings[0]
        for mech, pname, value, eps, mse, ssim, acc in settings:
            for distance, mi in (("mse", mse), ("ssim", ssim)):
                base_mi = base[4] if distance == "mse" else base[5]
                phi = (
                    math.nan
                    if mech == "none"
                    else phi_score(
                        atk_orig=base_mi + jitter,
                        atk=mi + jitter,
                        acc_orig=base[6] + jitter,
                        acc=acc + jitter,
                        acc_base=0.5,
                    )
                )
                rows.append(
                    {
                        "dataset": "lfw-subset",
                        "mech": mech,
                        "param_name": pname,
                        "param_value": value,
                        "seed": seed,
                        "distance": distance,
                        "profile": "quick",
                        "mi_ap": mi + jitter,
                        "mi_auc": mi + jitter,
                        "acc": acc + jitter,
                        "acc_base": 0.5,
                        "acc_real": 0.85,
                        "epsilon": eps,
                        "delta": 0.01,
                        "epsilon_method": "synthetic",
                        "accountant": "test",
                        "phi": phi,
                        "config_hash": _hash(mech, value, seed),
                        "code_version": "test",
                    }
                )
    return pd.DataFrame(rows)


def write_runs(run_dir: Path, frame: pd.DataFrame) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    frame.to_csv(run_dir / "runs.csv", index=False)
    return run_dir


def write_scores(run_dir: Path, frame: pd.DataFrame, n: int = 40) -> None:
    """cells/<hash>/scores.npz in the pipeline's format: is_member + scores_<distance>."""
    for h, group in frame.groupby("config_hash"):
        rng = np.random.default_rng(abs(hash(h)) % 2**32)
        is_member = np.repeat([True, False], n // 2)
        arrays = {
            f"scores_{r.distance}": rng.normal(size=n) + 4 * (r.mi_ap - 0.5) * is_member
            for r in group.itertuples()
        }
        (run_dir / "cells" / h).mkdir(parents=True)
        np.savez(
            run_dir / "cells" / h / "scores.npz", schema_version=1, is_member=is_member, **arrays
        )


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
    assert sorted(p.suffix for p in (tmp_path / "r").iterdir()) == [".md"] + [".png"] * 3
    assert "WARNING audit.report" in err and "no cell holds scores.npz" in err  # logged


def test_sweet_spots_pick_the_most_accurate_setting_under_each_limit(tmp_path):
    frame = load_runs(write_runs(tmp_path, synthetic_runs()))
    spots = sweet_spots(setting_summary(frame), limits=tuple(EXPECTED_SPOTS))
    got = {limit: {} for limit in EXPECTED_SPOTS}
    for r in spots.itertuples():
        got[r.limit][r.mech] = r.param_label if r.qualifies else None
    assert got == EXPECTED_SPOTS


def test_sweet_spot_table_in_the_markdown(reported):
    section = _markdown(reported).split("### Sweet spots")[1].split("### Figures")[0]
    lines = [line for line in section.splitlines() if line.startswith("| 0.")]
    assert len(lines) == 12
    for limit, per_mech in EXPECTED_SPOTS.items():
        for mech, label in per_mech.items():
            want = label if label is not None else "no setting qualifies"
            assert any(line.startswith(f"| {limit:g} | {mech} | {want} |") for line in lines), (
                limit,
                mech,
                want,
            )


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
    row = next(line for line in lines if line.startswith("| lfw-subset | cdp | z=1 |"))
    assert f"| {mse_mean:.3f} ± {mse_hw:.3f} | {ssim_mean:.3f} ± {ssim_hw:.3f} |" in row
    assert f"| {acc_mean:.3f} ± {acc_hw:.3f} |" in row
    assert acc_hw == pytest.approx(stats.t.ppf(0.975, 2) * 0.01 / 3**0.5)  # sd of (-.01, 0, .01)
    summary = setting_summary(load_runs(reported)).set_index("param_label")
    assert summary.loc["z=1", "acc"] == pytest.approx(acc_mean)
    assert summary.loc["z=1", "acc_hw"] == pytest.approx(acc_hw)
    assert summary.loc["z=1", "attack_power"] == pytest.approx(ssim_mean)  # max over distances


def test_a_single_seed_shows_no_interval(tmp_path):
    run_dir = write_runs(tmp_path, synthetic_runs(seeds=(0,)))
    text = write_report(run_dir, formats=("png",), images=False).markdown.read_text()
    assert "±" not in text.split("### Results")[1].split("### Sweet spots")[0]
    assert math.isnan(t_interval([0.7]).half_width) and t_interval([0.7]).format() == "0.700"


def test_t_interval_edge_cases_and_vectorised_form():
    assert t_interval([]).format() == "n/a"
    assert t_interval([math.nan, 0.5, 0.7]).n == 2  # NaN (undefined phi) is ignored
    assert t_interval([math.inf, math.inf]).format() == "∞"
    samples = np.random.default_rng(0).random((4, 7))
    mean, hw = column_intervals(samples)
    for j in range(7):
        ref = t_interval(samples[:, j])
        assert (mean[j], hw[j]) == pytest.approx((ref.mean, ref.half_width))


def test_curves_on_the_grid_match_sklearn_at_their_knots():
    """ROC interpolation passes through sklearn's points; interpolated precision is the best
    precision at any recall >= r (the naive definition, evaluated point by point)."""
    from sklearn.metrics import precision_recall_curve, roc_curve

    rng = np.random.default_rng(1)
    is_member = np.repeat([True, False], 25)
    scores = rng.normal(size=50) + is_member
    fpr, tpr, _ = roc_curve(is_member, scores)
    grid_tpr = roc_on_grid(scores, is_member)
    for f, t in zip(fpr, tpr, strict=True):
        hits = np.isclose(CURVE_GRID, f)
        assert not hits.any() or t <= grid_tpr[hits][0] + 1e-12
    precision, recall, _ = precision_recall_curve(is_member, scores)
    naive = [precision[recall >= r].max() for r in CURVE_GRID]
    np.testing.assert_allclose(pr_on_grid(scores, is_member), naive)


TINY = replace(PROFILES[ProfileName.QUICK], epochs=1, max_train=30, latent_dim=4)


def _real_cell(run_dir: Path, mech: MechanismName, pname: str, value: float | None) -> str:
    """A cell directory as the sweep writes it, with an untrained digits VAE."""
    cell = CellConfig("digits", mech, pname, value, 0, TINY, (("profile_name", "quick"),))
    cell_dir = run_dir / "cells" / cell.config_hash
    io.write_json(cell_dir / "config.json", {"config": cell.canonical(), "hash": cell.config_hash})
    model = ConditionalConvVAE(channels=1, height=8, width=8, num_classes=10, latent_dim=4)
    io.save_state(cell_dir / "model.pt", {"model": model.state_dict()})
    return cell.config_hash


def test_image_grids_from_saved_models(tmp_path):
    frame = synthetic_runs(seeds=(0,), settings=SETTINGS[:3]).assign(dataset="digits", acc_base=0.1)
    run_dir = tmp_path / "run"
    hashes = {
        "none": _real_cell(run_dir, MechanismName.NONE, "none", None),
        "cdp-0.1": _real_cell(run_dir, MechanismName.CDP, "noise_multiplier", 0.1),
        "cdp-1": _real_cell(run_dir, MechanismName.CDP, "noise_multiplier", 1.0),
    }
    frame["config_hash"] = [
        hashes["none"] if m == "none" else hashes[f"cdp-{v:g}"]
        for m, v in zip(frame.mech, frame.param_value, strict=True)
    ]
    (run_dir / "cells" / hashes["cdp-1"] / "model.pt").write_bytes(b"not a model")
    report = write_report(write_runs(run_dir, frame))
    names = {p.name for p in report.figures}
    assert {"digits-quick-reconstructions_cdp.png", "digits-quick-samples_cdp.pdf"} <= names
    assert any(hashes["cdp-1"] in s and "image grids" in s for s in report.skipped)


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


def test_samples_grid_shows_every_class(tmp_path, monkeypatch):
    """The grid drew 2 * 4 samples, so digits showed classes 0-7 only."""
    from matplotlib.figure import Figure

    import audit.report_grids as grids

    titles: dict[str, list[str]] = {}

    def record(rows, *, column_titles, title):
        titles[title] = list(column_titles)
        return Figure()

    monkeypatch.setattr(grids, "image_grid", record)
    frame = synthetic_runs(seeds=(0,), settings=SETTINGS[:2]).assign(dataset="digits", acc_base=0.1)
    run_dir = tmp_path / "run"
    hashes = {
        "none": _real_cell(run_dir, MechanismName.NONE, "none", None),
        "cdp": _real_cell(run_dir, MechanismName.CDP, "noise_multiplier", 0.1),
    }
    frame["config_hash"] = [hashes["none" if m == "none" else "cdp"] for m in frame.mech]
    write_report(write_runs(run_dir, frame), formats=("png",))
    (samples,) = [t for t in titles if "generated samples" in t]
    assert set(titles[samples]) == {str(c) for c in range(10)}
    assert "latent code ~ N(0, I)" in samples and "noise multiplier z" in samples


def test_a_baseline_at_chance_is_said_not_hidden(tmp_path):
    """A baseline not above chance: no phi, no sweet spots, and the report says why."""
    frame = synthetic_runs().assign(utility_valid=False, n_test=60, acc=0.5, phi=math.nan)
    report = write_report(write_runs(tmp_path, frame), images=False, formats=("png",))
    text = report.markdown.read_text()
    assert "not above chance" in text and "binomial test" in text
    assert "no setting qualifies" not in text and "none qualifies" not in text
    assert not any(p.stem.endswith("phi") for p in report.figures)
    assert any("phi figure skipped" in s and "not above chance" in s for s in report.skipped)
