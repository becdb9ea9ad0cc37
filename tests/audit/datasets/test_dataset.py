"""The Dataset's validation at construction and its content hash."""

from __future__ import annotations

import numpy as np
import pytest

from audit.datasets import Dataset, DatasetUnavailable, content_hash
from audit.datasets.series import ChannelScaler
from dpvae_core.records import Modality


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
