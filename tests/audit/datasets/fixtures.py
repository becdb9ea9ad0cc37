"""MotionSense in its real on-disk layout, for the loader, download, pipeline and report tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from audit.datasets.motionsense import FOLDER, SENSOR_COLUMNS

#: (activity_trial folder, activity frequency in Hz): real trial names of the archive.
FIXTURE_TRIALS = {"dws_1": 0.8, "jog_9": 2.5, "sit_5": 0.1}


FIXTURE_SUBJECTS = (1, 2, 3, 4)


def fixture_rows(subject: int) -> int:
    """Rows of subject n's recordings: 1500 + 137 n (3 windows of 500 each)."""
    return 1500 + 137 * subject


def build_motionsense_fixture(data_home: Path, *, seed: int = 0) -> Path:
    """``DIR/A_DeviceMotion_data/<activity>_<trial>/sub_<n>.csv`` as in the real archive: an
    unnamed index column, then the 12 device-motion columns at 50 Hz. Each activity has its own
    frequency and amplitude, so that classes are learnable; returns DIR."""
    rng = np.random.default_rng(seed)
    for trial, freq in FIXTURE_TRIALS.items():
        folder = data_home / FOLDER / trial
        folder.mkdir(parents=True)
        for subject in FIXTURE_SUBJECTS:
            n = fixture_rows(subject)
            t = np.arange(n)[:, None] / 50.0
            phase = rng.uniform(0, 2 * np.pi, size=len(SENSOR_COLUMNS))
            values = freq * np.sin(2 * np.pi * freq * t + phase) + rng.normal(0, 0.05, (n, 12))
            pd.DataFrame(values, columns=list(SENSOR_COLUMNS)).to_csv(folder / f"sub_{subject}.csv")
    return data_home
