"""LFW identities read from scikit-learn's layout (a fixture), and the offline error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audit.datasets import DatasetUnavailable, load_dataset


def test_lfw_top_identities_from_sklearn_layout(lfw_home: Path):
    ds = load_dataset("lfw20", data_home=lfw_home)
    assert ds.x.shape[1:] == (3, 64, 64)
    assert ds.num_classes == 20
    assert "Tiny One" not in ds.class_names and "Person A" in ds.class_names
    expected = sum(12 - (i // 2) for i in range(20))
    assert len(ds.y) == expected
    assert ds.x.min() >= 0.0 and ds.x.max() <= 1.0
    # the fixture tints each identity: per-identity mean colours must differ
    means = np.stack([ds.x[ds.y == k].mean(axis=(0, 2, 3)) for k in range(3)])
    assert np.ptp(means, axis=0).max() > 0.05


def test_lfw50_needs_fifty_identities(lfw_home: Path):
    with pytest.raises(DatasetUnavailable, match="needs 50 identities"):
        load_dataset("lfw50", data_home=lfw_home)


def test_lfw_offline_fails_with_one_clear_message(tmp_path: Path, monkeypatch):
    import sklearn.datasets

    def offline(*args, **kwargs):
        raise OSError("no network")

    monkeypatch.setattr(sklearn.datasets, "fetch_lfw_people", offline)
    with pytest.raises(DatasetUnavailable, match="--data-home") as info:
        load_dataset("lfw20", data_home=tmp_path / "empty")
    assert "\n" not in str(info.value)
