"""User data in an .npz: accepted layouts and pixel scales, and one-line refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audit.datasets import DatasetUnavailable, load_dataset


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
