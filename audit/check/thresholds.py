"""The thresholds file of the gate: its schema, one entry (:class:`Threshold`), reading and
writing (format and meaning: :mod:`audit.check`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd

from attacks.attack import Measure
from attacks.distances import Distance
from attacks.registry import available_attacks
from audit import io
from audit.datasets import check_dataset_name
from audit.mechanisms import BASELINE, available_mechanisms
from audit.profiles import ProfileName
from audit.rows.derived import WORST_CASE_ATTACK, WORST_CASE_DISTANCE
from audit.rows.row import PAPER_ATTACK
from dpvae_core.path_checks import check_input_file

THRESHOLDS_SCHEMA_VERSION = 1
ANY = "any"
#: What a row's ``distance`` can be: the reconstruction distances, then the other attacks'
#: measures.
DISTANCES = (*(d.value for d in Distance), *(m.value for m in Measure), WORST_CASE_DISTANCE)
TOP_FIELDS = {"schema_version", "description", "entries", "source_commands"}
REQUIRED_FIELDS = ("dataset", "mech", "param_value", "distance", "tolerance", "margin_source")
LIMIT_FIELDS = ("max_mi_ap", "min_mi_ap", "min_acc")


def number(name: str, value: Any, *, low: float, high: float, optional: bool) -> None:
    """Refuse anything but a finite number in [low, high] (or None where ``optional``)."""
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
    """One entry of a thresholds file (see :mod:`audit.check` for its meaning).

    ``attack``: the attack whose rows the entry limits; absent in a file means
    ``reconstruction`` (the trade-off paper's attack); ``worst-case`` limits
    each cell's held-out worst case over its attacks (``audit.rows.derived.worst_case_rows``).
    """

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
    attack: str = PAPER_ATTACK

    def __post_init__(self) -> None:
        if not isinstance(self.dataset, str):
            raise ValueError(f"dataset must be a string, got {self.dataset!r}")
        check_dataset_name(self.dataset)
        names = available_mechanisms()
        if self.mech not in names:
            raise ValueError(f"mech {self.mech!r} is unknown; choose one of: {', '.join(names)}")
        profiles = [p.value for p in ProfileName]
        if self.profile is not None and self.profile not in profiles:
            raise ValueError(
                f"profile {self.profile!r} is unknown; choose null or one of: {', '.join(profiles)}"
            )
        attacks = (*available_attacks(), WORST_CASE_ATTACK)
        if self.attack not in attacks:
            raise ValueError(
                f"attack {self.attack!r} is unknown; choose one of: "
                f"{', '.join(attacks)} (absent: {PAPER_ATTACK})"
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
        if self.mech == BASELINE and self.param_value is not None:
            raise ValueError(
                f"param_value must be null for mech {BASELINE!r} (the baseline has no "
                f"parameter), got {self.param_value!r}"
            )
        if self.param_value is not None:
            number("param_value", self.param_value, low=0, high=math.inf, optional=False)
        number("tolerance", self.tolerance, low=0, high=1, optional=False)
        for name in LIMIT_FIELDS:
            number(name, getattr(self, name), low=0, high=1, optional=True)
        if all(getattr(self, name) is None for name in LIMIT_FIELDS):
            raise ValueError(f"sets no limit; give at least one of {', '.join(LIMIT_FIELDS)}")
        if self.mech == BASELINE and self.max_mi_ap is not None:
            raise ValueError(
                f"max_mi_ap applies to private mechanisms; for mech {BASELINE!r} (the "
                "baseline) use min_mi_ap, the floor that catches a broken attack"
            )
        number("chance_acc", self.chance_acc, low=0, high=1, optional=True)
        if self.min_acc is not None and self.chance_acc is not None:
            check_acc_floor(self.min_acc, self.tolerance, self.chance_acc)
        if self.min_acc_dropped is not None and self.min_acc is not None:
            raise ValueError("min_acc_dropped says the floor was dropped, so min_acc must be null")
        if self.mech != BASELINE and self.min_mi_ap is not None:
            raise ValueError(
                f"min_mi_ap is the baseline's floor (mech {BASELINE!r}); for mech "
                f"{self.mech!r} use max_mi_ap"
            )

    def matches(self, row: Any) -> bool:
        """Whether this entry applies to ``row`` (a runs.csv row as a namedtuple or Series)."""
        if (row.dataset, row.mech) != (self.dataset, self.mech):
            return False
        if self.profile is not None and getattr(row, "profile", None) != self.profile:
            return False
        if row.attack != self.attack:
            return False
        if self.distance != ANY and row.distance != self.distance:
            return False
        return self.param_value is None or (
            not pd.isna(row.param_value) and math.isclose(row.param_value, self.param_value)
        )

    def expects(self, cell: dict[str, Any]) -> bool:
        """Whether a cell a sweep planned (``dataset``, ``profile``, ``mech``, ``param_value``,
        ``attacks``: absent for cells planned before the manifest listed them, which ran the
        reconstruction attack) yields rows this entry must match (the distance is a row's, not a
        cell's)."""
        if (cell.get("dataset"), cell.get("mech")) != (self.dataset, self.mech):
            return False
        if self.profile is not None and cell.get("profile") != self.profile:
            return False
        planned = cell["attacks"]
        if self.attack != WORST_CASE_ATTACK and self.attack not in planned:
            return False  # the worst case is every cell's, whatever attacks it ran
        value = cell.get("param_value")
        return self.param_value is None or (
            value is not None and math.isclose(float(value), self.param_value)
        )

    def describe(self) -> str:
        value = "any" if self.param_value is None else f"{self.param_value:g}"
        profile = self.profile or "any profile"
        return (
            f"{self.dataset} {profile} {self.mech} param {value} attack {self.attack} "
            f"distance {self.distance}"
        )

    def limits(self) -> list[tuple[str, str, float, int]]:
        """(limit field, runs.csv column, limit, direction) of each set limit; direction +1 is an
        upper bound, -1 a lower bound."""
        spec = (("max_mi_ap", "mi_ap", 1), ("min_mi_ap", "mi_ap", -1), ("min_acc", "acc", -1))
        return [(f, col, getattr(self, f), d) for f, col, d in spec if getattr(self, f) is not None]


#: The row columns the limits read.
LIMITED_COLUMNS = ("mi_ap", "acc")


def parse_thresholds(data: Any, *, source: str = "thresholds") -> tuple[Threshold, ...]:
    """Validate a decoded thresholds document; the ValueError names the entry and the field."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(data).__name__}")
    if data.get("schema_version") != THRESHOLDS_SCHEMA_VERSION:
        raise ValueError(
            f"{source}: schema_version {data.get('schema_version')!r}, this code "
            f"reads {THRESHOLDS_SCHEMA_VERSION}"
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
    path = check_input_file(path, "--thresholds", kind="thresholds file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"--thresholds {str(path)!r} is not UTF-8 text (at byte {exc.start}); write the "
            "thresholds file as UTF-8 JSON"
        ) from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise ValueError(
            f"--thresholds {str(path)!r}: JSON nested too deeply to read; a thresholds file is "
            "an object with a list of entries"
        ) from None
    return parse_thresholds(data, source=str(path))


def write_thresholds(path: Path, doc: dict[str, Any]) -> None:
    """Write a validated thresholds document as indented JSON, atomically."""
    parse_thresholds(doc, source=str(path))
    io.write_text(Path(path), json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
