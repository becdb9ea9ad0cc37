"""Datasets: one module per dataset (or family) declaring its :class:`DatasetSpec`, the catalog
that collects them and loads by name, the seeded stratified split, and user ``.npz`` data.

Submodules import each other, never this package's ``__init__``.
"""

from audit.datasets.catalog import (
    SPECS,
    WINDOWED_DATASETS,
    check_data_home,
    check_dataset_name,
    dataset_modality,
    dataset_names,
    load_dataset,
    resolve_window_stride,
)
from audit.datasets.dataset import Dataset, DatasetSpec, DatasetUnavailable, content_hash
from audit.datasets.npz import NPZ_PIXEL_RULE, NPZ_PREFIX, load_npz, npz_pixels
from audit.datasets.series import ChannelScaler
from audit.datasets.split import (
    Split,
    check_class_counts,
    dataset_split,
    min_records_per_class,
    stratified_split,
)

__all__ = [
    "NPZ_PIXEL_RULE",
    "NPZ_PREFIX",
    "SPECS",
    "WINDOWED_DATASETS",
    "ChannelScaler",
    "Dataset",
    "DatasetSpec",
    "DatasetUnavailable",
    "Split",
    "check_class_counts",
    "check_data_home",
    "check_dataset_name",
    "content_hash",
    "dataset_modality",
    "dataset_names",
    "load_dataset",
    "load_npz",
    "min_records_per_class",
    "npz_pixels",
    "resolve_window_stride",
    "dataset_split",
    "stratified_split",
]
