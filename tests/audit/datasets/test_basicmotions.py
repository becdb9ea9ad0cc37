"""BasicMotions from an installed package, and the .ts reader."""

from __future__ import annotations

import numpy as np
import pytest

from audit.datasets import DatasetUnavailable, load_dataset
from audit.datasets.basicmotions import packaged_files, read_ts
from dpvae_core.records import Modality


def test_ts_reader(tmp_path):
    path = tmp_path / "tiny.ts"
    path.write_text(
        "#comment\n@problemName tiny\n@classLabel true Up Down\n@data\n"
        "1,2,3:4,5,6:Down\n0.5,0,-1:1,1,1:Up\n"
    )
    x, labels, classes = read_ts(path)
    assert classes == ("Up", "Down") and labels == ["Down", "Up"]
    np.testing.assert_array_equal(x[0], [[1, 4], [2, 5], [3, 6]])  # (T, F)


def _basicmotions_installed() -> bool:
    try:
        packaged_files()
    except DatasetUnavailable:
        return False
    return True


@pytest.mark.skipif(not _basicmotions_installed(), reason="neither sktime nor aeon is installed")
def test_basicmotions_from_package_data():
    import sys

    data = load_dataset("basicmotions")
    assert data.x.shape == (80, 100, 6) and data.modality is Modality.SERIES
    assert data.class_names == ("Standing", "Running", "Walking", "Badminton")
    assert np.bincount(data.y).tolist() == [20] * 4
    assert "sktime" not in sys.modules and "aeon" not in sys.modules
