"""The seeded stratified split and the class counts it needs."""

from __future__ import annotations

import numpy as np
import pytest

from audit.datasets import load_dataset, min_records_per_class, stratified_split


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


@pytest.mark.parametrize(("fractions", "need"), [((0.5, 0.2, 0.3), 4), ((0.1, 0.1, 0.8), 10)])
def test_the_stated_minimum_per_class_is_enough_for_the_split(fractions, need):
    assert min_records_per_class(fractions) == need
    for big in (40, 200):
        for seed in range(10):  # sklearn accepts every split at the minimum
            stratified_split(np.array([0] * big + [1] * need), fractions=fractions, seed=seed)
    with pytest.raises(ValueError, match=f"class 1 has {need - 1} record"):
        stratified_split(np.array([0] * 40 + [1] * (need - 1)), fractions=fractions, seed=0)
    with pytest.raises(ValueError, match="records are too few for 2 classes"):
        stratified_split(np.array([0, 1] * 4), fractions=fractions, seed=0)
