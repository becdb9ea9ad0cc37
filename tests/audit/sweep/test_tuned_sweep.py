"""A sweep with ``--tune``: each cell tuned, its rows saying so, its trials cached and reused."""

from __future__ import annotations

from dataclasses import replace

import pytest

from audit import io, results
from audit.cell.tuning import NOT_ACCOUNTED
from audit.report.markdown import tuned_cell_notes
from audit.sweep import jobs
from audit.sweep.runner import run_sweep
from audit.sweep.tuning_cache import cached_tuning
from tests.audit.sweep.test_runner import _config

pytest.importorskip("optuna", reason="--tune runs Optuna's sampler (pip install -e '.[tune]')")


def test_a_tuned_sweep_says_so_caches_its_trials_and_resumes_without_tuning(
    tmp_path, monkeypatch
) -> None:
    config = _config(tmp_path, mechs=("cdp",), grid=(1.0,), tune=2)
    first = run_sweep(config)
    rows = first.rows
    assert first.ran == 2 and rows.privacy_notes.str.contains("tuned over 2 trials on D_val").all()
    assert rows.privacy_notes.str.contains(f"tuning_privacy={NOT_ACCOUNTED}").all()
    records = sorted((tmp_path / "cache").glob("tuning-*.json"))
    assert len(records) == 2  # the baseline is tuned too
    assert all(results.file_problem(tmp_path, path) is None for path in records)  # recorded
    for cell_hash, cell_rows in rows.groupby("config_hash"):
        meta = io.read_json(tmp_path / "cells" / cell_hash / "metadata.json")
        chosen = meta["tuning"]["chosen"]
        assert (cell_rows.lr == chosen["lr"]).all()
        assert (cell_rows.batch_size == chosen["batch_size"]).all()
        assert len(io.read_json(tmp_path / meta["tuning"]["record"])["trials"]) == 2

    def no_tuning(*args, **kwargs):
        raise AssertionError("a resumed sweep tuned again")

    monkeypatch.setattr(jobs, "tune_cell", no_tuning)
    again = run_sweep(replace(config, overwrite=True))  # every cell again, its tuning cached
    assert again.ran == 2
    same = ["config_hash", "acc", "mi_ap", "epsilon", "lr", "batch_size"]
    assert again.rows[same].equals(rows[same])
    with pytest.raises(ValueError, match="tune_trials"):  # one tuning per --out
        run_sweep(replace(config, tune=None))

    lines = tuned_cell_notes(rows)
    assert lines[0].startswith("**Tuned over 2 trials on D_val; the tuning's privacy cost is not")
    assert "- cdp z=1, seed 0: tuned over 2 trials on D_val; chosen lr" in lines[1]


def test_an_edited_tuning_record_is_not_trusted(tmp_path) -> None:
    config = _config(tmp_path, tune=1)
    run_sweep(config)
    (path,) = (tmp_path / "cache").glob("tuning-*.json")
    from audit.sweep.plan import build_cells

    (cell, _), *_ = build_cells(config, data_sha256=_content_hash())
    assert cached_tuning(tmp_path, cell) is not None
    body = io.read_json(path)
    body["chosen"]["lr"] = 0.5
    io.write_json(path, body)
    assert cached_tuning(tmp_path, cell) is None  # tuned again, with a warning naming the file


def _content_hash() -> str:
    from audit.datasets import load_dataset

    return load_dataset("digits").content_hash
