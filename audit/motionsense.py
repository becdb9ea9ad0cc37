"""MotionSense (Malekzadeh et al.; paper 003, Section 4): iPhone device-motion recordings of 24
subjects in six activities, read in the dataset's own layout.

Layout: ``A_DeviceMotion_data/<activity>_<trial>/sub_<n>.csv`` with an unnamed index column and
the 12 columns of :data:`COLUMNS`, sampled at 50 Hz. Each recording is cut into 10 s windows
(500 samples; non-overlapping unless a stride is given), each labelled by its activity.

No download is attempted: the archive's checksum is not pinned here, and unverified data would
make results irreproducible. The user fetches ``data/A_DeviceMotion_data.zip`` from the MotionSense
repository, unzips it and passes the folder as ``--data-home``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd

from audit.datasets import Dataset, DatasetUnavailable, Modality
from audit.series import windows

log = logging.getLogger(__name__)

NAME = "motionsense"
FOLDER = "A_DeviceMotion_data"
#: Activity codes in the MotionSense repository's label order (paper 003, Figure 7: classes 0-3
#: are movements, 4 and 5 standing and sitting).
ACTIVITIES = ("dws", "ups", "wlk", "jog", "std", "sit")
COLUMNS = (
    "attitude.roll", "attitude.pitch", "attitude.yaw",
    "gravity.x", "gravity.y", "gravity.z",
    "rotationRate.x", "rotationRate.y", "rotationRate.z",
    "userAcceleration.x", "userAcceleration.y", "userAcceleration.z",
)  # fmt: skip
SAMPLE_RATE_HZ = 50
WINDOW = 10 * SAMPLE_RATE_HZ
#: Paper 003: 10 % D_train, 10 % D_val, 80 % D_test.
SPLIT_FRACTIONS = (0.1, 0.1, 0.8)

_TRIAL = re.compile(rf"^({'|'.join(ACTIVITIES)})_(\d+)$")
_SUBJECT = re.compile(r"^sub_(\d+)\.csv$")


def _unavailable(data_home: Path | None, reason: str) -> DatasetUnavailable:
    where = f"--data-home {data_home}" if data_home else "no --data-home given"
    return DatasetUnavailable(
        f"dataset {NAME!r} needs the MotionSense device-motion CSVs "
        f"({FOLDER}/<activity>_<trial>/sub_<n>.csv): {reason} ({where}); it is not downloaded "
        f"here, as no checksum of the archive is pinned: fetch data/{FOLDER}.zip from the "
        f"MotionSense repository (github.com/mmalekzadeh/motion-sense), unzip it into DIR and "
        f"pass --data-home DIR"
    )


def find_root(data_home: Path | None) -> Path:
    """The folder holding the ``<activity>_<trial>`` folders: ``DIR/A_DeviceMotion_data`` or DIR."""
    if data_home is None:
        raise _unavailable(None, "no data folder")
    for root in (Path(data_home) / FOLDER, Path(data_home)):
        if root.is_dir() and any(_TRIAL.match(p.name) and p.is_dir() for p in root.iterdir()):
            return root
    raise _unavailable(data_home, f"no {FOLDER} folder with <activity>_<trial> folders found")


def recordings(root: Path) -> list[tuple[str, int, int, Path]]:
    """(activity, trial, subject, path) of every CSV, sorted by activity order, trial, subject."""
    found = []
    for trial_dir in root.iterdir():
        trial = _TRIAL.match(trial_dir.name)
        if not (trial and trial_dir.is_dir()):
            continue
        for path in trial_dir.iterdir():
            subject = _SUBJECT.match(path.name)
            if subject:
                found.append((trial[1], int(trial[2]), int(subject[1]), path))
    return sorted(found, key=lambda r: (ACTIVITIES.index(r[0]), r[1], r[2]))


def read_recording(path: Path) -> np.ndarray:
    """The 12 device-motion columns of one CSV as float32 (n, 12); the index column is ignored."""
    header = pd.read_csv(path, nrows=0).columns
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise DatasetUnavailable(f"MotionSense file {str(path)!r} lacks column(s) {missing}")
    try:
        frame = pd.read_csv(path, usecols=list(COLUMNS), dtype=np.float64)
    except ValueError as exc:
        raise DatasetUnavailable(f"MotionSense file {str(path)!r} is malformed: {exc}") from None
    return frame[list(COLUMNS)].to_numpy(dtype=np.float32)


def load_motionsense(
    data_home: Path | None, *, window: int = WINDOW, stride: int | None = None
) -> Dataset:
    """MotionSense windows (N, ``window``, 12) in sensor units, labelled by activity.

    ``stride`` (default ``window``: non-overlapping) is the step between window starts within
    one recording; windows never cross recordings. Class names are the activities present, in
    :data:`ACTIVITIES` order. Scaling to [-1, 1] happens per cell from D_train
    (``Dataset.scale_on_train``).
    """
    stride = window if stride is None else stride
    root = find_root(data_home)
    found = recordings(root)
    if not found:
        raise _unavailable(data_home, f"no sub_<n>.csv files under {root}")
    present = [a for a in ACTIVITIES if any(r[0] == a for r in found)]
    xs, ys = [], []
    for activity, _, _, path in found:
        cut = windows(read_recording(path), length=window, stride=stride)
        xs.append(cut)
        ys.append(np.full(len(cut), present.index(activity), dtype=np.int64))
    x = np.concatenate(xs)
    if len(x) == 0:
        raise _unavailable(data_home, f"no recording under {root} has {window} samples")
    log.info("MotionSense: %d windows of %d samples from %d recordings", len(x), window, len(found))
    return Dataset(
        NAME,
        x,
        np.concatenate(ys),
        tuple(present),
        split_fractions=SPLIT_FRACTIONS,
        modality=Modality.SERIES,
        scale_on_train=True,
    )
