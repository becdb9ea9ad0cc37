"""``runs.csv``: every finished cell's rows collected, derived columns filled, written atomically;
and reading a run's rows back for the report and the gate."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from audit import io
from audit.config import check_cache_schema
from audit.results.cells import cell_config, cell_rows, is_finished
from audit.results.integrity import cell_problem, recorded_files, refusal, run_problems
from audit.results.layout import CELLS_DIR, MANIFEST, RUNS_CSV, SORT_KEYS
from audit.results.locks import locked
from audit.results.manifest import planned_hashes, run_hash, setting_hash
from audit.rows import derived
from audit.rows.row import COLLECTED_COLUMNS, COLUMNS, RESULT_KEY

log = logging.getLogger(__name__)


def collect_rows(out: Path, *, unverified: str = "refuse") -> pd.DataFrame:
    """Every finished cell's rows under ``out``, with ``run_hash``, ``setting_hash`` and
    ``precision`` from its config and phi filled against its baseline; damaged cells are skipped
    with a warning, a cell of another cache schema is refused
    (:func:`audit.config.check_cache_schema`).

    A finished cell whose files do not match the digests ``run.json`` recorded (edited, added,
    missing, or none recorded; :mod:`audit.results.integrity`), or a recorded cache file that
    changed, is refused: ValueError in one line naming the file (``unverified="refuse"``, what
    ``report`` and ``check`` read); with ``unverified="skip"`` (a sweep's ``runs.csv``, rebuilt
    while it computes such cells again) the cell is left out with a warning naming it."""
    if unverified not in ("refuse", "skip"):
        raise ValueError(f"unverified must be 'refuse' or 'skip', got {unverified!r}")
    files = recorded_files(out)
    if unverified == "refuse":
        problems = run_problems(out)
        if problems:
            raise ValueError(refusal(problems))
    rows: list[dict[str, Any]] = []
    for cell_dir in sorted((Path(out) / CELLS_DIR).glob("*/")):
        if unverified == "skip" and (cell_dir / "rows.json").exists():
            problem = cell_problem(out, cell_dir, files)
            if problem is not None:
                log.warning("leaving cell %s out of runs.csv: %s", cell_dir.name, problem)
                continue
        found = cell_rows(cell_dir)
        if found is None:
            continue
        config = cell_config(cell_dir)
        if config is None or "seed" not in config:
            log.warning("skipping cell %s: its config.json is missing or damaged", cell_dir)
            continue
        check_cache_schema(config, f"cell {cell_dir}")
        keys = {
            "run_hash": run_hash(config),
            "setting_hash": setting_hash(config),
            # --precision: a run option, absent (float32) from cells before it existed too
            "precision": config.get("options", {}).get("precision", "float32"),
        }
        rows.extend({**row, **keys} for row in found)
    frame = _restore_floats(pd.DataFrame(rows))
    if frame.empty:
        return pd.DataFrame(columns=[*COLUMNS, *COLLECTED_COLUMNS])
    frame = derived.add_derived_columns(frame)
    ordered = [c for c in COLUMNS if c in frame] + [c for c in frame if c not in COLUMNS]
    return frame[ordered].sort_values(SORT_KEYS, na_position="first").reset_index(drop=True)


NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _restore_floats(frame: pd.DataFrame) -> pd.DataFrame:
    """Numbers ``io.write_json`` stored as text (``'inf'``, ``'nan'``) back as floats, in
    columns that hold only numbers and such text."""
    for column in frame.columns:
        if pd.api.types.is_numeric_dtype(frame[column]):
            continue
        values = frame[column]
        texts = values.isin(list(NON_FINITE))
        numeric = values.map(lambda v: v is None or isinstance(v, int | float))
        if texts.any() and (texts | numeric).all():
            frame[column] = values.map(lambda v: NON_FINITE.get(v, v) if isinstance(v, str) else v)
            frame[column] = pd.to_numeric(frame[column])
    return frame


def write_csv(out: Path) -> tuple[Path, pd.DataFrame]:
    """Rebuild ``out/runs.csv`` from the cells (under its lock, atomically), leaving out cells
    that do not match their recorded digests (each named in a warning)."""
    path = Path(out) / RUNS_CSV
    with locked(Path(out) / f".{RUNS_CSV}.lock"):
        frame = collect_rows(out, unverified="skip")
        io.write_text(path, frame.to_csv(index=False))
    return path, frame


# ---- reading a run for the report and the gate -------------------------------------------------


def load_rows(run_dir: Path, required: Sequence[str]) -> pd.DataFrame:
    """A run's rows: from its cells where any holds a ``rows.json`` or a ``run.json`` is there
    (each cell checked against its recorded digests: :func:`collect_rows`), else from
    ``runs.csv`` alone (a copied file, which nothing can check), whose rows without a config hash
    (a torn last line) are skipped with a warning. ValueError if there is nothing to read, a
    ``required`` column is missing, or a cell does not match its digests."""
    run_dir = Path(run_dir)
    csv = run_dir / RUNS_CSV
    if any((run_dir / CELLS_DIR).glob("*/rows.json")) or (run_dir / MANIFEST).exists():
        frame, source = collect_rows(run_dir), f"{run_dir / CELLS_DIR}"
    elif csv.is_file():
        frame, source = _read_csv(csv), str(csv)
    else:
        raise ValueError(
            f"{str(run_dir)!r} holds neither cells/ nor runs.csv; run a sweep with "
            f"--out {run_dir} first"
        )
    missing = [c for c in dict.fromkeys((*RESULT_KEY, *required)) if c not in frame.columns]
    if missing:
        raise ValueError(f"{source} lacks column(s) {missing}; is it a run of this benchmark?")
    if frame.empty:
        raise ValueError(f"{source} holds no finished rows")
    return frame


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a readable runs.csv ({exc})") from None
    last = "config_hash" if "config_hash" in frame.columns else frame.columns[-1]
    torn = frame[last].isna()
    if torn.any():
        log.warning(
            "%s: skipping %d row(s) without %s (a torn or damaged line)", path, torn.sum(), last
        )
        frame = frame[~torn].reset_index(drop=True)
    return frame


def unfinished_cells(run_dir: Path) -> list[str]:
    """What the rows of ``run_dir`` lack, as ``check`` and ``report`` name it: every cell a
    sweep into it planned (:func:`planned_hashes`) that is not finished (never written,
    interrupted, or damaged), and every other cell directory whose ``config.json`` or
    ``rows.json`` is there but does not read back (damaged). Empty for a complete run."""
    cells = Path(run_dir) / CELLS_DIR
    planned = planned_hashes(run_dir)
    found = []
    for name, cell in planned.items():
        cell_dir = cells / name
        if is_finished(cell_dir):
            continue
        what = f"{cell.get('mech')} {cell.get('param_name')}={cell.get('param_value')}"
        state = "damaged or interrupted" if cell_dir.is_dir() else "never written"
        found.append(
            f"{CELLS_DIR}/{name} ({what}, seed {cell.get('seed')}): planned by a sweep into "
            f"this directory, {state} (rows.json or config.json missing or unreadable): rerun "
            "the sweep"
        )
    for cell_dir in sorted(cells.glob("*/")) if cells.is_dir() else []:
        written = (cell_dir / "rows.json").exists() or (cell_dir / "config.json").exists()
        if cell_dir.name not in planned and written and not is_finished(cell_dir):
            found.append(
                f"{CELLS_DIR}/{cell_dir.name}: damaged (rows.json or config.json unreadable): "
                "rerun the sweep to compute it again"
            )
    return found
