"""The CI gate: every row of ``runs.csv`` against a thresholds file, and its calibration.

Thresholds file (JSON, ``schema_version`` 1)::

    {"schema_version": 1,
     "description": "free text (optional)",
     "entries": [
       {"dataset": "lfw-subset", "profile": "quick", "mech": "none", "param_value": null,
        "distance": "any", "min_mi_ap": 0.5, "max_mi_ap": null, "min_acc": 0.5,
        "tolerance": 0.02, "margin_source": "how the numbers were chosen"}]}

An entry matches a row when dataset and mech are equal, ``profile`` is null or equal,
``param_value`` is null (any value; the baseline has none) or equal, and ``distance`` is ``"any"``
or equal. Every matching entry is enforced (so a specific entry can tighten a general one):

- ``max_mi_ap`` (private mechanisms only): fails when MI AP > max_mi_ap + tolerance;
- ``min_mi_ap`` (the baseline ``none`` only): fails when MI AP < min_mi_ap - tolerance, so that an
  attack that silently broke (MI AP at chance everywhere) cannot pass as "private";
- ``min_acc``: fails when accuracy < min_acc - tolerance. A floor that cannot fail, one with
  ``min_acc - tolerance`` at or below chance accuracy (1 / #classes, ``chance_acc`` in the entry,
  or the row's ``acc_base``), is refused: calibration drops it instead (``min_acc`` null and
  ``min_acc_dropped`` saying why).

``source_commands`` (optional): the sweep command(s) whose runs the file was calibrated from, so
that it can be reproduced.

A NaN observation fails any limit that applies to it. Rows that no entry matches are reported as
unchecked; a file that matches no row at all is an error, so a misconfigured gate cannot pass.

Rows are read from the run's cells (:func:`audit.results.load_rows`), not from ``runs.csv``; a
damaged cell is named in a warning and its rows are missing. An entry that matches no row fails
the gate when the run *should* have had its rows:

- the run has a manifest (``run.json``, written by every sweep): when some cell a sweep into the
  directory planned has the entry's dataset, profile (if set), mech and param_value (if set), so
  a sweep of only some mechanisms or grid values (the CI's series cells) is held only to its own
  cells, and an unfinished or damaged cell fails every entry that covers it;
- no manifest (``runs.csv`` alone): when the run has rows of the entry's dataset, profile (if
  set) and mech at all.

Other entries that match no row (other datasets, mechanisms the run did not include) are noted.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audit import io, results
from audit.config import MechanismName, ProfileName
from audit.datasets import check_dataset_name

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
ANY = "any"
DISTANCES = ("mse", "ssim")  # attacks.Distance values; kept literal so the gate stays light
CHECK_COLUMNS = ("dataset", "mech", "param_name", "param_value", "seed", "distance", "mi_ap", "acc")
TOP_FIELDS = {"schema_version", "description", "entries", "source_commands"}
REQUIRED_FIELDS = ("dataset", "mech", "param_value", "distance", "tolerance", "margin_source")
LIMIT_FIELDS = ("max_mi_ap", "min_mi_ap", "min_acc")
PARAM_SYMBOLS = {"noise_multiplier": "z", "eps_i": "εᵢ", "sigma": "σ"}
NONE = MechanismName.NONE.value
DEFAULT_SIGMAS = 3.0
DEFAULT_TOLERANCE_FLOOR = 0.02


def read_runs(run_dir: Path, required: Sequence[str] = CHECK_COLUMNS) -> pd.DataFrame:
    """A run's rows (from its cells; see :func:`audit.results.load_rows`), which must hold rows
    and the ``required`` columns."""
    return results.load_rows(run_dir, required)


def param_label(mech: str, param_name: str, value: float) -> str:
    """``'z=0.1'`` (paper 003's symbols), or ``'none'`` for the non-private baseline."""
    if mech == NONE or pd.isna(value):
        return NONE
    return f"{PARAM_SYMBOLS.get(param_name, param_name)}={value:g}"


def _number(name: str, value: Any, *, low: float, high: float, optional: bool) -> None:
    if value is None and optional:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not low <= value <= high:
        null = " or null" if optional else ""
        raise ValueError(f"{name} must be a number in [{low:g}, {high:g}]{null}, got {value!r}")


def check_acc_floor(min_acc: float, tolerance: float, chance: float) -> None:
    """Refuse an accuracy floor that cannot fail: ``min_acc - tolerance`` at or below chance."""
    if min_acc - tolerance <= chance:
        raise ValueError(
            f"min_acc {min_acc:.4g} (minus tolerance {tolerance:g}) is at or below chance "
            f"accuracy {chance:.4g}, a floor no classifier can fail; set min_acc to null "
            "(and say why in min_acc_dropped) or raise it above chance"
        )


@dataclass(frozen=True)
class Threshold:
    """One entry of a thresholds file (see the module docstring for its meaning)."""

    dataset: str
    mech: str
    param_value: float | None
    distance: str
    tolerance: float
    margin_source: str
    max_mi_ap: float | None = None
    min_mi_ap: float | None = None
    min_acc: float | None = None
    profile: str | None = None
    chance_acc: float | None = None
    min_acc_dropped: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.dataset, str):
            raise ValueError(f"dataset must be a string, got {self.dataset!r}")
        check_dataset_name(self.dataset)
        names = [m.value for m in MechanismName]
        if self.mech not in names:
            raise ValueError(f"mech {self.mech!r} is unknown; choose one of: {', '.join(names)}")
        profiles = [p.value for p in ProfileName]
        if self.profile is not None and self.profile not in profiles:
            raise ValueError(
                f"profile {self.profile!r} is unknown; choose null or one of: {', '.join(profiles)}"
            )
        if self.distance not in (ANY, *DISTANCES):
            raise ValueError(
                f"distance {self.distance!r} is unknown; choose {ANY!r} or one of: "
                f"{', '.join(DISTANCES)}"
            )
        self._check_param_and_limits()
        if not isinstance(self.margin_source, str) or not self.margin_source.strip():
            raise ValueError(
                f"margin_source must say how the limits were chosen, got {self.margin_source!r}"
            )

    def _check_param_and_limits(self) -> None:
        if self.mech == NONE and self.param_value is not None:
            raise ValueError(
                f"param_value must be null for mech 'none' (the baseline has no "
                f"parameter), got {self.param_value!r}"
            )
        if self.param_value is not None:
            _number("param_value", self.param_value, low=0, high=math.inf, optional=False)
        _number("tolerance", self.tolerance, low=0, high=1, optional=False)
        for name in LIMIT_FIELDS:
            _number(name, getattr(self, name), low=0, high=1, optional=True)
        if all(getattr(self, name) is None for name in LIMIT_FIELDS):
            raise ValueError(f"sets no limit; give at least one of {', '.join(LIMIT_FIELDS)}")
        if self.mech == NONE and self.max_mi_ap is not None:
            raise ValueError(
                "max_mi_ap applies to private mechanisms; for mech 'none' (the "
                "baseline) use min_mi_ap, the floor that catches a broken attack"
            )
        _number("chance_acc", self.chance_acc, low=0, high=1, optional=True)
        if self.min_acc is not None and self.chance_acc is not None:
            check_acc_floor(self.min_acc, self.tolerance, self.chance_acc)
        if self.min_acc_dropped is not None and self.min_acc is not None:
            raise ValueError("min_acc_dropped says the floor was dropped, so min_acc must be null")
        if self.mech != NONE and self.min_mi_ap is not None:
            raise ValueError(
                f"min_mi_ap is the baseline's floor (mech 'none'); for mech "
                f"{self.mech!r} use max_mi_ap"
            )

    def matches(self, row: Any) -> bool:
        """Whether this entry applies to ``row`` (a runs.csv row as a namedtuple or Series)."""
        if (row.dataset, row.mech) != (self.dataset, self.mech):
            return False
        if self.profile is not None and getattr(row, "profile", None) != self.profile:
            return False
        if self.distance != ANY and row.distance != self.distance:
            return False
        return self.param_value is None or (
            not pd.isna(row.param_value) and math.isclose(row.param_value, self.param_value)
        )

    def expects(self, cell: dict[str, Any]) -> bool:
        """Whether a cell a sweep planned (``dataset``, ``profile``, ``mech``, ``param_value``)
        yields rows this entry must match (the distance is a row's, not a cell's)."""
        if (cell.get("dataset"), cell.get("mech")) != (self.dataset, self.mech):
            return False
        if self.profile is not None and cell.get("profile") != self.profile:
            return False
        value = cell.get("param_value")
        return self.param_value is None or (
            value is not None and math.isclose(float(value), self.param_value)
        )

    def describe(self) -> str:
        value = "any" if self.param_value is None else f"{self.param_value:g}"
        profile = self.profile or "any profile"
        return f"{self.dataset} {profile} {self.mech} param {value} distance {self.distance}"

    def limits(self) -> list[tuple[str, str, float, int]]:
        """(limit field, runs.csv column, limit, direction) of each set limit; direction +1 is an
        upper bound, -1 a lower bound."""
        spec = (("max_mi_ap", "mi_ap", 1), ("min_mi_ap", "mi_ap", -1), ("min_acc", "acc", -1))
        return [(f, col, getattr(self, f), d) for f, col, d in spec if getattr(self, f) is not None]


def parse_thresholds(data: Any, *, source: str = "thresholds") -> tuple[Threshold, ...]:
    """Validate a decoded thresholds document; the ValueError names the entry and the field."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(data).__name__}")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(
            f"{source}: schema_version {data.get('schema_version')!r}, this code "
            f"reads {SCHEMA_VERSION}"
        )
    unknown = sorted(set(data) - TOP_FIELDS)
    if unknown:
        raise ValueError(
            f"{source}: unknown top-level field(s) {unknown}; allowed: {sorted(TOP_FIELDS)}"
        )
    entries = data.get("entries")
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{source}: 'entries' must be a non-empty list, got {entries!r}")
    return tuple(_parse_entry(e, f"{source}: entries[{i}]") for i, e in enumerate(entries))


def _parse_entry(entry: Any, where: str) -> Threshold:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object, got {entry!r}")
    allowed = {f.name for f in fields(Threshold)}
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(allowed)}")
    missing = [f for f in REQUIRED_FIELDS if f not in entry]
    if missing:
        raise ValueError(f"{where}: missing required field(s) {missing}")
    try:
        return Threshold(**entry)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def load_thresholds(path: Path) -> tuple[Threshold, ...]:
    """Read and validate a thresholds file."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"thresholds file {str(path)!r} does not exist")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    return parse_thresholds(data, source=str(path))


@dataclass(frozen=True)
class Violation:
    """One limit one row broke."""

    dataset: str
    mech: str
    param: str
    seed: int
    distance: str
    metric: str
    observed: float
    limit: float
    tolerance: float


@dataclass(frozen=True)
class CheckResult:
    """Outcome of the gate: counts, violations, and what was not covered."""

    n_rows: int
    n_checked: int
    n_thresholds: int
    violations: tuple[Violation, ...]
    unchecked: tuple[str, ...]
    unused_entries: tuple[int, ...]
    missing: tuple[str, ...] = ()
    missing_entries: tuple[int, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.violations and not self.missing


def _broken(observed: float, limit: float, tolerance: float, direction: int) -> bool:
    if math.isnan(observed):
        return True
    return observed > limit + tolerance if direction > 0 else observed < limit - tolerance


def check_runs(
    frame: pd.DataFrame,
    thresholds: Sequence[Threshold],
    planned: Sequence[dict[str, Any]] | None = None,
) -> CheckResult:
    """Compare every row of ``frame`` (a run's rows) with every matching threshold entry.

    ``planned``: the cells the run's sweeps planned (:func:`audit.results.planned_cells`), or
    None where unknown; it decides which entries that match no row fail (module docstring).
    """
    violations: list[Violation] = []
    used: set[int] = set()
    unchecked: list[str] = []
    n_checked = 0
    for row in frame.itertuples(index=False):
        matching = [i for i, t in enumerate(thresholds) if t.matches(row)]
        label = param_label(row.mech, row.param_name, row.param_value)
        if not matching:
            unchecked.append(f"{row.dataset} {row.mech} {label} seed {row.seed} {row.distance}")
            continue
        n_checked += 1
        used.update(matching)
        for i in matching:
            t = thresholds[i]
            chance = getattr(row, "acc_base", None)
            if t.min_acc is not None and chance is not None and not pd.isna(chance):
                try:
                    check_acc_floor(t.min_acc, t.tolerance, float(chance))
                except ValueError as exc:
                    raise ValueError(
                        f"thresholds entries[{i}] ({row.dataset} {row.mech}): {exc}"
                    ) from None
            for name, column, limit, direction in t.limits():
                observed = float(getattr(row, column))
                if _broken(observed, limit, t.tolerance, direction):
                    violations.append(
                        Violation(
                            row.dataset,
                            row.mech,
                            label,
                            int(row.seed),
                            row.distance,
                            name,
                            observed,
                            limit,
                            t.tolerance,
                        )
                    )
    if n_checked == 0:
        raise ValueError(
            f"no entry of the thresholds matches any of the {len(frame)} rows "
            f"(datasets {sorted(frame.dataset.unique())}, mechanisms "
            f"{sorted(frame.mech.unique())}); the gate would check nothing"
        )
    unused = tuple(i for i in range(len(thresholds)) if i not in used)
    expected = tuple(i for i in unused if _expected(thresholds[i], frame, planned))
    return CheckResult(
        len(frame),
        n_checked,
        len(thresholds),
        tuple(violations),
        tuple(unchecked),
        unused,
        tuple(_missing(i, thresholds[i], planned) for i in expected),
        expected,
    )


def _expected(entry: Threshold, frame: pd.DataFrame, planned: Sequence[dict] | None) -> bool:
    """Whether the run should hold rows that ``entry`` matches (see the module docstring)."""
    if planned is not None:
        return any(entry.expects(cell) for cell in planned)
    mine = frame[(frame["dataset"] == entry.dataset) & (frame["mech"] == entry.mech)]
    if entry.profile is not None and "profile" in mine.columns:
        mine = mine[mine["profile"] == entry.profile]
    return not mine.empty


def _missing(index: int, entry: Threshold, planned: Sequence[dict] | None) -> str:
    why = (
        "a sweep into this directory planned such a cell (unfinished or damaged: rerun it)"
        if planned is not None
        else f"the run has {entry.mech} rows of this dataset and profile"
    )
    return f"MISSING: threshold entry {index} ({entry.describe()}) matches no row, though {why}"


def check_dir(run_dir: Path, thresholds_path: Path) -> CheckResult:
    """The gate on the run in ``run_dir`` against the thresholds file at ``thresholds_path``."""
    thresholds = load_thresholds(thresholds_path)
    frame = read_runs(run_dir)
    if "profile" in frame.columns:
        frame["profile"] = frame["profile"].astype(object).where(frame["profile"].notna(), None)
    return check_runs(frame, thresholds, results.planned_cells(run_dir))


def format_violations(violations: Sequence[Violation]) -> str:
    """A plain-text table, one line per violation."""
    headers = (
        "dataset",
        "mech",
        "param",
        "seed",
        "distance",
        "metric",
        "observed",
        "limit",
        "tolerance",
    )
    body = [
        (
            v.dataset,
            v.mech,
            v.param,
            str(v.seed),
            v.distance,
            v.metric,
            f"{v.observed:.4f}",
            f"{v.limit:.4f}",
            f"{v.tolerance:.4f}",
        )
        for v in violations
    ]
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in (headers, *body)
    ]
    return "\n".join(line.rstrip() for line in lines)


# ---- calibration ------------------------------------------------------------------------------


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

    For each (dataset, profile, mech, param_value, distance): mean m and sample sd s (ddof 1;
    0 for a single run) of MI AP and accuracy over the runs; ``max_mi_ap = m + k*s`` for private
    mechanisms, ``min_mi_ap = m - k*s`` for the baseline, ``min_acc = m - k*s``, all clamped to
    [0, 1], with ``tolerance`` (the floor below which no margin shrinks) stored in each entry, so
    the effective limits are m +- (k*s + tolerance). Identical cells (same config hash) found in
    several directories count once. An accuracy floor with ``min_acc - tolerance`` at or below
    chance (the rows' ``acc_base``, 1 / #classes) cannot fail and is not written: ``min_acc`` is
    null and ``min_acc_dropped`` says why.

    ``source_commands``: the sweep commands that produced the runs; without, they are read from
    each cell's ``metadata.json`` (``command``, recorded by the sweep), and a run that lacks one
    is refused, so the file always names how to reproduce it rather than scratch directories.
    """
    if not math.isfinite(sigmas) or sigmas < 0:
        raise ValueError(f"--sigmas must be a non-negative number, got {sigmas!r}")
    _number("--tolerance", tolerance, low=0, high=1, optional=False)
    frame = _calibration_rows(run_dirs)
    commands = list(source_commands) or _recorded_commands(run_dirs, frame)
    stamp = datetime.date.today().isoformat()
    entries = []
    keys = ["dataset", "profile", "mech", "param_value", "distance"]
    for key, group in frame.groupby(keys, dropna=False, sort=True):
        entries.append(
            _calibrated_entry(
                dict(zip(keys, key, strict=True)),
                group,
                sigmas=sigmas,
                tolerance=tolerance,
                stamp=stamp,
            )
        )
    doc = {
        "schema_version": SCHEMA_VERSION,
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
    frame = frame.drop_duplicates(["config_hash", "distance"])
    if len(frame) < before:
        log.info(
            "calibration: %d duplicate row(s) of identical cells counted once", before - len(frame)
        )
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
    baseline = key["mech"] == NONE
    where = " ".join(
        [
            key["dataset"],
            str(key["profile"]),
            key["mech"],
            f"{key['param_value']:g}",
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
        "distance": key["distance"],
        "max_mi_ap": None if baseline else _clamp(mi_mean + sigmas * mi_sd),
        "min_mi_ap": _clamp(mi_mean - sigmas * mi_sd) if baseline else None,
        "min_acc": _clamp(acc_mean - sigmas * acc_sd),
        "tolerance": tolerance,
        "margin_source": note,
        "chance_acc": float(group["acc_base"].max()),
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


def write_thresholds(path: Path, doc: dict[str, Any]) -> None:
    """Write a validated thresholds document as indented JSON, atomically."""
    parse_thresholds(doc, source=str(path))
    io.write_text(Path(path), json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
