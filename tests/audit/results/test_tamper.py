"""Tamper evidence (issue 40): every file kind a sweep stores, edited by one value, is refused by
``report`` and ``check`` in one line naming it (exit 2, nothing written) and computed again by the
next sweep, whose values equal the originals; ``run.json`` itself is sealed."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from audit import io, results
from audit.sweep.runner import run_sweep
from benchmark import main
from tests.audit.sweep.test_runner import TINY, _config

#: Columns a recomputed cell need not repeat: its wall time, the checkout it ran from, and its
#: notes (which say how long the reference models took and whether they came from the cache).
UNREPEATABLE = ["wall_s", "code_version", "privacy_notes"]


def _sweep_config(out: Path, **kw):
    """One digits cell (mech none, seed 0) of the tiny profile whose attack reads reference
    models, so the run stores every file kind: the cell's, the acc_real cache and the
    reference-model cache."""
    return _config(out, profile=replace(TINY, gen_records=40), attacks=("likelihood",), **kw)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tamper") / "run"
    run_sweep(_sweep_config(out))
    return out


@pytest.fixture
def run(pristine, tmp_path) -> Path:
    """A copy of the pristine run for one case."""
    out = tmp_path / "run"
    shutil.copytree(pristine, out)
    return out


def _cell(out: Path) -> Path:
    (cell,) = (out / results.CELLS_DIR).iterdir()
    return cell


def _edit_json(path: Path, edit: Callable[[dict], None]) -> None:
    """Change one value of a JSON file, keeping it well-formed (as a careless hand would)."""
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=2) + "\n")


def _rows(data: dict) -> None:
    data["rows"][0]["mi_ap"] = 0.424


def _config_epochs(data: dict) -> None:
    data["config"]["profile"]["epochs"] += 1


def _metadata(data: dict) -> None:
    data["device"] = "cuda"


def _history(data: dict) -> None:
    data["train_loss"][-1] = 0.0


def _acc_real(data: dict) -> None:
    data["acc_real"] = 0.99


def _reference_json(data: dict) -> None:
    data["models"][0]["records"] += 1


def _edit_npz(path: Path, name: str) -> None:
    """Change one value of one array of an .npz file, rewritten as a valid .npz."""
    with np.load(path) as data:
        arrays = {k: data[k].copy() for k in data.files}
    array = arrays[name]
    array.flat[0] = (not array.flat[0]) if array.dtype == np.bool_ else array.flat[0] + 1
    np.savez(path, **arrays)


def _edit_state(path: Path) -> None:
    """Change one weight of a saved state dict (``model.pt``, a reference model)."""
    payload = torch.load(path, weights_only=True)
    state = payload["model"]
    name = next(k for k, v in state.items() if v.is_floating_point())
    state[name].view(-1)[0] += 1.0
    torch.save(payload, path)


def _one(out: Path, pattern: str) -> Path:
    return sorted(out.glob(pattern))[0]


#: (what is edited, where it lies, how it is edited): every file kind a sweep stores.
CELL_KINDS = {
    "rows.json": lambda out: _edit_json(_cell(out) / "rows.json", _rows),
    "config.json": lambda out: _edit_json(_cell(out) / "config.json", _config_epochs),
    "metadata.json": lambda out: _edit_json(_cell(out) / "metadata.json", _metadata),
    "history.json": lambda out: _edit_json(_cell(out) / "history.json", _history),
    "model.pt": lambda out: _edit_state(_cell(out) / "model.pt"),
    "scores.npz": lambda out: _edit_npz(
        _cell(out) / "scores.npz", next(iter(_score_names(_cell(out))))
    ),
    "attack_index.npz": lambda out: _edit_npz(_cell(out) / "attack_index.npz", "index"),
}
CACHE_KINDS = {
    "acc_real cache": lambda out: _edit_json(_one(out, "cache/acc_real-*.json"), _acc_real),
    "reference model": lambda out: _edit_state(_one(out, "reference-models/*/model_0.pt")),
    "reference.json": lambda out: _edit_json(
        _one(out, "reference-models/*/reference.json"), _reference_json
    ),
}
EDITED = {
    "rows.json": lambda out: _cell(out) / "rows.json",
    "config.json": lambda out: _cell(out) / "config.json",
    "metadata.json": lambda out: _cell(out) / "metadata.json",
    "history.json": lambda out: _cell(out) / "history.json",
    "model.pt": lambda out: _cell(out) / "model.pt",
    "scores.npz": lambda out: _cell(out) / "scores.npz",
    "attack_index.npz": lambda out: _cell(out) / "attack_index.npz",
    "acc_real cache": lambda out: _one(out, "cache/acc_real-*.json"),
    "reference model": lambda out: _one(out, "reference-models/*/model_0.pt"),
    "reference.json": lambda out: _one(out, "reference-models/*/reference.json"),
}


def _score_names(cell: Path) -> list[str]:
    with np.load(cell / "scores.npz") as data:
        return [k for k in data.files if k.startswith("scores_")]


def _snapshot(out: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(out)): (p.stat().st_size, p.stat().st_mtime_ns) for p in out.rglob("*")
    }


def _thresholds(tmp_path: Path) -> Path:
    entry = {
        "dataset": "digits",
        "profile": "quick",
        "mech": "none",
        "param_value": None,
        "distance": "any",
        "min_mi_ap": 0.0,
        "tolerance": 0.0,
        "margin_source": "test",
    }
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps({"schema_version": 1, "entries": [entry]}))
    return path


def _refused(argv: list[str], out: Path, named: str, capsys) -> None:
    """``argv`` exits 2 with one ``error:`` line naming ``named``, and writes nothing."""
    before = _snapshot(out)
    capsys.readouterr()
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and named in line, line
    assert _snapshot(out) == before


def _frame(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / results.RUNS_CSV).drop(columns=UNREPEATABLE)


@pytest.mark.parametrize("kind", [*CELL_KINDS, *CACHE_KINDS])
def test_an_edited_file_is_refused_by_report_and_check_in_one_line(kind, run, tmp_path, capsys):
    edited = EDITED[kind](run)
    {**CELL_KINDS, **CACHE_KINDS}[kind](run)
    named = str(edited)
    _refused(["report", str(run)], run, named, capsys)
    _refused(["check", "--thresholds", str(_thresholds(tmp_path)), str(run)], run, named, capsys)
    assert not (run / "report").exists()


def _recomputed(kinds: dict, fast: tuple[str, ...]) -> list:
    """``kinds`` as parameters, those not in ``fast`` marked slow: detection differs by file
    kind (every kind is refused above, fast), the recomputation that follows does not."""
    return [k if k in fast else pytest.param(k, marks=pytest.mark.slow) for k in kinds]


@pytest.mark.parametrize("kind", _recomputed(CELL_KINDS, ("rows.json", "config.json")))
def test_a_cell_with_an_edited_file_is_computed_again_to_the_same_rows(kind, run, caplog):
    original = _frame(run)
    edited = EDITED[kind](run)
    CELL_KINDS[kind](run)
    with caplog.at_level(logging.WARNING):
        again = run_sweep(_sweep_config(run))
    assert (again.ran, again.reused) == (1, 0)
    assert f"computing cell {_cell(run)} again: {edited} does not match" in caplog.text
    pd.testing.assert_frame_equal(_frame(run), original)
    assert results.run_problems(run) == []  # report and check read it again


def _cache_content(path: Path):
    """What a cache file holds, less the training time it records."""
    if path.suffix == ".json":
        data = io.read_json(path)
        return data.get("acc_real", [m["records"] for m in data.get("models", [])])
    payload = torch.load(path, weights_only=True)
    return {k: v.clone() for k, v in payload["model"].items()}, payload["records"].clone()


@pytest.mark.parametrize("kind", _recomputed(CACHE_KINDS, ("acc_real cache", "reference model")))
def test_an_edited_cache_file_is_dropped_and_computed_again_to_the_same_value(kind, run, caplog):
    """The next sweep removes the changed file (the cells that used it stay valid: reused);
    a cell that needs it computes it again, equal to the original, and its rows are too."""
    original = _frame(run)
    path = EDITED[kind](run)
    content = _cache_content(path)
    CACHE_KINDS[kind](run)
    with caplog.at_level(logging.WARNING):
        again = run_sweep(_sweep_config(run))
    assert (again.ran, again.reused) == (0, 1)
    assert f"removing cache file {path}" in caplog.text and not path.exists()
    assert results.run_problems(run) == []
    redo = run_sweep(_sweep_config(run, overwrite=True))  # the cell reads the cache again
    assert redo.ran == 1
    pd.testing.assert_frame_equal(_frame(run), original)
    if kind == "reference.json":  # rewritten only where a model is trained
        return
    assert path.is_file() and results.file_problem(run, path) is None
    recomputed = _cache_content(path)
    if kind == "acc_real cache":
        assert recomputed == content
    else:
        for name, value in content[0].items():
            torch.testing.assert_close(recomputed[0][name], value, rtol=0, atol=0)
        torch.testing.assert_close(recomputed[1], content[1], rtol=0, atol=0)


def test_an_edited_run_json_is_refused_by_every_command(run, tmp_path, capsys):
    """run.json is sealed by its own SHA-256: an edited digest (or any other value) in it makes
    the record untrustworthy, so report, check and the sweep refuse it in one line."""
    manifest = run / results.MANIFEST
    _edit_json(manifest, lambda d: d["files"].update({next(iter(d["files"])): "0" * 64}))
    named = f"run manifest {manifest} was edited or damaged"
    _refused(["report", str(run)], run, named, capsys)
    _refused(["check", "--thresholds", str(_thresholds(tmp_path)), str(run)], run, named, capsys)
    argv = ["--dataset", "digits", "--profile", "quick", "--out", str(run), "--no-progress"]
    _refused(argv, run, named, capsys)


def test_a_cell_without_recorded_digests_is_refused_then_computed_again(run, tmp_path, capsys):
    """A cell directory with no digests in run.json (written by older code, copied in, or its
    run.json deleted) is never used: report and check refuse it, the next sweep computes it."""
    original = _frame(run)
    (run / results.MANIFEST).unlink()
    named = f"{_cell(run)} has no SHA-256 of its files"
    _refused(["report", str(run)], run, named, capsys)
    _refused(["check", "--thresholds", str(_thresholds(tmp_path)), str(run)], run, named, capsys)
    again = run_sweep(_sweep_config(run))
    assert (again.ran, again.reused) == (1, 0)
    pd.testing.assert_frame_equal(_frame(run), original)


def test_a_file_added_to_a_cell_is_refused_then_removed_by_the_recomputation(run, capsys):
    added = _cell(run) / "scores_extra.npz"
    np.savez(added, is_member=np.array([True]))
    _refused(["report", str(run)], run, f"{added} is not recorded", capsys)
    again = run_sweep(_sweep_config(run))
    assert again.ran == 1 and not added.exists()
