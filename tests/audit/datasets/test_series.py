"""Series helpers: windows against a naive loop, and the fixed-range channel scaling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.datasets.series import ChannelScaler, windows


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


def test_scaler_clips_each_value_into_its_channel_range():
    scaler = ChannelScaler(lower=np.array([-2.0, 0.0]), upper=np.array([2.0, 10.0]))
    x = np.array([[[-3.0, 5.0], [0.0, 10.0], [1.0, 12.0]]], dtype=np.float32)
    out = scaler.transform(x)
    np.testing.assert_allclose(out, [[[-1.0, 0.0], [0.0, 1.0], [0.5, 1.0]]])
    with pytest.raises(ValueError, match="lower < upper"):
        ChannelScaler(lower=np.array([1.0]), upper=np.array([1.0]))
