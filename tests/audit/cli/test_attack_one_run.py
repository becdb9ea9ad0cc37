"""``benchmark.py attack``: one release attack per ``--out`` (issue 40). Other inputs into a folder
holding an attack are refused before any work, in one line naming what differs, with nothing
written; the same inputs again are accepted; the release cell's files, its ``dcr.json`` among
them, are checked against the digests ``run.json`` recorded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import benchmark
from audit.release import release_attack
from tests.audit.release.test_release_report import _argv, _arrays, _files


@pytest.fixture(scope="module")
def attacked(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    """A samples release attacked into its --out: (the --out, the record files)."""
    tmp = tmp_path_factory.mktemp("one-run")
    files = _files(tmp, _arrays())
    out = tmp / "out"
    assert benchmark.main(_argv(files, out)) == 0
    return out, files


@pytest.fixture
def out(attacked, tmp_path) -> Path:
    """A copy of the attacked folder for one case."""
    copy = tmp_path / "out"
    shutil.copytree(attacked[0], copy)
    return copy


def _snapshot(out: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(out)): (p.stat().st_size, p.stat().st_mtime_ns) for p in out.rglob("*")
    }


def _no_attack(*args, **kwargs):
    raise AssertionError("an attack ran before the --out was checked")


def _other_samples(tmp_path: Path) -> Path:
    other = _arrays(seed=1)["samples"]
    path = tmp_path / "other-samples.npz"
    np.savez(path, X=other)
    return path


@pytest.mark.parametrize(
    "change, named",
    [
        ("samples", "--samples differs"),
        ("seed", "seed: 0 vs 1"),
        ("attack-samples", "attack_samples: 2 vs 3"),
        ("name", 'name: "samples" vs "other"'),
    ],
)
def test_other_inputs_into_an_attacked_out_are_refused_before_any_work(
    change, named, attacked, out, tmp_path, monkeypatch, capsys
) -> None:
    files = dict(attacked[1])
    extra: list[str] = []
    if change == "samples":
        files["samples"] = _other_samples(tmp_path)
    elif change == "seed":
        extra = ["--seed", "1"]
    elif change == "attack-samples":
        extra = ["--attack-samples", "3"]  # the later flag wins over _argv's 2
    else:
        extra = ["--name", "other"]
    monkeypatch.setattr(release_attack, "run_release_attacks", _no_attack)
    before = _snapshot(out)
    capsys.readouterr()
    assert benchmark.main(_argv(files, out, *extra)) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: --out {str(out)!r} holds the attack on another release")
    assert named in line and "one --out holds one release attack" in line, line
    assert _snapshot(out) == before


def test_the_same_inputs_again_are_accepted_and_give_the_same_rows(attacked, out, tmp_path) -> None:
    """The same arrays (here from copies of the files, under other names) and options: the
    attack runs again and replaces its cell with the same rows (every draw is seeded)."""
    rows = pd.read_csv(out / "runs.csv").drop(columns=["wall_s"])
    copies = {}
    for name, path in attacked[1].items():
        copies[name] = tmp_path / f"copy-{path.name}"
        shutil.copyfile(path, copies[name])
    assert benchmark.main(_argv(copies, out, "--name", "samples")) == 0
    assert len(list((out / "cells").iterdir())) == 1
    pd.testing.assert_frame_equal(pd.read_csv(out / "runs.csv").drop(columns=["wall_s"]), rows)


def test_an_edited_dcr_json_is_refused_then_replaced_by_the_same_attack(attacked, out, capsys):
    (cell,) = (out / "cells").iterdir()
    dcr = cell / "dcr.json"
    original = json.loads(dcr.read_text())
    edited = {**original, "p_value": 0.5}
    dcr.write_text(json.dumps(edited, indent=2) + "\n")
    shutil.rmtree(out / "report")
    before = _snapshot(out)
    capsys.readouterr()
    assert benchmark.main(["report", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {dcr} does not match the SHA-256"), line
    assert _snapshot(out) == before
    assert benchmark.main(_argv(attacked[1], out)) == 0  # the same attack: accepted, rewritten
    assert json.loads(dcr.read_text()) == original
    assert benchmark.main(["report", str(out)]) == 0


def test_a_folder_with_cells_but_no_record_of_their_inputs_is_refused(out, attacked, capsys):
    """Cells without a run.json (older code, or run.json deleted): no attack can be matched to
    them, so none is added."""
    (out / "run.json").unlink()
    before = _snapshot(out)
    assert benchmark.main(_argv(attacked[1], out)) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "holds results without a record of the release they attacked" in line, line
    assert _snapshot(out) == before
