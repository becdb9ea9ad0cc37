"""Issue 30, item 13: bad input stops with one ``error:`` line naming the value, status 2,
before any work (each case crashed or gave a misleading message before)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audit.datasets import DatasetUnavailable, load_dataset
from benchmark import main
from tests.audit.check.runs import runs, write_runs


def test_calibrate_write_to_a_directory_is_refused_before_calibrating(tmp_path, capsys):
    run_dir = write_runs(tmp_path / "a", runs())
    target = tmp_path / "out"
    target.mkdir()
    assert main(["check", "--calibrate", str(run_dir), "--write", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --write")
    assert "is a directory" in err[0] and "thresholds.json" in err[0]
    assert list(target.iterdir()) == []


def test_a_directory_given_as_npz_is_named_a_directory(tmp_path):
    folder = tmp_path / "data.npz"
    folder.mkdir()
    with pytest.raises(DatasetUnavailable, match="is a directory; give the .npz file itself"):
        load_dataset(f"npz:{folder}")


def test_sixteen_bit_integer_images_get_a_scaling_hint_not_the_binary_one(tmp_path: Path):
    path = tmp_path / "deep.npz"
    np.savez(path, X=np.full((40, 8, 8), 4000, np.int32), y=np.arange(40) % 2)
    with pytest.raises(DatasetUnavailable) as info:
        load_dataset(f"npz:{path}")
    assert "max 4000" in str(info.value) and "more than 8 bits" in str(info.value)
    assert "binary" not in str(info.value)
