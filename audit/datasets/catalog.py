"""The dataset registry: the spec each dataset module declares, collected by name, and loading
by name (or ``npz:PATH`` for user data).

Image loaders return float32 images (N, C, H, W) in [0, 1]; series loaders (``motionsense``,
``basicmotions``; see :mod:`audit.datasets.motionsense`, :mod:`audit.datasets.basicmotions`)
float32 series (N, T, F) in sensor units with fixed per-channel ranges, clipped and scaled to
[-1, 1] per record (:mod:`audit.datasets.series`). An ``.npz`` holds images only. Labels are
int64 (N,).
"""

from __future__ import annotations

import logging
from pathlib import Path

from audit.datasets import basicmotions, digits, lfw, motionsense, pinwheel
from audit.datasets.dataset import Dataset, DatasetSpec
from audit.datasets.npz import NPZ_PREFIX, load_npz
from dpvae_core.records import Modality

log = logging.getLogger(__name__)

#: Every registered dataset by name, in the order the CLI lists them.
SPECS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (digits.SPEC, *lfw.LFW_SPECS, motionsense.SPEC, basicmotions.SPEC, pinwheel.SPEC)
}
#: Datasets cut into windows from longer recordings, and their default window stride (samples).
WINDOWED_DATASETS: dict[str, int] = {
    name: spec.window_stride for name, spec in SPECS.items() if spec.window_stride is not None
}


def dataset_names() -> list[str]:
    return [*SPECS, f"{NPZ_PREFIX}PATH"]


def check_dataset_name(name: str) -> str:
    """Validate a dataset name without loading it; returns the name."""
    if name in SPECS or (name.startswith(NPZ_PREFIX) and len(name) > len(NPZ_PREFIX)):
        return name
    raise ValueError(f"unknown dataset {name!r}; choose one of: {', '.join(dataset_names())}")


def dataset_modality(name: str) -> Modality:
    """The modality of a dataset's records, known from its name without loading it."""
    check_dataset_name(name)
    spec = SPECS.get(name)
    return Modality.IMAGE if spec is None else spec.modality


def resolve_window_stride(name: str, stride: int | None) -> int | None:
    """The window stride a dataset is loaded with: ``stride`` or the dataset's default for a
    windowed dataset (:data:`WINDOWED_DATASETS`), None for the others.

    Raises ValueError for a stride that is not a positive integer, or one given for a dataset
    whose records are not cut into windows.
    """
    check_dataset_name(name)
    if stride is None:
        return WINDOWED_DATASETS.get(name)
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise ValueError(f"window stride must be a positive integer, got {stride!r}")
    if name not in WINDOWED_DATASETS:
        raise ValueError(
            f"--window-stride applies to datasets cut into windows "
            f"({', '.join(WINDOWED_DATASETS)}), not to {name!r}"
        )
    return stride


def check_data_home(name: str, data_home: Path | None) -> None:
    """Before loading (the sweep, ``audit``): refuse a ``--data-home`` that the dataset would
    not read (an embedded dataset, or an ``npz:`` file) or that is a file; a missing folder is
    fine (a download makes it, and a failed one removes it again)."""
    check_dataset_name(name)
    if data_home is None:
        return
    readers = [n for n, spec in SPECS.items() if spec.reads_data_home]
    if name not in readers:
        raise ValueError(
            f"--data-home applies to the datasets read from disk or downloaded "
            f"({', '.join(readers)}); --dataset {name} reads none, drop --data-home"
        )
    if str(data_home) == "":
        raise ValueError("--data-home is empty; give a directory")
    if Path(data_home).exists() and not Path(data_home).is_dir():
        raise ValueError(f"--data-home {str(data_home)!r} is a file; give a directory")


def load_dataset(
    name: str, *, data_home: Path | None = None, window_stride: int | None = None
) -> Dataset:
    """Load a dataset by registry name (see :data:`SPECS`, or ``npz:PATH``).

    ``window_stride``: for a windowed dataset (:data:`WINDOWED_DATASETS`), the step between the
    starts of consecutive windows of one recording (default: the dataset's); refused otherwise.
    """
    stride = resolve_window_stride(name, window_stride)
    if name.startswith(NPZ_PREFIX):
        return load_npz(Path(name[len(NPZ_PREFIX) :]))
    log.info("loading dataset %s", name)
    return SPECS[name].load(data_home, window_stride=stride)
