"""Where a run directory keeps its files: the names the sweep, the report and the gate share."""

from __future__ import annotations

import re
from pathlib import Path

from audit.rows.row import RESULT_KEY

CELLS_DIR = "cells"
RUNS_CSV = "runs.csv"
MANIFEST = "run.json"
CONFIG_FILE = "config.json"
MODEL_FILE = "model.pt"
SCORES_FILE = "scores.npz"
ATTACK_INDEX_FILE = "attack_index.npz"
#: A run's report: ``OUT/report/report.md`` (a sweep's or a folder of attacked releases').
REPORT_DIR = "report"
REPORT_MD = "report.md"
#: What ``io`` names its temporary files: mkstemp's ``.NAME.XXXXXXXX.tmp``.
TEMP_FILE = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")
SORT_KEYS = ["dataset", "mech", "param_value", "seed", *RESULT_KEY]
SCORES_PREFIX = "scores_"


def cell_path(run_dir: Path, config_hash: str) -> Path:
    """The directory of cell ``config_hash`` in ``run_dir`` (whether or not it exists)."""
    return Path(run_dir) / CELLS_DIR / config_hash
