"""The tuning records of a run (``--tune``): ``OUT/cache/tuning-<key>.json``, one per tuned cell,
keyed by what the tuning depends on (:func:`audit.cell.tuning.tuning_key`), its digest recorded in
``OUT/run.json`` as the other caches' are, so a resumed sweep does not tune again."""

from __future__ import annotations

import logging
from pathlib import Path

from audit import io, results
from audit.cell.tuning import TuningRecord, tuning_key
from audit.config import CellConfig

log = logging.getLogger(__name__)


def tuning_path(out: Path, key: str) -> Path:
    """Where the tuning record of key ``key`` lies in run ``out`` (whether or not it exists)."""
    return Path(out) / "cache" / f"tuning-{key}.json"


def cached_tuning(out: Path, cell: CellConfig, *, warn: bool = True) -> TuningRecord | None:
    """The recorded tuning of ``cell`` in ``out``; None where there is none, where the file does
    not match the digest ``run.json`` recorded of it, or where it does not read back (the last
    two named in a warning, ``warn``): the cell is tuned again."""
    key = tuning_key(cell)
    path = tuning_path(out, key)
    if not path.is_file():
        return None
    problem = results.file_problem(out, path)
    if problem is not None:
        if warn:
            log.warning("tuning cell %s again: %s", cell.config_hash, problem)
        return None
    try:
        record = TuningRecord.from_json(io.read_json(path))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        if warn:
            log.warning("tuning cell %s again: %s is damaged (%s)", cell.config_hash, path, exc)
        return None
    return record if record.key == key else None


def save_tuning(out: Path, record: TuningRecord) -> Path:
    """Write ``record`` into ``out``'s cache and record its digest in ``run.json``."""
    path = tuning_path(out, record.key)
    io.write_json(path, record.to_json())
    results.record_file(out, path)
    return path
