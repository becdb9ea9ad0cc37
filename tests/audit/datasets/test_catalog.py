"""The dataset registry: names, modalities known without loading, the embedded datasets."""

from __future__ import annotations

import numpy as np
import pytest

from audit.datasets import (
    SPECS,
    WINDOWED_DATASETS,
    check_dataset_name,
    dataset_modality,
    dataset_names,
    load_dataset,
)
from dpvae_core.records import Modality


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


def test_unknown_dataset_lists_valid_names():
    with pytest.raises(ValueError, match=r"unknown dataset 'mnist'.*digits.*lfw-subset.*lfw20"):
        check_dataset_name("mnist")


def test_modality_is_known_without_loading():
    assert dataset_modality("motionsense") is Modality.SERIES
    assert dataset_modality("basicmotions") is Modality.SERIES
    assert dataset_modality("digits") is Modality.IMAGE
    assert dataset_modality("pinwheel") is Modality.POINTS


def test_every_dataset_module_declares_one_spec_in_the_catalog():
    assert dataset_names() == [
        "digits", "lfw-subset", "lfw20", "lfw50", "motionsense", "basicmotions", "pinwheel",
        "npz:PATH",
    ]  # fmt: skip
    assert WINDOWED_DATASETS == {"motionsense": 500}
    for name, spec in SPECS.items():
        assert spec.name == name and dataset_modality(name) is spec.modality
        assert (spec.channel_ranges is not None) == (spec.modality is Modality.SERIES)


@pytest.mark.parametrize("name", ["digits", "lfw-subset"])
def test_a_loaded_dataset_carries_what_its_spec_declares(name):
    spec, data = SPECS[name], load_dataset(name)
    assert data.name == name and data.modality is spec.modality
    assert data.split_fractions == spec.split_fractions
    assert data.channel_ranges is spec.channel_ranges
