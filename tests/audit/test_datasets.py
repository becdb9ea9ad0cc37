from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audit.datasets import (
    Dataset,
    DatasetUnavailable,
    check_dataset_name,
    content_hash,
    load_dataset,
    stratified_split,
)


@pytest.mark.parametrize(
    ("name", "shape", "classes", "n"),
    [("digits", (1, 8, 8), 10, 1797), ("lfw-subset", (1, 25, 25), 2, 200)],
)
def test_embedded_datasets_load_in_range(name, shape, classes, n):
    ds = load_dataset(name)
    assert ds.x.shape == (n, *shape)
    assert ds.x.dtype == np.float32 and ds.y.dtype == np.int64
    assert ds.x.min() >= 0.0 and ds.x.max() <= 1.0
    assert ds.num_classes == classes
    assert set(np.unique(ds.y)) == set(range(classes))


def test_split_is_stratified_disjoint_and_seeded():
    ds = load_dataset("digits")
    a = stratified_split(ds.y, fractions=(0.5, 0.2, 0.3), seed=3)
    b = stratified_split(ds.y, fractions=(0.5, 0.2, 0.3), seed=3)
    c = stratified_split(ds.y, fractions=(0.5, 0.2, 0.3), seed=4)
    assert all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("train", "val", "test"))
    assert not np.array_equal(a.train, c.train)
    parts = np.concatenate([a.train, a.val, a.test])
    assert len(parts) == len(ds.y) == len(np.unique(parts))
    assert abs(len(a.train) / len(ds.y) - 0.5) < 0.01 and abs(len(a.test) / len(ds.y) - 0.3) < 0.01
    share = np.bincount(ds.y) / len(ds.y)
    assert np.abs(np.bincount(ds.y[a.train]) / len(a.train) - share).max() < 0.01


def test_unknown_dataset_lists_valid_names():
    with pytest.raises(ValueError, match=r"unknown dataset 'mnist'.*digits.*lfw-subset.*lfw20"):
        check_dataset_name("mnist")


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


def _save_npz(path: Path, **arrays) -> str:
    np.savez(path, **arrays)
    return f"npz:{path}"


def test_npz_channels_last_uint8(tmp_path: Path):
    x = np.random.default_rng(0).integers(0, 256, size=(12, 16, 16, 3), dtype=np.uint8)
    ds = load_dataset(_save_npz(tmp_path / "d.npz", X=x, y=np.arange(12) % 3))
    assert ds.x.shape == (12, 3, 16, 16) and ds.x.max() <= 1.0 and ds.num_classes == 3


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"X": np.zeros((4, 8, 8))}, "lacks array"),
        ({"X": np.zeros((4, 5, 8, 8)), "y": np.zeros(4, int)}, "allowed"),
        ({"X": np.full((4, 8, 8), np.nan), "y": np.zeros(4, int)}, "NaN"),
        ({"X": np.zeros((4, 8, 8)), "y": np.zeros(3, int)}, "labels"),
        ({"X": np.zeros((4, 8, 8)), "y": np.zeros(4)}, "integer"),
    ],
)
def test_npz_rejects_malformed(tmp_path: Path, arrays, message):
    with pytest.raises(DatasetUnavailable, match=message):
        load_dataset(_save_npz(tmp_path / "bad.npz", **arrays))


def test_npz_missing_file(tmp_path: Path):
    with pytest.raises(DatasetUnavailable, match="does not exist"):
        load_dataset(f"npz:{tmp_path / 'nope.npz'}")


def test_content_hash_covers_values_dtype_shape_and_labels():
    x = np.zeros((4, 1, 2, 2), dtype=np.float32)
    y = np.array([0, 1, 0, 1])
    ref = Dataset("a", x, y, ("p", "q")).content_hash
    assert Dataset("b", x.copy(), y.copy(), ("p", "q")).content_hash == ref  # name-free
    changed = x.copy()
    changed[0, 0, 0, 0] = 0.5
    assert Dataset("a", changed, y, ("p", "q")).content_hash != ref
    assert Dataset("a", x, y[::-1].copy(), ("p", "q")).content_hash != ref
    assert Dataset("a", x.reshape(4, 1, 1, 4), y, ("p", "q")).content_hash != ref
    assert content_hash(x.astype(np.float64), y) != content_hash(x, y)
