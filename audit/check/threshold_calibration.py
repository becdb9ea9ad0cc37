"""Thresholds from measured sweeps: mean +- k sd per (dataset, profile, mech, param_value,
attack, distance), each cell's held-out worst case included as the attack ``worst-case``,
written in the gate's format (:mod:`audit.check`)."""

from __future__ import annotations

import datetime
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audit import io
from audit.check.checking import CHECK_COLUMNS, read_runs
from audit.check.thresholds import THRESHOLDS_SCHEMA_VERSION, number, parse_thresholds
from audit.mechanisms import BASELINE
from audit.rows import derived
from audit.rows.row import RESULT_KEY
from audit.rows.tradeoff import chance_accuracy

log = logging.getLogger(__name__)

DEFAULT_SIGMAS = 3.0
DEFAULT_TOLERANCE_FLOOR = 0.02
#: What one calibrated entry covers.
ENTRY_KEY = ["dataset", "profile", "mech", "param_value", "attack", "distance"]


def _spread(values: pd.Series) -> tuple[float, float, int]:
    arr = values.to_numpy(dtype=np.float64)
    n = len(arr)
    return float(arr.mean()), float(arr.std(ddof=1)) if n > 1 else 0.0, n


def _clamp(x: float) -> float:
    return min(1.0, max(0.0, x))


def calibrate(
    run_dirs: Sequence[Path],
    *,
    sigmas: float = DEFAULT_SIGMAS,
    tolerance: float = DEFAULT_TOLERANCE_FLOOR,
    source_commands: Sequence[str] = (),
) -> dict[str, Any]:
    """A thresholds document from measured sweeps (several seeds and/or directories).

    For each (dataset, profile, mech, param_value, attack, distance): mean m and sample sd s
    (ddof 1; 0 for a single run) of MI AP and accuracy over the runs; ``max_mi_ap = m + k*s`` for
    private mechanisms, ``min_mi_ap = m - k*s`` for the baseline, ``min_acc = m - k*s``, all
    clamped to [0, 1], with ``tolerance`` (the floor below which no margin shrinks) stored in
    each entry, so the effective limits are m +- (k*s + tolerance). Identical cells (same config
    hash) found in several directories count once. An accuracy floor with ``min_acc - tolerance``
    at or below chance (the rows' ``acc_base``, 1 / #classes, or their ``acc_majority`` where
    higher: a classifier always answering D_test's most common class scores it) cannot fail and
    is not written: ``min_acc`` is null and ``min_acc_dropped`` says why.

    ``source_commands``: the sweep commands that produced the runs; without, they are read from
    each cell's ``metadata.json`` (``command``, recorded by the sweep), and a run that lacks one
    is refused, so the file always names how to reproduce it rather than scratch directories.
    """
    if not math.isfinite(sigmas) or sigmas < 0:
        raise ValueError(f"--sigmas must be a non-negative number, got {sigmas!r}")
    number("--tolerance", tolerance, low=0, high=1, optional=False)
    frame = _calibration_rows(run_dirs)
    commands = list(source_commands) or _recorded_commands(run_dirs, frame)
    stamp = datetime.date.today().isoformat()
    entries = []
    for key, group in frame.groupby(ENTRY_KEY, dropna=False, sort=True):
        entries.append(
            _calibrated_entry(
                dict(zip(ENTRY_KEY, key, strict=True)),
                group,
                sigmas=sigmas,
                tolerance=tolerance,
                stamp=stamp,
            )
        )
    doc = {
        "schema_version": THRESHOLDS_SCHEMA_VERSION,
        "description": f"calibrated on {stamp} from the runs of source_commands with "
        f"limits = mean +- {sigmas:g} sd and a tolerance floor of {tolerance:g}; accuracy "
        "floors at or below chance are dropped (min_acc_dropped)",
        "source_commands": commands,
        "entries": entries,
    }
    parse_thresholds(doc, source="calibrated thresholds")  # what we write must load
    return doc


def _recorded_commands(run_dirs: Sequence[Path], frame: pd.DataFrame) -> list[str]:
    """The distinct sweep commands recorded in the metadata of the cells behind ``frame``."""
    commands: list[str] = []
    for run_dir in run_dirs:
        hashes = set(frame.loc[frame["_run_dir"] == str(run_dir), "config_hash"])
        for config_hash in sorted(hashes):
            path = Path(run_dir) / "cells" / str(config_hash) / "metadata.json"
            command = io.read_json(path).get("command") if path.is_file() else None
            if not command:
                raise ValueError(
                    f"{path} records no sweep command, so the thresholds could not name how to "
                    "reproduce them; pass --source-command 'benchmark.py ...' (once per sweep)"
                )
            if command not in commands:
                commands.append(command)
    return commands


def _calibration_rows(run_dirs: Sequence[Path]) -> pd.DataFrame:
    if not run_dirs:
        raise ValueError("--calibrate needs at least one sweep directory")
    frame = pd.concat(
        [
            read_runs(d, (*CHECK_COLUMNS, "config_hash", "acc_base")).assign(_run_dir=str(d))
            for d in run_dirs
        ],
        ignore_index=True,
    )
    before = len(frame)
    frame = frame.drop_duplicates(["config_hash", *RESULT_KEY])
    if len(frame) < before:
        log.info(
            "calibration: %d duplicate row(s) of identical cells counted once", before - len(frame)
        )
    worst = derived.worst_case_rows(frame)
    if not worst.empty:  # each cell's held-out worst case gets entries of its own
        frame = pd.concat([frame, worst], ignore_index=True)
    bad = frame[frame[["mi_ap", "acc"]].isna().any(axis=1)]
    if not bad.empty:
        raise ValueError(
            f"calibration data has {len(bad)} row(s) with NaN MI AP or accuracy "
            f"(e.g. {bad.iloc[0][['dataset', 'mech', 'param_value', 'seed']].tolist()});"
            " calibrate on finished, healthy runs"
        )
    if "profile" not in frame.columns:
        frame["profile"] = None
    return frame


def _calibrated_entry(
    key: dict[str, Any], group: pd.DataFrame, *, sigmas: float, tolerance: float, stamp: str
) -> dict[str, Any]:
    mi_mean, mi_sd, n = _spread(group["mi_ap"])
    acc_mean, acc_sd, _ = _spread(group["acc"])
    baseline = key["mech"] == BASELINE
    where = " ".join(
        [
            key["dataset"],
            str(key["profile"]),
            key["mech"],
            f"{key['param_value']:g}",
            key["attack"],
            key["distance"],
        ]
    ).replace(" nan", "")
    note = (
        f"calibrated {stamp} by 'benchmark.py check --calibrate' from {n} run(s): MI AP mean "
        f"{mi_mean:.4f} sd {mi_sd:.4f}, acc mean {acc_mean:.4f} sd {acc_sd:.4f}; limits = "
        f"mean {'-' if baseline else '+'} {sigmas:g} sd (acc: mean - {sigmas:g} sd), "
        f"tolerance floor {tolerance:g}"
    )
    if n == 1:
        note += "; one run only: no spread measured, only the tolerance protects against noise"
        log.warning("calibration: %s has a single run; its limits have no measured spread", where)
    entry = {
        "dataset": key["dataset"],
        "profile": None if pd.isna(key["profile"]) else str(key["profile"]),
        "mech": key["mech"],
        "param_value": None
        if baseline or pd.isna(key["param_value"])
        else float(key["param_value"]),
        "attack": key["attack"],
        "distance": key["distance"],
        "max_mi_ap": None if baseline else _clamp(mi_mean + sigmas * mi_sd),
        "min_mi_ap": _clamp(mi_mean - sigmas * mi_sd) if baseline else None,
        "min_acc": _clamp(acc_mean - sigmas * acc_sd),
        "tolerance": tolerance,
        "margin_source": note,
        "chance_acc": chance_accuracy(
            group["acc_base"].max(),
            group["acc_majority"].max() if "acc_majority" in group.columns else None,
        ),
    }
    if entry["min_acc"] - tolerance <= entry["chance_acc"]:
        entry["min_acc_dropped"] = (
            f"calibrated floor {entry['min_acc']:.4f} (mean - {sigmas:g} sd, minus tolerance "
            f"{tolerance:g}) is at or below chance {entry['chance_acc']:.4f}: it could not fail"
        )
        entry["min_acc"] = None
        log.warning("calibration: %s: accuracy floor at or below chance dropped", where)
    if baseline and entry["min_mi_ap"] - tolerance <= 0.5:
        log.warning(
            "calibration: the baseline MI AP floor of %s is at or below chance (0.5); "
            "the gate cannot tell a broken attack from a working one there",
            where,
        )
    return entry
