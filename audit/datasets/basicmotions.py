"""BasicMotions (UEA/UCR archive): 80 real smartwatch recordings, 3-D accelerometer and 3-D
gyroscope at 10 Hz for 10 s (100 x 6), of four activities (standing, running, walking,
badminton). An offline stand-in for MotionSense, read as package data from an installed sktime
or aeon (both ship the same two ``.ts`` files) WITHOUT importing either package.

The archive's own TRAIN/TEST division is ignored: both files are pooled and the pipeline splits
them like every other dataset. The fixed channel ranges :data:`RANGES` (not the records'
own minima and maxima) clip and scale them to [-1, 1] in the pipeline.
"""

from __future__ import annotations

import hashlib
import logging
from importlib import metadata
from pathlib import Path

import numpy as np

from audit.datasets.dataset import Dataset, DatasetSpec, DatasetUnavailable
from audit.datasets.series import GYRO_RAD_S, ChannelScaler, G
from dpvae_core.records import Modality

log = logging.getLogger(__name__)

NAME = "basicmotions"
#: Distributions that ship the files, and each file's SHA-256 (identical in sktime 1.2.0 and
#: aeon 1.6.0, read from their wheels).
PACKAGES = ("sktime", "aeon")
SHA256 = {
    "TRAIN": "8dc43cc6306cb679c888c01e26f91772ac4441a916da43bac8b79734a538b9d6",
    "TEST": "79213102bc6fca1a398ad98ce1185dff0208fa3d1465e687f48288946b0ff8dc",
}

#: Fixed ranges of the 6 channels, not taken from the records: the smartwatch accelerometer
#: (m/s^2) within a +-8 g full scale, the gyroscope (rad/s) within +-2000 deg/s.
RANGES = ChannelScaler(
    lower=np.array([-8 * G] * 3 + [-GYRO_RAD_S] * 3),
    upper=np.array([8 * G] * 3 + [GYRO_RAD_S] * 3),
    source="BasicMotions smartwatch: accelerometer +-8 g in m/s^2, gyroscope +-2000 deg/s in rad/s",
)


def packaged_files() -> tuple[Path, Path]:
    """(TRAIN, TEST) ``.ts`` paths inside the first installed package of :data:`PACKAGES`.

    Found through ``importlib.metadata`` (the distribution's file location), so the package is
    never imported. Raises DatasetUnavailable when none is installed or a file's checksum
    differs from the pinned one.
    """
    for package in PACKAGES:
        try:
            dist = metadata.distribution(package)
        except metadata.PackageNotFoundError:
            continue
        paths = tuple(
            Path(str(dist.locate_file(f"{package}/datasets/data/BasicMotions/BasicMotions_{s}.ts")))
            for s in SHA256
        )
        if all(p.is_file() for p in paths):
            for split, path in zip(SHA256, paths, strict=True):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                if digest != SHA256[split]:
                    raise DatasetUnavailable(
                        f"dataset {NAME!r}: {str(path)!r} has SHA-256 {digest}, not the pinned "
                        f"{SHA256[split]}; this {package} release ships a different file"
                    )
            return paths  # type: ignore[return-value]
    raise DatasetUnavailable(
        f"dataset {NAME!r} is read from an installed sktime or aeon package (package data), and "
        f"neither is installed with its BasicMotions files; install one (pip install sktime) or "
        f"use --dataset motionsense --data-home DIR"
    )


def read_ts(path: Path) -> tuple[np.ndarray, list[str], tuple[str, ...]]:
    """An equal-length multivariate ``.ts`` file with class labels: (x (N, T, F) float32,
    labels, the header's class names in order)."""
    header: dict[str, str] = {}
    series: list[np.ndarray] = []
    labels: list[str] = []
    in_data = False
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not in_data:
            key, _, value = line.partition(" ")
            header[key.lower()] = value.strip()
            in_data = key.lower() == "@data"
            continue
        *dims, label = line.split(":")
        try:
            series.append(np.array([[float(v) for v in d.split(",")] for d in dims]).T)
        except ValueError:
            raise DatasetUnavailable(f"{str(path)!r} line {number}: not numeric series") from None
        labels.append(label.strip())
    classes = tuple(header.get("@classlabel", "").split()[1:])
    if not series or not classes or len({s.shape for s in series}) != 1:
        raise DatasetUnavailable(
            f"{str(path)!r} is not an equal-length labelled .ts file with data"
        )
    unknown = sorted(set(labels) - set(classes))
    if unknown:
        raise DatasetUnavailable(f"{str(path)!r}: labels {unknown} are not in @classLabel")
    return np.stack(series).astype(np.float32), labels, classes


def load_basicmotions(data_home: Path | None = None) -> Dataset:
    """The 80 BasicMotions series (80, 100, 6) in sensor units; ``data_home`` is unused."""
    parts = [read_ts(path) for path in packaged_files()]
    classes = parts[0][2]
    x = np.concatenate([p[0] for p in parts])
    y = np.array([classes.index(label) for p in parts for label in p[1]], dtype=np.int64)
    log.info("BasicMotions: %d series of shape %s", len(x), x.shape[1:])
    return Dataset(NAME, x, y, classes, modality=Modality.SERIES, channel_ranges=RANGES)


SPEC = DatasetSpec(
    name=NAME, modality=Modality.SERIES, loader=load_basicmotions, channel_ranges=RANGES
)
