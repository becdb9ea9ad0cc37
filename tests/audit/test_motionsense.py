"""Series datasets: MotionSense read from a fixture in its real layout, BasicMotions from an
installed package, and the per-cell scaling to [-1, 1] fitted on D_train only."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.basicmotions import packaged_files, read_ts
from audit.config import PROFILES, CellConfig, MechanismName, ProfileName
from audit.datasets import (
    Dataset,
    DatasetUnavailable,
    dataset_modality,
    load_dataset,
    stratified_split,
)
from audit.motionsense import COLUMNS, FOLDER, RANGES, load_motionsense
from audit.pipeline import cell_data
from audit.series import ChannelScaler, windows
from core.records import Modality

#: (activity_trial folder, activity frequency in Hz): real trial names of the archive.
FIXTURE_TRIALS = {"dws_1": 0.8, "jog_9": 2.5, "sit_5": 0.1}
FIXTURE_SUBJECTS = (1, 2, 3, 4)


def fixture_rows(subject: int) -> int:
    """Rows of subject n's recordings: 1500 + 137 n (3 windows of 500 each)."""
    return 1500 + 137 * subject


def build_motionsense_fixture(data_home: Path, *, seed: int = 0) -> Path:
    """``DIR/A_DeviceMotion_data/<activity>_<trial>/sub_<n>.csv`` as in the real archive: an
    unnamed index column, then the 12 device-motion columns at 50 Hz. Each activity has its own
    frequency and amplitude, so that classes are learnable; returns DIR."""
    rng = np.random.default_rng(seed)
    for trial, freq in FIXTURE_TRIALS.items():
        folder = data_home / FOLDER / trial
        folder.mkdir(parents=True)
        for subject in FIXTURE_SUBJECTS:
            n = fixture_rows(subject)
            t = np.arange(n)[:, None] / 50.0
            phase = rng.uniform(0, 2 * np.pi, size=len(COLUMNS))
            values = freq * np.sin(2 * np.pi * freq * t + phase) + rng.normal(0, 0.05, (n, 12))
            pd.DataFrame(values, columns=list(COLUMNS)).to_csv(folder / f"sub_{subject}.csv")
    return data_home


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
    rows = csv[list(COLUMNS)].to_numpy(np.float32)
    assert "Unnamed: 0" in csv.columns  # the index column is there and ignored
    k = 1 + (len(rows) - 500) // 250
    np.testing.assert_array_equal(data.x[:k], windows(rows, length=500, stride=250))
    np.testing.assert_array_equal(data.x[1, :250], rows[250:500])
    assert (data.y[:k] == 0).all()


@settings(max_examples=50, deadline=None)
@given(n=st.integers(0, 40), features=st.integers(1, 3), length=st.integers(1, 12),
       stride=st.integers(1, 12))  # fmt: skip
def test_windows_equal_a_naive_loop(n, features, length, stride):
    rows = np.arange(n * features, dtype=np.float32).reshape(n, features)
    naive = [rows[s : s + length] for s in range(0, n - length + 1, stride)]
    got = windows(rows, length=length, stride=stride)
    assert got.shape == (len(naive), length, features)
    for window, expected in zip(got, naive, strict=True):
        np.testing.assert_array_equal(window, expected)


def test_missing_data_is_one_line_naming_data_home(tmp_path, monkeypatch):
    """Absent and not downloadable (no network; see test_motionsense_download.py)."""
    monkeypatch.setenv("SCIKIT_LEARN_DATA", str(tmp_path / "sk"))

    def no_network(url: str, dest: Path) -> None:
        raise OSError("network is unreachable")

    monkeypatch.setattr("audit.motionsense.fetch", no_network)
    for home in (None, tmp_path):
        with pytest.raises(DatasetUnavailable, match="--data-home") as info:
            load_dataset("motionsense", data_home=home)
        assert "\n" not in str(info.value) and "downloading failed" in str(info.value)
    with pytest.raises(DatasetUnavailable, match="no sub_<n>.csv"):
        (tmp_path / FOLDER / "dws_1").mkdir(parents=True)  # the layout, but no recordings
        load_dataset("motionsense", data_home=tmp_path)


def test_window_stride_reaches_the_loader(motionsense_home):
    from audit.datasets import WINDOWED_DATASETS
    from audit.motionsense import WINDOW

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
    return CellConfig("motionsense", MechanismName.NONE, "none", None, 0, profile)


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


def test_scaler_clips_each_value_into_its_channel_range():
    scaler = ChannelScaler(lower=np.array([-2.0, 0.0]), upper=np.array([2.0, 10.0]))
    x = np.array([[[-3.0, 5.0], [0.0, 10.0], [1.0, 12.0]]], dtype=np.float32)
    out = scaler.transform(x)
    np.testing.assert_allclose(out, [[[-1.0, 0.0], [0.0, 1.0], [0.5, 1.0]]])
    with pytest.raises(ValueError, match="lower < upper"):
        ChannelScaler(lower=np.array([1.0]), upper=np.array([1.0]))


def test_series_dataset_validation():
    y = np.zeros(2, dtype=np.int64)
    ok = Dataset("s", np.zeros((2, 5, 3), np.float32), y, ("a",), modality="series")
    assert ok.modality is Modality.SERIES and ok.shape == (5, 3)
    with pytest.raises(DatasetUnavailable, match=r"must lie in \[-1, 1\]"):
        Dataset("s", np.full((2, 5, 3), 2.0, np.float32), y, ("a",), modality="series")
    ranges = ChannelScaler(lower=np.full(3, -5.0), upper=np.full(3, 5.0))
    raw = Dataset("s", np.full((2, 5, 3), 2.0, np.float32), y, ("a",), modality="series",
                  channel_ranges=ranges)  # fmt: skip
    assert raw.channel_ranges is ranges
    with pytest.raises(DatasetUnavailable, match="2 channel ranges for 3 channels"):
        Dataset("s", np.zeros((2, 5, 3), np.float32), y, ("a",), modality="series",
                channel_ranges=ChannelScaler(lower=np.zeros(2), upper=np.ones(2)))  # fmt: skip
    with pytest.raises(DatasetUnavailable, match="unknown modality 'audio'; choose one of: image"):
        Dataset("s", np.zeros((2, 5, 3), np.float32), y, ("a",), modality="audio")
    with pytest.raises(DatasetUnavailable, match=r"series must be \(N, T, F\)"):
        Dataset("s", np.zeros((2, 1, 5, 3), np.float32), y, ("a",), modality="series")


def test_modality_is_known_without_loading():
    assert dataset_modality("motionsense") is Modality.SERIES
    assert dataset_modality("basicmotions") is Modality.SERIES
    assert dataset_modality("digits") is Modality.IMAGE


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
