"""MotionSense read from a fixture in its real layout, its fixed channel ranges, and the
per-cell scaling to [-1, 1] with them."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit.cell.membership import cell_data
from audit.config import CellConfig
from audit.datasets import DatasetUnavailable, load_dataset, stratified_split
from audit.datasets.motionsense import FOLDER, RANGES, SENSOR_COLUMNS, load_motionsense
from audit.datasets.series import windows
from audit.profiles import PROFILES, ProfileName
from dpvae_core.records import Modality

from .fixtures import FIXTURE_SUBJECTS, FIXTURE_TRIALS, build_motionsense_fixture, fixture_rows


@pytest.fixture
def motionsense_home(tmp_path: Path) -> Path:
    return build_motionsense_fixture(tmp_path / "data")


def test_loader_reads_the_real_layout(motionsense_home):
    data = load_dataset("motionsense", data_home=motionsense_home)
    per_file = [fixture_rows(s) // 500 for s in FIXTURE_SUBJECTS]
    assert data.x.shape == (len(FIXTURE_TRIALS) * sum(per_file), 500, 12)
    assert data.x.dtype == np.float32 and data.modality is Modality.SERIES
    assert data.class_names == ("dws", "jog", "sit")  # MotionSense's label order
    assert np.bincount(data.y).tolist() == [sum(per_file)] * 3
    assert data.split_fractions == (0.1, 0.1, 0.8) and data.channel_ranges is RANGES


def test_windows_are_consecutive_rows_labelled_by_activity(motionsense_home):
    data = load_motionsense(motionsense_home / FOLDER, stride=250)  # DIR itself works too
    csv = pd.read_csv(motionsense_home / FOLDER / "dws_1" / "sub_1.csv")
    rows = csv[list(SENSOR_COLUMNS)].to_numpy(np.float32)
    assert "Unnamed: 0" in csv.columns  # the index column is there and ignored
    k = 1 + (len(rows) - 500) // 250
    np.testing.assert_array_equal(data.x[:k], windows(rows, length=500, stride=250))
    np.testing.assert_array_equal(data.x[1, :250], rows[250:500])
    assert (data.y[:k] == 0).all()


def test_missing_data_is_one_line_naming_data_home(tmp_path, monkeypatch):
    """Absent and not downloadable (no network; see test_motionsense_download.py)."""
    monkeypatch.setenv("SCIKIT_LEARN_DATA", str(tmp_path / "sk"))

    def no_network(url: str, dest: Path) -> None:
        raise OSError("network is unreachable")

    monkeypatch.setattr("audit.datasets.motionsense.fetch", no_network)
    for home in (None, tmp_path):
        with pytest.raises(DatasetUnavailable, match="--data-home") as info:
            load_dataset("motionsense", data_home=home)
        assert "\n" not in str(info.value) and "downloading failed" in str(info.value)
    with pytest.raises(DatasetUnavailable, match="no sub_<n>.csv"):
        (tmp_path / FOLDER / "dws_1").mkdir(parents=True)  # the layout, but no recordings
        load_dataset("motionsense", data_home=tmp_path)


def test_window_stride_reaches_the_loader(motionsense_home):
    from audit.datasets import WINDOWED_DATASETS
    from audit.datasets.motionsense import WINDOW

    assert WINDOWED_DATASETS == {"motionsense": WINDOW}
    default = load_dataset("motionsense", data_home=motionsense_home)
    half = load_dataset("motionsense", data_home=motionsense_home, window_stride=250)
    per_file = [1 + (fixture_rows(s) - 500) // 250 for s in FIXTURE_SUBJECTS]
    assert len(half.x) == len(FIXTURE_TRIALS) * sum(per_file) > len(default.x)
    np.testing.assert_array_equal(half.x[1, :250], default.x[0, 250:])
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="window stride must be a positive integer"):
            load_dataset("motionsense", data_home=motionsense_home, window_stride=bad)
    with pytest.raises(ValueError, match="--window-stride applies to datasets cut into windows"):
        load_dataset("digits", window_stride=10)


def test_missing_column_is_refused(motionsense_home):
    path = motionsense_home / FOLDER / "jog_9" / "sub_2.csv"
    pd.read_csv(path, index_col=0).drop(columns=["gravity.y"]).to_csv(path)
    with pytest.raises(DatasetUnavailable, match=r"lacks column\(s\) \['gravity.y'\]"):
        load_dataset("motionsense", data_home=motionsense_home)


def _cell(max_train: int | None = None) -> CellConfig:
    profile = replace(PROFILES[ProfileName.QUICK], max_train=max_train)
    return CellConfig("motionsense", "none", "none", None, 0, profile)


def test_scaling_uses_fixed_ranges_never_the_records(motionsense_home):
    data = load_dataset("motionsense", data_home=motionsense_home)
    split = stratified_split(data.y, fractions=data.split_fractions, seed=0)
    cell = cell_data(data, split, _cell())
    train, test = cell.train[0].numpy(), cell.test[0].numpy()
    np.testing.assert_array_equal(train, RANGES.transform(data.x[split.train]))
    np.testing.assert_array_equal(test, RANGES.transform(data.x[split.test]))
    assert train.min() >= -1 and train.max() <= 1 and test.min() >= -1 and test.max() <= 1
    assert "fixed per-channel ranges" in cell.notes["series_scaling"]
    assert "clipped into its channel's range record by record" in cell.notes["series_scaling"]
    # One record holding an extreme value moves no other record's scaled values (with D_train's
    # min and max it rescaled every record of the channel).
    wild = replace(data, x=data.x.copy())
    wild.x[split.train[0]] *= 1000
    again = cell_data(wild, split, _cell())
    np.testing.assert_array_equal(again.train[0].numpy()[1:], train[1:])
    np.testing.assert_array_equal(again.test[0].numpy(), test)
    assert np.abs(again.train[0].numpy()[0]).max() <= 1  # clipped, record by record


def test_motionsense_ranges_are_the_documented_physical_ones():
    np.testing.assert_allclose(RANGES.lower[:3], -math.pi)  # attitude, rad
    np.testing.assert_allclose(RANGES.upper[3:6], 1.0)  # gravity, g
    np.testing.assert_allclose(RANGES.upper[6:9], 2000 * math.pi / 180)  # rotationRate, rad/s
    np.testing.assert_allclose(RANGES.upper[9:], 8.0)  # userAcceleration, g
    np.testing.assert_allclose(RANGES.lower, -RANGES.upper)
