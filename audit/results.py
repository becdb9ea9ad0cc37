"""A sweep's results on disk: cells, the run manifest, ``runs.csv``, and the locks around them.

The sweep, the report and the gate read and write a run directory only through this module::

    OUT/run.json            the run manifest: the configuration all its cells share, and the
                            cells every sweep into OUT planned (schema-versioned, atomic)
    OUT/cells/<hash>/       one cell: config.json, ..., rows.json (written last: "finished")
                            model.pt, scores.npz and attack_set.npz (the attacked records'
                            rows in the dataset), which the report reads (load_*, read_*)
    OUT/cells/<hash>/.lock  held while a sweep computes that cell
    OUT/runs.csv            rebuilt from the cells after each cell; never read back as a source
    OUT/reference-models/<key>/   reference VAEs shared by the cells of a dataset, seed and
                            recipe (:mod:`audit.reference_models`, which reads and writes them)
    OUT/.runs.csv.lock      held while runs.csv is rebuilt
    OUT/.run.json.lock      held while run.json is read and updated
    OUT/.sweep.lock         shared by every running sweep; exclusive while orphans are cleaned

A *run configuration* is everything in a cell's config except the mechanism, its parameter, the
seed and the mechanism's own options (:func:`run_settings`); a directory holds one. Rows are read
from the cells (:func:`load_rows`), so a torn ``runs.csv`` costs nothing; a torn or foreign
``rows.json`` is named in a warning and skipped (report, gate) or recomputed (sweep).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audit import io
from audit.config import CellConfig
from audit.mechanisms import cell_from_canonical
from audit.rows import (
    COLLECTED_COLUMNS,
    COLUMNS,
    LEGACY_ATTACK,
    LEGACY_VARIANT,
    RESULT_KEY,
)
from audit.tradeoff import above_chance, phi_score

log = logging.getLogger(__name__)

CELLS_DIR = "cells"
RUNS_CSV = "runs.csv"
MANIFEST = "run.json"
NONE = "none"
#: Cell options that every cell of a run shares (not a mechanism's own options).
RUN_OPTIONS = frozenset({"profile_name", "window_stride", "data_sha256"})
#: Mechanism options that are grid values, not settings (``--target-epsilon`` replaces the grid).
GRID_OPTIONS = frozenset({"target_epsilon"})
#: What ``io`` names its temporary files: mkstemp's ``.NAME.XXXXXXXX.tmp``.
TEMP_FILE = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")
SORT_KEYS = ["dataset", "mech", "param_value", "seed", *RESULT_KEY]
SCORES_PREFIX = "scores_"


# ---- locks ----------------------------------------------------------------------------------


@contextlib.contextmanager
def locked(path: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold an ``fcntl.flock`` on ``path`` (created if absent); the kernel drops it if the
    process dies, so a ``kill -9`` never leaves a stale lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cell_lock(out: Path, config_hash: str) -> contextlib.AbstractContextManager[None]:
    """The lock a sweep holds while it computes cell ``config_hash`` of ``out``."""
    return locked(Path(out) / CELLS_DIR / config_hash / ".lock")


@contextlib.contextmanager
def sweep_session(out: Path) -> Iterator[None]:
    """Mark a sweep as running in ``out`` (a shared lock) for the duration of the block.

    A sweep that finds no other one running first removes the temporary files a killed writer
    left (:data:`TEMP_FILE` in ``out``, ``out/cells/*``, ``out/cache`` and
    ``out/reference-models/*``, older than the moment
    it got the lock); with another sweep running it leaves them, as they may be that one's.
    """
    path = Path(out) / ".sweep.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            clean_orphans(out, before=time.time())
        except BlockingIOError:
            log.info("another sweep is running in %s; leaving temporary files alone", out)
        fcntl.flock(fh, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def clean_orphans(out: Path, *, before: float) -> list[Path]:
    """Remove ``io``'s temporary files under ``out`` last modified before ``before`` (epoch s)."""
    out = Path(out)
    folders = [
        out,
        out / "cache",
        *(p for p in (out / CELLS_DIR).glob("*") if p.is_dir()),
        *(p for p in (out / "reference-models").glob("*") if p.is_dir()),
    ]
    removed = []
    for folder in folders:
        for path in folder.glob(".*.tmp"):
            if TEMP_FILE.match(path.name) and path.is_file() and path.stat().st_mtime < before:
                path.unlink(missing_ok=True)
                removed.append(path)
    if removed:
        log.warning("removed %d temporary file(s) a killed sweep left in %s", len(removed), out)
    return removed


# ---- run configurations ---------------------------------------------------------------------


def _digest(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _plain(value: Any) -> Any:
    """``value`` as JSON would read it back (tuples as lists), so that settings compare."""
    return json.loads(json.dumps(value, default=str))


def run_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The run configuration of a cell's canonical ``config`` (``CellConfig.canonical()``):
    dataset, every profile setting and the run-wide options (:data:`RUN_OPTIONS`).

    ``reference_models`` is left out: only the cells whose attacks calibrate carry it, so one
    sweep mixes cells with and without it (a changed R gives those cells other hashes, as a
    changed attack list does)."""
    options = config.get("options", {})
    profile = {k: v for k, v in dict(config["profile"]).items() if k != "reference_models"}
    return _plain(
        {
            "dataset": config["dataset"],
            **profile,
            **{k: v for k, v in options.items() if k in RUN_OPTIONS},
        }
    )


def mech_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The mechanism's own options in a cell's canonical ``config`` (grid values excluded)."""
    options = config.get("options", {})
    skip = RUN_OPTIONS | GRID_OPTIONS
    return _plain({k: v for k, v in options.items() if k not in skip})


def run_hash(config: dict[str, Any]) -> str:
    """Names a run configuration: equal for every cell of one run."""
    return _digest(run_settings(config))


def setting_hash(config: dict[str, Any]) -> str:
    """Names a setting: a cell's whole config but its seed (the unit the report averages)."""
    return _digest({k: v for k, v in config.items() if k != "seed"})


def _show(value: Any) -> str:
    return "(unset)" if value is None else json.dumps(value)


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``'name: old vs new'`` for each setting whose value differs (absent reads as unset)."""
    return [
        f"{k}: {_show(old.get(k))} vs {_show(new.get(k))}"
        for k in sorted(set(old) | set(new))
        if old.get(k) != new.get(k)
    ]


def manifest_of(configs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The manifest body for cells' canonical ``configs`` (one run configuration)."""
    runs = {json.dumps(run_settings(c), sort_keys=True) for c in configs}
    if len(runs) != 1:
        raise ValueError(f"cells of one sweep must share one run configuration, got {len(runs)}")
    mechs: dict[str, dict[str, Any]] = {}
    for config in configs:
        mechs[config["mech"]] = mech_settings(config)
    cells = {
        _cell_hash(c): {
            **{k: c[k] for k in ("mech", "param_name", "param_value", "seed")},
            "attacks": list(c.get("attacks", [LEGACY_ATTACK])),
        }
        for c in configs
    }
    return {"settings": run_settings(configs[0]), "mechs": mechs, "cells": cells}


def _cell_hash(config: dict[str, Any]) -> str:
    # CellConfig.config_hash, recomputed from the canonical dict
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def manifest_conflicts(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Settings on which a sweep (``new``) differs from a directory's manifest (``old``): the
    run settings, and the options of each mechanism both have (a mechanism that only one of
    them runs cannot conflict)."""
    found = differences(old["settings"], new["settings"])
    for mech in sorted(set(old["mechs"]) & set(new["mechs"])):
        found += [f"{mech} {d}" for d in differences(old["mechs"][mech], new["mechs"][mech])]
    return found


def claim_run(out: Path, configs: Sequence[dict[str, Any]]) -> None:
    """Record the sweep of cells ``configs`` in ``out``'s manifest, or refuse it.

    The first sweep into ``out`` writes ``run.json``; a later one must have the same run
    configuration and the same options for each mechanism both run, else ValueError names every
    differing setting with its two values before anything is written. Its mechanisms and cells
    are added to the manifest (the cells that the gate then expects rows of).
    """
    out = Path(out)
    path = out / MANIFEST
    new = manifest_of(configs)
    with locked(out / f".{MANIFEST}.lock"):
        if path.exists():
            old = read_manifest(out)
            conflicts = manifest_conflicts(old, new)
            if conflicts:
                raise ValueError(
                    f"{out} holds results of another configuration ({'; '.join(conflicts)}; "
                    f"this directory vs this sweep); choose another --out, or delete {out} "
                    f"to start over"
                )
            new = {
                "settings": old["settings"],
                "mechs": {**new["mechs"], **old["mechs"]},
                "cells": {**old["cells"], **new["cells"]},
            }
        io.write_json(path, new)


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """``run_dir/run.json``; ValueError naming the file if it is damaged or foreign."""
    path = Path(run_dir) / MANIFEST
    try:
        data = io.read_json(path)
    except (OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(
            f"run manifest {path} is unreadable ({exc}); move the directory aside and rerun"
        ) from None
    if not all(isinstance(data.get(k), dict) for k in ("settings", "mechs", "cells")):
        raise ValueError(f"run manifest {path} lacks settings, mechs or cells")
    return data


def planned_cells(run_dir: Path) -> list[dict[str, Any]] | None:
    """The cells every sweep into ``run_dir`` planned, each with ``dataset`` and ``profile``
    added, and ``attacks`` (the attacks it runs; absent from manifests written before cells
    listed them, whose cells ran the reconstruction attack); None for a directory without a
    manifest (older code, or runs.csv alone)."""
    if not (Path(run_dir) / MANIFEST).exists():
        return None
    manifest = read_manifest(run_dir)
    settings = manifest["settings"]
    extra = {"dataset": settings.get("dataset"), "profile": settings.get("profile_name")}
    return [{**cell, **extra} for cell in manifest["cells"].values()]


# ---- cells ------------------------------------------------------------------------------------


def _read_cell_file(path: Path, key: str) -> Any:
    """``path[key]``, or None (with a warning naming the file) where it is torn or foreign."""
    try:
        value = io.read_json(path)[key]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("skipping damaged cell file %s (%s: %s)", path, type(exc).__name__, exc)
        return None
    return value


def cell_rows(cell_dir: Path) -> list[dict[str, Any]] | None:
    """The rows of a finished cell; None where ``rows.json`` is absent, torn or foreign (the
    last two with a warning naming the file), i.e. where the cell is not finished."""
    path = Path(cell_dir) / "rows.json"
    rows = _read_cell_file(path, "rows")
    if rows is None:
        return None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        log.warning("skipping damaged cell file %s (rows is not a list of objects)", path)
        return None
    return rows


def cell_config(cell_dir: Path) -> dict[str, Any] | None:
    """A cell's canonical config from its ``config.json``; None (warned) if torn or foreign."""
    config = _read_cell_file(Path(cell_dir) / "config.json", "config")
    if config is not None and not isinstance(config, dict):
        log.warning("skipping damaged cell file %s (config is not an object)", cell_dir)
        return None
    return config


def is_finished(cell_dir: Path) -> bool:
    """Whether the cell's rows and config both read back (a damaged one is computed again)."""
    return cell_rows(cell_dir) is not None and cell_config(cell_dir) is not None


def cell_configs(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Canonical config of each cell directory of ``run_dir`` with a readable config.json."""
    found = {}
    for cell_dir in sorted((Path(run_dir) / CELLS_DIR).glob("*/")):
        config = cell_config(cell_dir)
        if config is not None:
            found[cell_dir.name] = config
    return found


def scores_key(attack: str, distance: str, variant: str = LEGACY_VARIANT) -> str:
    """The key of one result's scores in a cell's ``scores.npz``: ``scores_<attack>_<distance>``,
    with ``_<variant>`` appended for any variant but ``mean`` (the reconstruction attack's)."""
    parts = (attack, distance) if variant == LEGACY_VARIANT else (attack, distance, variant)
    bad = [part for part in parts if not part or "_" in part]
    if bad:
        raise ValueError(f"score keys need names without '_', got {bad}")
    return SCORES_PREFIX + "_".join(parts)


def parse_scores_key(key: str) -> tuple[str, str, str]:
    """(attack, distance, variant) of a ``scores.npz`` key written by :func:`scores_key`, or by
    older cells as ``scores_<distance>`` (the reconstruction attack's, variant ``mean``)."""
    if not key.startswith(SCORES_PREFIX):
        raise ValueError(f"{key!r} is not a scores key (scores_<attack>_<distance>)")
    parts = key.removeprefix(SCORES_PREFIX).split("_")
    if len(parts) == 1:
        return LEGACY_ATTACK, parts[0], LEGACY_VARIANT
    if len(parts) == 2:
        return parts[0], parts[1], LEGACY_VARIANT
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    raise ValueError(f"{key!r} is not a scores key (scores_<attack>_<distance>[_<variant>])")


def fill_legacy_keys(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows written before rows named their attack (or variant) get ``attack`` reconstruction
    and ``variant`` mean (:data:`~audit.rows.LEGACY_ATTACK`), so old runs resume and report."""
    if frame.empty:
        return frame
    if "attack" not in frame:
        frame["attack"] = LEGACY_ATTACK
    frame["attack"] = frame["attack"].astype(object).where(frame["attack"].notna(), LEGACY_ATTACK)
    if "variant" not in frame:
        frame["variant"] = None
    legacy = frame["variant"].isna() & (frame["attack"] == LEGACY_ATTACK)
    frame["variant"] = frame["variant"].astype(object).where(~legacy, LEGACY_VARIANT)
    return frame


def collect_rows(out: Path) -> pd.DataFrame:
    """Every finished cell's rows under ``out``, with ``run_hash`` and ``setting_hash`` from its
    config and phi filled against its baseline; damaged cells are skipped with a warning. Rows
    of cells written before rows named their attack read as the reconstruction attack's
    (:func:`fill_legacy_keys`)."""
    rows: list[dict[str, Any]] = []
    for cell_dir in sorted((Path(out) / CELLS_DIR).glob("*/")):
        found = cell_rows(cell_dir)
        if found is None:
            continue
        config = cell_config(cell_dir)
        if config is None or "seed" not in config:
            log.warning("skipping cell %s: its config.json is missing or damaged", cell_dir)
            continue
        keys = {"run_hash": run_hash(config), "setting_hash": setting_hash(config)}
        rows.extend({**row, **keys} for row in found)
    frame = fill_legacy_keys(_restore_floats(pd.DataFrame(rows)))
    if frame.empty:
        return pd.DataFrame(columns=[*COLUMNS, *COLLECTED_COLUMNS])
    frame["utility_valid"] = [_utility_valid(frame, row) for row in frame.itertuples(index=False)]
    frame["phi"] = [
        _phi(frame, row) if row.utility_valid else math.nan for row in frame.itertuples(index=False)
    ]
    frame["phi_worst"] = [
        _phi_worst(frame, row) if row.utility_valid else math.nan
        for row in frame.itertuples(index=False)
    ]
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


def _baseline(frame: pd.DataFrame, row: Any) -> pd.DataFrame:
    """The rows of ``row``'s baseline cell with the same attack result (attack, distance,
    variant): phi compares an attack with itself on the non-private model."""
    same = frame.config_hash == row.baseline_hash
    for column in RESULT_KEY:
        same &= frame[column] == getattr(row, column)
    return frame[same]


def _utility_valid(frame: pd.DataFrame, row: Any) -> bool:
    """Whether the row's non-private baseline classifies above chance (:func:`above_chance`),
    chance being the larger of 1/#classes and D_test's majority-class share: only then does its
    accuracy axis (acc, phi, sweet spots) measure anything. The baseline's accuracy is its
    cell's, whatever attacks it ran: a row of an attack the baseline did not run (dp2vae's
    decoder-only attacks against a reconstruction-only baseline) is judged by it too."""
    base = frame[frame.config_hash == row.baseline_hash]
    if base.empty or "n_test" not in frame:
        return False
    b = base.iloc[0]
    chance = float(b.acc_base)
    majority = float(getattr(b, "acc_majority", math.nan))
    if math.isfinite(majority):  # a constant classifier scores the majority class's share
        chance = max(chance, majority)
    return above_chance(float(b.acc), n_test=float(b.n_test), chance=chance)


def _phi(frame: pd.DataFrame, row: Any) -> float:
    if row.mech == NONE:
        return math.nan
    base = _baseline(frame, row)
    if base.empty:
        return math.nan
    b = base.iloc[0]
    return phi_score(
        atk_orig=b.mi_ap, atk=row.mi_ap, acc_orig=b.acc, acc=row.acc, acc_base=row.acc_base
    )


#: The attack name and distance of a cell's held-out worst case over its attacks, as a row of
#: its own (:func:`worst_case_rows`): what the report plots and the gate's thresholds limit.
WORST_CASE_ATTACK = "worst-case"
WORST_CASE_DISTANCE = "held-out"


def worst_case_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per cell of ``frame`` with a held-out worst case (``worst_mi_ap`` finite): the
    cell's first row with attack :data:`WORST_CASE_ATTACK`, distance and variant
    :data:`WORST_CASE_DISTANCE`, MI AP ``worst_mi_ap``, TPR at 1 % FPR
    ``worst_tpr_at_fpr_1pct`` and phi ``phi_worst`` (the attack picked on one half of D_atk,
    measured on the other; ``attacks.worst_case``). Empty where no cell has one."""
    if "worst_mi_ap" not in frame.columns:
        return frame.iloc[0:0]
    cells = frame[frame["worst_mi_ap"].notna()].drop_duplicates("config_hash")
    worst = cells.assign(
        attack=WORST_CASE_ATTACK,
        distance=WORST_CASE_DISTANCE,
        variant=WORST_CASE_DISTANCE,
        mi_ap=cells["worst_mi_ap"],
        phi=cells["phi_worst"] if "phi_worst" in cells.columns else math.nan,
    )
    if "worst_tpr_at_fpr_1pct" in worst.columns:
        worst["tpr_at_fpr_1pct"] = worst["worst_tpr_at_fpr_1pct"]
    return worst


def _phi_worst(frame: pd.DataFrame, row: Any) -> float:
    """phi of the row's cell at its held-out worst case (``worst_mi_ap``: the attack picked on
    one half of D_atk, measured on the other) against the baseline cell's held-out worst case;
    NaN where either is unknown."""
    if row.mech == NONE or "worst_mi_ap" not in frame:
        return math.nan
    base = frame[frame.config_hash == row.baseline_hash]
    if base.empty:
        return math.nan
    b = base.iloc[0]
    return phi_score(
        atk_orig=float(b.worst_mi_ap),
        atk=float(row.worst_mi_ap),
        acc_orig=b.acc,
        acc=row.acc,
        acc_base=row.acc_base,
    )


def write_csv(out: Path) -> tuple[Path, pd.DataFrame]:
    """Rebuild ``out/runs.csv`` from the cells (under its lock, atomically)."""
    path = Path(out) / RUNS_CSV
    with locked(Path(out) / f".{RUNS_CSV}.lock"):
        frame = collect_rows(out)
        io.write_text(path, frame.to_csv(index=False))
    return path, frame


# ---- reading a run for the report and the gate -------------------------------------------------


def load_rows(run_dir: Path, required: Sequence[str]) -> pd.DataFrame:
    """A run's rows: from its cells where any holds a ``rows.json``, else from ``runs.csv``
    alone (a copied file), whose rows without a config hash (a torn last line) are skipped with
    a warning. ValueError if there is nothing to read or a ``required`` column is missing."""
    run_dir = Path(run_dir)
    csv = run_dir / RUNS_CSV
    if any((run_dir / CELLS_DIR).glob("*/rows.json")):
        frame, source = collect_rows(run_dir), f"{run_dir / CELLS_DIR}"
    elif csv.is_file():
        frame, source = _read_csv(csv), str(csv)
    else:
        raise ValueError(
            f"{str(run_dir)!r} holds neither cells/ nor runs.csv; run a sweep with "
            f"--out {run_dir} first"
        )
    frame = fill_legacy_keys(frame)
    missing = [c for c in required if c not in frame.columns]
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


# ---- a cell's files for the report: config, model, scores, attacked records --------------------

CONFIG_FILE = "config.json"
MODEL_FILE = "model.pt"
SCORES_FILE = "scores.npz"
ATTACK_SET_FILE = "attack_set.npz"


def cell_path(run_dir: Path, config_hash: str) -> Path:
    """The directory of cell ``config_hash`` in ``run_dir`` (whether or not it exists)."""
    return Path(run_dir) / CELLS_DIR / config_hash


def has_model(cell_dir: Path) -> bool:
    return (Path(cell_dir) / MODEL_FILE).is_file()


def load_cell_config(cell_dir: Path) -> CellConfig:
    """The CellConfig a cell directory was run with; ValueError where its hash does not name the
    directory (a foreign or edited config.json), KeyError/TypeError where it is malformed."""
    data = io.read_json(Path(cell_dir) / CONFIG_FILE)
    c = data["config"]
    cell = cell_from_canonical(c)
    if cell.config_hash != data["hash"] or Path(cell_dir).name != data["hash"]:
        raise ValueError(
            f"config.json of {cell_dir} hashes to {cell.config_hash}, not to its "
            f"recorded hash {data['hash']} and directory name"
        )
    return cell


def load_model_state(cell_dir: Path) -> dict[str, Any]:
    """The target VAE's state dict from a cell's ``model.pt``; ValueError for another schema."""
    state = io.load_state(Path(cell_dir) / MODEL_FILE)
    if state.get("schema_version") != io.SCHEMA_VERSION:
        raise ValueError(
            f"model.pt schema_version {state.get('schema_version')!r}, this code "
            f"reads {io.SCHEMA_VERSION}"
        )
    return state["model"]


def load_scores(path: Path) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(is_member (n,) bool, {distance: scores (n,)}) from a cell's ``scores.npz``.

    The file holds ``is_member`` and one ``scores_<attack>_<distance>`` array per attack result
    (``scores_<distance>`` in cells written before: the reconstruction attack's; the curves are
    the reconstruction attack's, higher =
    member), and optionally ``schema_version``; anything else raises a ValueError.
    """
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    version = arrays.pop("schema_version", io.SCHEMA_VERSION)
    if int(version) != io.SCHEMA_VERSION:
        raise ValueError(
            f"{path}: schema_version {int(version)}, this code reads {io.SCHEMA_VERSION}"
        )
    if "is_member" not in arrays:
        raise ValueError(f"{path}: no is_member array (found {sorted(arrays)})")
    is_member = arrays.pop("is_member")
    keyed = {parse_scores_key(k): v for k, v in arrays.items() if k.startswith("scores_")}
    scores = {d: v for (a, d, var), v in keyed.items() if (a, var) == ("reconstruction", "mean")}
    bad = [k for k, v in scores.items() if v.shape != is_member.shape]
    if is_member.dtype != np.bool_ or bad or not scores:
        shapes = {k: v.shape for k, v in arrays.items()}
        raise ValueError(
            f"{path}: expected a bool is_member and scores_<distance> arrays of the same "
            f"length, got is_member {is_member.dtype} {is_member.shape} and {shapes}"
        )
    return is_member, scores


@dataclass(frozen=True)
class AttackedRecords:
    """Which dataset records a cell attacked, as rows of the loaded dataset (``Dataset.x``).

    ``index`` (n,): each D_atk record's row, in the order the attack scored them (the order of
    ``scores.npz``: members, then non-members); ``is_member`` (n,) bool; ``train_index`` (m,):
    the rows of the cell's D_train after the ``max_train`` cap (where the members come from; the
    report's class-latent samples read it).
    """

    index: np.ndarray
    is_member: np.ndarray
    train_index: np.ndarray

    def __post_init__(self) -> None:
        for name in ("index", "train_index"):
            value = getattr(self, name)
            if value.ndim != 1 or value.dtype.kind not in "iu" or (value < 0).any():
                raise ValueError(
                    f"{name} must be a 1-d array of non-negative integers, got "
                    f"{value.dtype} {value.shape}"
                )
        if self.is_member.dtype != np.bool_ or self.is_member.shape != self.index.shape:
            raise ValueError(
                f"is_member must be bool of index's shape {self.index.shape}, got "
                f"{self.is_member.dtype} {self.is_member.shape}"
            )


def write_attack_set(cell_dir: Path, records: AttackedRecords) -> None:
    """``cell_dir/attack_set.npz``: index (int64), is_member (bool), train_index (int64) and
    schema_version, atomically."""
    io.save_npz(
        Path(cell_dir) / ATTACK_SET_FILE,
        {
            "index": records.index.astype(np.int64),
            "is_member": records.is_member,
            "train_index": records.train_index.astype(np.int64),
        },
    )


def read_attack_set(cell_dir: Path) -> AttackedRecords | None:
    """A cell's attacked records; None where it has no ``attack_set.npz`` (a cell finished
    before the records were saved), ValueError naming the file where it is damaged or foreign."""
    path = Path(cell_dir) / ATTACK_SET_FILE
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError) as exc:
        raise ValueError(f"{path} is unreadable ({exc})") from None
    version = arrays.get("schema_version")
    version = None if version is None else int(version)
    if version != io.SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {version}, this code reads {io.SCHEMA_VERSION}")
    missing = sorted({"index", "is_member", "train_index"} - set(arrays))
    if missing:
        raise ValueError(f"{path} lacks {missing} (found {sorted(arrays)})")
    try:
        return AttackedRecords(arrays["index"], arrays["is_member"], arrays["train_index"])
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
