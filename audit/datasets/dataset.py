"""A loaded dataset (:class:`Dataset`), the error for data that cannot be loaded, and the spec
each dataset module declares (:class:`DatasetSpec`) for the catalog to collect.

Images are float32 (N, C, H, W) in [0, 1]; series float32 (N, T, F), in [-1, 1] or in sensor
units with fixed per-channel ranges (:class:`audit.datasets.series.ChannelScaler`). Labels are
int64 (N,).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from audit.datasets.series import ChannelScaler
from dpvae_core.records import Modality

#: The trade-off paper's split: 50 % D_train, 20 % D_val, 30 % D_test.
DEFAULT_SPLIT_FRACTIONS = (0.5, 0.2, 0.3)


class DatasetUnavailable(ValueError):
    """The data cannot be loaded here (not downloaded, unreachable, malformed)."""


@dataclass(frozen=True)
class Dataset:
    """A labelled dataset of images or sensor series; ``y``: int64 (N,).

    ``x`` is float32: images (N, C, H, W) in [0, 1], or series (N, T, F). A series is either in
    [-1, 1] already, or in sensor units with ``channel_ranges``: fixed per-channel ranges that
    do not depend on the records (:class:`audit.datasets.series.ChannelScaler`); the pipeline
    clips every value into its channel's range and maps it to [-1, 1].

    ``content_hash`` (computed here, once per load): SHA-256 of the arrays as loaded (dtype,
    shape and bytes of ``x`` and ``y``) and the class names. It goes into every cell's config and
    every cache key, so replaced data (a new .npz under the same path, other LFW or MotionSense
    files) never reuses results of the old.
    """

    name: str
    x: np.ndarray
    y: np.ndarray
    class_names: tuple[str, ...]
    split_fractions: tuple[float, float, float] = DEFAULT_SPLIT_FRACTIONS
    modality: Modality = Modality.IMAGE
    channel_ranges: ChannelScaler | None = None
    content_hash: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            modality = Modality(self.modality)
        except ValueError:
            allowed = ", ".join(m.value for m in Modality)
            raise DatasetUnavailable(
                f"dataset {self.name!r}: unknown modality {self.modality!r}; "
                f"choose one of: {allowed}"
            ) from None
        object.__setattr__(self, "modality", modality)
        if modality is Modality.IMAGE:
            self._check_images()
        elif modality is Modality.SERIES:
            self._check_series()
        else:
            self._check_points()
        if len(self.x) != len(self.y):
            raise DatasetUnavailable(
                f"dataset {self.name!r}: {len(self.x)} records but {len(self.y)} labels"
            )
        if self.y.min() < 0 or self.y.max() >= len(self.class_names):
            raise DatasetUnavailable(
                f"dataset {self.name!r}: labels must be 0..{len(self.class_names) - 1}"
            )
        object.__setattr__(self, "content_hash", content_hash(self.x, self.y, self.class_names))

    def _check_images(self) -> None:
        if self.x.ndim != 4:
            raise DatasetUnavailable(
                f"dataset {self.name!r}: images must be (N, C, H, W), got shape {self.x.shape}"
            )
        if self.channel_ranges is not None:
            raise DatasetUnavailable(f"dataset {self.name!r}: channel_ranges apply to series")
        if not np.isfinite(self.x).all():
            raise DatasetUnavailable(f"dataset {self.name!r}: images contain NaN or infinity")
        if self.x.min() < 0 or self.x.max() > 1:
            raise DatasetUnavailable(
                f"dataset {self.name!r}: pixel values must lie in [0, 1], "
                f"got [{self.x.min():.3g}, {self.x.max():.3g}]"
            )

    def _check_series(self) -> None:
        if self.x.ndim != 3 or min(self.x.shape[1:]) < 1:
            raise DatasetUnavailable(
                f"dataset {self.name!r}: series must be (N, T, F), got shape {self.x.shape}"
            )
        if not np.isfinite(self.x).all():
            raise DatasetUnavailable(f"dataset {self.name!r}: series contain NaN or infinity")
        ranges = self.channel_ranges
        if ranges is None and (self.x.min() < -1 or self.x.max() > 1):
            raise DatasetUnavailable(
                f"dataset {self.name!r}: series values must lie in [-1, 1] (or come with fixed "
                f"channel_ranges), got [{self.x.min():.3g}, {self.x.max():.3g}]"
            )
        if ranges is not None and len(ranges.lower) != self.x.shape[2]:
            raise DatasetUnavailable(
                f"dataset {self.name!r}: {len(ranges.lower)} channel ranges for "
                f"{self.x.shape[2]} channels"
            )

    def _check_points(self) -> None:
        if self.x.ndim != 2 or self.x.shape[1] < 1:
            raise DatasetUnavailable(
                f"dataset {self.name!r}: points must be (N, D), got shape {self.x.shape}"
            )
        if self.channel_ranges is not None:
            raise DatasetUnavailable(f"dataset {self.name!r}: channel_ranges apply to series")
        if not np.isfinite(self.x).all():
            raise DatasetUnavailable(f"dataset {self.name!r}: points contain NaN or infinity")

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def shape(self) -> tuple[int, ...]:
        """One record's shape: (C, H, W), (T, F) or (D,)."""
        return tuple(self.x.shape[1:])


def content_hash(x: np.ndarray, y: np.ndarray, class_names: tuple[str, ...] = ()) -> str:
    """SHA-256 (hex) of arrays' dtypes, shapes and C-order bytes, and of the class names."""
    digest = hashlib.sha256()
    for array in (x, y):
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(memoryview(array).cast("B"))
    digest.update(json.dumps(list(class_names)).encode())
    return digest.hexdigest()


def to_float_images(x: np.ndarray) -> np.ndarray:
    """Images ``x`` as C-contiguous float32."""
    return np.ascontiguousarray(x, dtype=np.float32)


#: ``loader(data_home)``, or ``loader(data_home, window_stride=k)`` for a windowed dataset.
Loader = Callable[..., Dataset]


@dataclass(frozen=True)
class DatasetSpec:
    """What one registered dataset is, known without loading it; each dataset module declares
    its own and :mod:`audit.datasets.catalog` collects them.

    ``window_stride``: for records cut into windows from longer recordings, the default step
    (samples) between window starts, which ``--window-stride`` may change; None for datasets
    whose records are not windows. ``split_fractions`` and ``channel_ranges`` are those the
    loaded :class:`Dataset` carries. ``train_per_class`` and ``classes``: where set, the quick
    and standard profiles cap D_train at ``train_per_class * classes`` records (records per
    class, not the profiles' fixed 50; :func:`audit.profiles.profile_for_dataset`).
    ``profile_overrides``: per profile name, (setting, value) pairs that replace the profile's
    for this dataset (measured where they are declared); a user's flag still overrides them.
    ``reads_data_home``: whether the loader reads (or downloads to) ``--data-home``; the others
    are embedded, and a ``--data-home`` given for them is refused rather than ignored.
    """

    name: str
    modality: Modality
    loader: Loader
    split_fractions: tuple[float, float, float] = DEFAULT_SPLIT_FRACTIONS
    window_stride: int | None = None
    channel_ranges: ChannelScaler | None = None
    train_per_class: int | None = None
    classes: int | None = None
    profile_overrides: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    reads_data_home: bool = False

    def overrides_for(self, profile: str) -> dict[str, Any]:
        """The settings this dataset replaces in ``profile`` (empty: none)."""
        return dict(next((pairs for name, pairs in self.profile_overrides if name == profile), ()))

    @property
    def train_cap(self) -> int | None:
        """The quick/standard profiles' |D_train| for this dataset, or None (the profile's)."""
        if self.train_per_class is None or self.classes is None:
            return None
        return self.train_per_class * self.classes

    def load(self, data_home: Path | None, *, window_stride: int | None = None) -> Dataset:
        """Load the data; ``window_stride`` (windowed datasets only) is passed to the loader."""
        if window_stride is None:
            return self.loader(data_home)
        return self.loader(data_home, window_stride=window_stride)
