"""A release's report is a release report: nothing of a sweep's, rewritten identically by
``benchmark.py report OUT``, the same from Python as from the command; runs.csv carries the DCR
verdict and the release's own utility_valid; the API's result reads as a table, a summary and
a short repr."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from torch import nn

import benchmark
from audit.release import ExternalModel, ReleaseAttackConfig, attack_arrays
from audit.release.release_summary import THREAT_ORDER, _worst_from_scores, cell_scores
from audit.results import claim_run, collect_rows
from audit.rows.derived import accuracy_valid as utility_valid
from audit.rows.derived import add_derived_columns
from audit.sweep.runner import SweepResult
from tests.audit.fakes import cell_config

#: Text of the sweep's report that a release report must not carry.
SWEEP_ONLY = (
    "Raise --gen-records",
    "--epochs",
    "How ε was computed",
    "scores.npz",
    "Sweet spots",
    "sweet spot",
    "φ",
)


def _images(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.random((n, 1, 8, 8)).astype(np.float32)


def _arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    members = _images(rng, 24)
    noisy = np.clip(members + rng.normal(0, 0.05, members.shape), 0, 1).astype(np.float32)
    return {
        "members": members,
        "non-members": _images(rng, 24),
        "reference": _images(rng, 30),
        "samples": np.concatenate([noisy, _images(rng, 6)]),  # leaky samples: DCR fails
    }


def _files(tmp_path: Path, arrays: dict[str, np.ndarray]) -> dict[str, Path]:
    paths = {}
    for name, x in arrays.items():
        paths[name] = tmp_path / f"{name}.npz"
        np.savez(paths[name], X=x)
    return paths


def _argv(files: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "attack",
        "--no-progress",
        "--members",
        str(files["members"]),
        "--non-members",
        str(files["non-members"]),
        "--reference",
        str(files["reference"]),
        "--samples",
        str(files["samples"]),
        "--attack-samples",
        "2",
        "--out",
        str(out),
        *extra,
    ]


def _sections(text: str) -> dict[str, str]:
    """The report's sections by heading (``#``, ``##`` and ``###``), each with its text."""
    parts = re.split(r"(?m)^(#{1,3} .*)$", text)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def _empty_tables(text: str) -> list[str]:
    """Header lines of Markdown tables with no row under their separator."""
    lines = text.splitlines()
    return [
        lines[i - 1]
        for i, line in enumerate(lines)
        if line.startswith("|---") and not (i + 1 < len(lines) and lines[i + 1].startswith("|"))
    ]


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> tuple[Path, str]:
    """A samples-only release audited by the command: (its --out, its report.md's text)."""
    tmp = tmp_path_factory.mktemp("release")
    out = tmp / "out"
    assert benchmark.main(_argv(_files(tmp, _arrays()), out)) == 0
    return out, (out / "report" / "report.md").read_text()


def test_a_release_report_has_no_sweep_text_and_no_empty_table(release) -> None:
    out, text = release
    assert [s for s in SWEEP_ONLY if s in text] == []
    assert _empty_tables(text) == []
    assert text.startswith("# Attacks on the release samples\n")  # named after --samples
    for heading in ("### At a glance (one line per threat model)", "### Every attack result"):
        assert heading in text
    assert "DCR **fails**" in text and "**Utility.** Not measured" in text
    figures = re.findall(r"!\[[^]]*\]\(([^)]+)\)", text)
    assert len(figures) == 1 and (out / "report" / figures[0]).is_file()
    html = (out / "report" / "report.html").read_text()
    assert "data:image/png;base64," in html and "<table>" in html


def test_report_command_rewrites_every_section_identically(release, tmp_path) -> None:
    out, before = release
    (out / "report" / "report.md").unlink()
    assert benchmark.main(["report", str(out)]) == 0
    after = (out / "report" / "report.md").read_text()
    assert list(_sections(after)) == list(_sections(before))
    assert _sections(after) == _sections(before)
    assert after == before
    other = tmp_path / "elsewhere"
    assert benchmark.main(["report", str(out), "--out", str(other), "--format", "png"]) == 0
    assert (other / "report.md").read_text() == before  # nothing in it names the folder


def test_runs_csv_carries_the_dcr_verdict_and_the_api_reads_the_same_rows(release) -> None:
    out, _ = release
    csv = pd.read_csv(out / "runs.csv")
    assert set(csv["dcr_passes"]) == {False}
    assert (csv["dcr_samples"] == 30).all() and (csv["dcr_p_value"] < 0.05).all()
    assert (
        (csv["dcr_share"] > csv["dcr_expected_share"]) & (csv["dcr_expected_share"] == 0.5)
    ).all()
    assert csv["utility_valid"].isna().all()  # no --test: unknown, not False
    arrays = _arrays()
    attacked = attack_arrays(
        (arrays["members"], None),
        (arrays["non-members"], None),
        reference=(arrays["reference"], None),
        samples=(arrays["samples"], None),
        config=ReleaseAttackConfig(name="samples", attack_samples=2),
    )
    mine, disk = attacked.table().drop(columns="wall_s"), collect_rows(out).drop(columns="wall_s")
    pd.testing.assert_frame_equal(mine, disk, check_dtype=False)


def test_the_api_with_out_writes_the_command_s_report(release, tmp_path) -> None:
    _, text = release
    arrays = _arrays()
    attack_arrays(
        (arrays["members"], None),
        (arrays["non-members"], None),
        reference=(arrays["reference"], None),
        samples=(arrays["samples"], None),
        config=ReleaseAttackConfig(name="samples", attack_samples=2),
        out=tmp_path / "api",
    )
    assert (tmp_path / "api" / "report" / "report.md").read_text() == text
    assert (tmp_path / "api" / "report" / "report.html").is_file()


def test_summary_one_line_per_threat_model_and_a_short_repr(tmp_path) -> None:
    """A decoder release: the samples-only line is over the sample attacks alone (its held-out
    worst case computed again from the scores), the decoder line is the cell's own worst case;
    computed again from the scores over every attack it is the same."""
    rng = np.random.default_rng(1)
    net = nn.Sequential(nn.Linear(3, 64), nn.Sigmoid())
    model = ExternalModel(decode=lambda z: net(z).view(-1, 1, 8, 8), latent_dim=3)
    attacked = attack_arrays(
        (_images(rng, 20), None),
        (_images(rng, 20), None),
        reference=(_images(rng, 30), None),
        model=model,
        config=ReleaseAttackConfig(name="tiny decoder", attack_samples=2),
        out=tmp_path,
    )
    summary = attacked.summary()
    assert list(summary["threat_model"]) == list(THREAT_ORDER[:2])
    samples_only, decoder = summary.iloc[0], summary.iloc[1]
    table = attacked.table()
    assert samples_only["attacks"] == (table["attacker_sees"] == THREAT_ORDER[0]).sum()
    assert decoder["attacks"] == len(table)
    assert decoder["worst_mi_ap"] == table["worst_mi_ap"].iloc[0]
    assert samples_only["worst_attack"].split(" ")[0] in {"monte-carlo", "domias"}
    assert (decoder["worst_members"], decoder["worst_nonmembers"]) == (10, 10)
    scores = cell_scores(tmp_path)(str(table["config_hash"].iloc[0]))
    again = _worst_from_scores(table, scores, seed=0)
    assert again["worst_mi_ap"] == decoder["worst_mi_ap"]
    assert again["worst_attack"] == decoder["worst_attack"]
    assert set(summary["verdict"]) <= {"at chance", "beyond chance"}
    assert summary["dcr_passes"].notna().all() and summary["utility_valid"].isna().all()
    text = repr(attacked)
    assert len(text) < 700 and text.count("\n") <= 5, text
    assert "tiny decoder" in text and "worst case" in text and "DCR" in text
    report = (tmp_path / "report" / "report.md").read_text()
    assert report.count("| samples only (") == 1 and report.count("| decoder only (") == 1


def test_utility_valid_is_the_release_s_accuracy_against_its_majority_rate() -> None:
    """Chance = max(1/#classes, the test labels' majority share), the sweep's binomial test."""
    assert utility_valid(acc=0.925, acc_base=0.1, acc_majority=0.115, n_test=400) is True
    # 10 classes but 60 % of the test records in one: 0.62 on 100 records is not above chance
    assert utility_valid(acc=0.62, acc_base=0.1, acc_majority=0.6, n_test=100) is False
    assert utility_valid(acc=0.75, acc_base=0.1, acc_majority=0.6, n_test=100) is True
    assert utility_valid(acc=float("nan"), acc_base=0.1, acc_majority=0.1, n_test=100) is None
    frame = pd.DataFrame(
        {
            "acc": [0.925, 0.925],
            "acc_base": [0.1, 0.1],
            "acc_majority": [0.115, 0.115],
            "n_test": [400, 400],
            "config_hash": ["r", "n"],
            "baseline_hash": ["", "gone"],  # a release has no baseline; a sweep row has one
            "mech": ["external", "none"],
            "mi_ap": [0.6, 0.6],
            "attack": ["reconstruction"] * 2,
            "distance": ["mse"] * 2,
            "variant": ["mean"] * 2,
        }
    )
    # the release is judged by its own accuracy; the sweep row by its baseline cell, which is
    # not among the rows: not valid, whatever its own accuracy
    assert list(add_derived_columns(frame)["utility_valid"]) == [True, False]


BAD_NAMES = {
    "two lines": "a\nb",
    "blank": "  ",
    "slash": "a/b",
    "too long": "x" * 81,
    "control character": "a\tb",
}


@pytest.mark.parametrize("case", sorted(BAD_NAMES))
def test_a_bad_name_is_one_line_status_2_and_nothing_on_disk(case, tmp_path, capsys) -> None:
    files = _files(tmp_path, {k: v[:12] for k, v in _arrays().items()})
    out = tmp_path / "out"
    assert benchmark.main(_argv(files, out, "--name", BAD_NAMES[case])) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --name") and "\n" not in err, err
    assert not out.exists()


def test_the_default_name_is_the_module_s_or_the_samples_stem() -> None:
    from audit.cli.attack_command import build_attack_parser, default_name

    def name(*extra: str) -> str:
        args = build_attack_parser().parse_args(
            ["--members", "m.npz", "--non-members", "n.npz", "--out", "o", *extra]
        )
        return default_name(args)

    assert name("--samples", "d/synthetic.npz") == "synthetic"
    assert name("--decoder", "path/to/my_vae.py:decoder", "--samples", "s.npz") == "my_vae"
    assert name("--vae", "pkg.models.faces:load") == "faces"


def test_an_out_holding_a_sweep_is_refused_and_left_as_it_was(tmp_path, capsys) -> None:
    files = _files(tmp_path, {k: v[:12] for k, v in _arrays().items()})
    out = tmp_path / "sweep"
    claim_run(out, [cell_config("none")])  # a sweep's run.json, no cell finished yet
    before = sorted(p.name for p in out.iterdir())
    assert benchmark.main(_argv(files, out)) == 2
    err = capsys.readouterr().err.strip()
    assert "holds a sweep's results" in err and "\n" not in err, err
    assert sorted(p.name for p in out.iterdir()) == before


def test_a_sweep_result_reads_as_a_table_a_summary_and_one_line(tmp_path) -> None:
    """No cell on disk: the summary takes every threat model's worst case from the rows where
    it is the cell's, and leaves a narrower one empty without the scores."""
    rows = []
    for seed in range(200):  # a big sweep: the repr stays one line
        for attack, sees, mi_ap in (
            ("monte-carlo", "samples only", 0.55),
            ("reconstruction", "encoder and decoder", 0.7),
        ):
            rows.append(
                dict(
                    dataset="digits",
                    mech="cdp",
                    param_name="noise_multiplier",
                    param_value=1.0,
                    seed=seed,
                    attack=attack,
                    distance="mse",
                    variant="mean",
                    attacker_sees=sees,
                    mi_ap=mi_ap,
                    mi_ap_low=mi_ap - 0.05,
                    mi_ap_high=mi_ap + 0.05,
                    worst_case=attack == "reconstruction",
                    worst_mi_ap=0.68,
                    worst_mi_ap_low=0.6,
                    worst_mi_ap_high=0.75,
                    worst_mi_ap_null_q95=0.62,
                    worst_beyond_chance=True,
                    attack_members=50,
                    attack_nonmembers=50,
                    acc=0.8,
                    acc_base=0.1,
                    acc_majority=0.11,
                    utility_valid=True,
                    config_hash=f"cell{seed}",
                )
            )
    frame = pd.DataFrame(rows)
    result = SweepResult(
        out=tmp_path, csv_path=tmp_path / "runs.csv", ran=3, reused=197, rows=frame
    )
    assert "\n" not in repr(result) and len(repr(result)) < 200
    pd.testing.assert_frame_equal(result.table(), frame)
    summary = result.summary()
    assert len(summary) == 400
    whole = summary[summary["threat_model"] == "encoder and decoder"]
    assert (whole["worst_mi_ap"] == 0.68).all() and (whole["verdict"] == "beyond chance").all()
    narrow = summary[summary["threat_model"] == "samples only"]
    assert narrow["worst_mi_ap"].isna().all() and (narrow["strongest_mi_ap"] == 0.55).all()


def _synthetic_rows(n: int) -> pd.DataFrame:
    views = list(THREAT_ORDER)
    return pd.DataFrame(
        {
            "attack": [f"attack{i}" for i in range(n)],
            "distance": ["pixel-l2"] * n,
            "variant": ["log-distance-calibrated-nonprivate"] * n,
            "attacker_sees": [views[i % 3] for i in range(n)],
            "mi_ap": np.linspace(0.45, 1.0, n),
            "mi_ap_low": np.linspace(0.4, 0.98, n),
            "mi_ap_high": np.linspace(0.5, 1.0, n),
            "mi_ap_null_q95": 0.56,
            "worst_case": [i == n - 1 for i in range(n)],
            "worst_mi_ap": 0.99,
            "worst_mi_ap_low": 0.97,
            "worst_mi_ap_high": 1.0,
            "worst_mi_ap_null_q95": 0.59,
            "attack_members": 51,
            "attack_nonmembers": 49,
        }
    )


@pytest.mark.parametrize("n", [1, 20])
def test_the_figure_keeps_every_text_on_the_canvas(n) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from audit.release.release_figures import release_mi_ap_by_attack

    fig = release_mi_ap_by_attack(
        _synthetic_rows(n), title="a release with a long name: MI AP per attack"
    )
    agg = FigureCanvasAgg(fig)
    agg.draw()
    renderer = agg.get_renderer()
    canvas = fig.bbox
    texts = [t for t in fig.findobj(lambda a: hasattr(a, "get_text")) if t.get_text().strip()]
    outside = [
        t.get_text()
        for t in texts
        if t.get_visible()
        and not (
            t.get_window_extent(renderer).x0 >= canvas.x0 - 1
            and t.get_window_extent(renderer).x1 <= canvas.x1 + 1
            and t.get_window_extent(renderer).y0 >= canvas.y0 - 1
            and t.get_window_extent(renderer).y1 <= canvas.y1 + 1
        )
    ]
    assert outside == []
    ax = fig.axes[0]
    assert ax.get_position().width > 1 / 3  # the plot is not squeezed by its labels
    assert len(fig.legends[0].get_texts()) <= 6


def test_report_refuses_a_folder_mixing_a_sweep_and_releases(release, tmp_path, capsys) -> None:
    import shutil

    out, _ = release
    mixed = tmp_path / "mixed"
    shutil.copytree(out / "cells", mixed / "cells")
    cell = next((mixed / "cells").iterdir())
    sweep_cell = mixed / "cells" / "0000000000000000"
    shutil.copytree(cell, sweep_cell)
    config = (sweep_cell / "config.json").read_text().replace('"external"', '"none"')
    (sweep_cell / "config.json").write_text(config)
    assert benchmark.main(["report", str(mixed)]) == 2
    err = capsys.readouterr().err.strip()
    assert "both a sweep's cells and attacked releases" in err and "\n" not in err
    assert not (mixed / "report").exists()
