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
    x = np.random.default_rng(0).integers(0, 256, size=(30, 16, 16, 3), dtype=np.uint8)
    ds = load_dataset(_save_npz(tmp_path / "d.npz", X=x, y=np.arange(30) % 3))
    assert ds.x.shape == (30, 3, 16, 16) and ds.x.max() <= 1.0 and ds.num_classes == 3


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


def _images(n: int = 20, **kw) -> np.ndarray:
    return np.random.default_rng(0).uniform(0, 1, size=(n, 8, 8)).astype(np.float32)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [  # issue 13, item 5: each refused with one line naming the file and what is allowed
        ({"X": _images(), "y": np.full(20, 3)}, "holds 1 class(es) ('3')"),
        ({"X": _images() * 1.5, "y": np.arange(20) % 2}, "float X has min 0.0"),
        ({"X": _images() * 255, "y": np.arange(20) % 2}, "cast them to uint8"),
        ({"X": np.full((20, 8, 8), 300), "y": np.arange(20) % 2}, "max 300"),
        ({"X": np.full((20, 8, 8), -1.0), "y": np.arange(20) % 2}, "min -1"),
        ({"X": np.arange(20 * 64).reshape(20, 8, 8) % 2, "y": np.arange(20) % 2}, "binary"),
        ({"X": np.full((20, 8, 8), np.inf), "y": np.arange(20) % 2}, "NaN or infinity"),
        ({"X": _images(), "y": np.array([0] * 17 + [1] * 3)}, "class '1' has 3 record(s)"),
        ({"X": _images(), "y": np.arange(20) % 2 + 0.0}, "y must be a 1-D integer array"),
        ({"X": _images(), "y": (np.arange(20) % 2)[:, None]}, "y must be a 1-D integer array"),
        ({"X": _images(), "y": np.arange(19) % 2}, "X holds 20 records but y 19"),
        ({"X": np.zeros((20, 8)), "y": np.arange(20) % 2}, "allowed: (N, H, W)"),
        ({"X": np.zeros((20, 8, 8), bool), "y": np.arange(20) % 2}, "dtype bool"),
    ],
)
def test_npz_inputs_that_would_be_misread_are_refused(tmp_path: Path, arrays, message):
    path = tmp_path / "user.npz"
    with pytest.raises(DatasetUnavailable) as info:
        load_dataset(_save_npz(path, **arrays))
    text = str(info.value)
    assert str(path) in text and message in text and "\n" not in text, text


def test_npz_pixel_rule_accepts_floats_in_0_1_and_integers_up_to_255(tmp_path: Path):
    y = np.arange(20) % 2
    floats = load_dataset(_save_npz(tmp_path / "f.npz", X=_images(), y=y))
    assert np.allclose(floats.x[:, 0], _images())  # taken as they are
    ints = load_dataset(_save_npz(tmp_path / "i.npz", X=np.full((20, 8, 8), 255, np.int64), y=y))
    assert ints.x.max() == 1.0


def test_a_text_file_named_npz_is_one_line(tmp_path: Path):
    path = tmp_path / "data.npz"
    path.write_text("X,y\n1,2\n")
    with pytest.raises(DatasetUnavailable, match="not a readable .npz archive") as info:
        load_dataset(f"npz:{path}")
    assert str(path) in str(info.value) and "pickle" not in str(info.value)


@pytest.mark.parametrize(("fractions", "need"), [((0.5, 0.2, 0.3), 4), ((0.1, 0.1, 0.8), 10)])
def test_the_stated_minimum_per_class_is_enough_for_the_split(fractions, need):
    from audit.datasets import min_records_per_class, stratified_split

    assert min_records_per_class(fractions) == need
    for big in (40, 200):
        for seed in range(10):  # sklearn accepts every split at the minimum
            stratified_split(np.array([0] * big + [1] * need), fractions=fractions, seed=seed)
    with pytest.raises(ValueError, match=f"class 1 has {need - 1} record"):
        stratified_split(np.array([0] * 40 + [1] * (need - 1)), fractions=fractions, seed=0)
    with pytest.raises(ValueError, match="records are too few for 2 classes"):
        stratified_split(np.array([0, 1] * 4), fractions=fractions, seed=0)
