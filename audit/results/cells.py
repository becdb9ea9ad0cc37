"""One cell's files: its config, rows, model, per-record scores and attacked records.

A cell is finished when its ``rows.json`` and ``config.json`` both read back; a torn or foreign
file is named in a warning and the cell counts as unfinished.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from audit import io
from audit.cell.membership import AttackIndex
from audit.config import CellConfig
from audit.mechanisms import cell_from_canonical
from audit.results.layout import (
    ATTACK_INDEX_FILE,
    CELLS_DIR,
    CONFIG_FILE,
    MODEL_FILE,
    SCORES_PREFIX,
)
from audit.rows.row import PLAIN_VARIANT

log = logging.getLogger(__name__)


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


def scores_key(attack: str, distance: str, variant: str = PLAIN_VARIANT) -> str:
    """The key of one result's scores in a cell's ``scores.npz``: ``scores_<attack>_<distance>``,
    with ``_<variant>`` appended for any variant but ``mean`` (the reconstruction attack's)."""
    parts = (attack, distance) if variant == PLAIN_VARIANT else (attack, distance, variant)
    bad = [part for part in parts if not part or "_" in part]
    if bad:
        raise ValueError(f"score keys need names without '_', got {bad}")
    return SCORES_PREFIX + "_".join(parts)


def parse_scores_key(key: str) -> tuple[str, str, str]:
    """(attack, distance, variant) of a ``scores.npz`` key written by :func:`scores_key`."""
    if not key.startswith(SCORES_PREFIX):
        raise ValueError(f"{key!r} is not a scores key (scores_<attack>_<distance>)")
    parts = key.removeprefix(SCORES_PREFIX).split("_")
    if len(parts) == 2:
        return parts[0], parts[1], PLAIN_VARIANT
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    raise ValueError(f"{key!r} is not a scores key (scores_<attack>_<distance>[_<variant>])")


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


def load_attack_scores(
    path: Path,
) -> tuple[np.ndarray, dict[tuple[str, str, str], np.ndarray]]:
    """(is_member (n,) bool, {(attack, distance, variant): scores (n,)}) from a cell's
    ``scores.npz``: every attack result's per-record scores (higher = member).

    The file holds ``is_member`` and one ``scores_<attack>_<distance>[_<variant>]`` array per
    attack result, and optionally ``schema_version``; anything else raises a ValueError.
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
    scores = {parse_scores_key(k): v for k, v in arrays.items() if k.startswith("scores_")}
    bad = [k for k, v in scores.items() if v.shape != is_member.shape]
    if is_member.dtype != np.bool_ or bad or not scores:
        shapes = {k: v.shape for k, v in arrays.items()}
        raise ValueError(
            f"{path}: expected a bool is_member and scores_<distance> arrays of the same "
            f"length, got is_member {is_member.dtype} {is_member.shape} and {shapes}"
        )
    return is_member, scores


def write_attack_index(cell_dir: Path, records: AttackIndex) -> None:
    """``cell_dir/attack_index.npz``: index (int64), is_member (bool), train_index (int64) and
    schema_version, atomically."""
    io.save_npz(
        Path(cell_dir) / ATTACK_INDEX_FILE,
        {
            "index": records.index.astype(np.int64),
            "is_member": records.is_member,
            "train_index": records.train_index.astype(np.int64),
        },
    )


def read_attack_index(cell_dir: Path) -> AttackIndex | None:
    """A cell's attack index; None where it has no ``attack_index.npz`` (a cell finished
    before the records were saved), ValueError naming the file where it is damaged or foreign."""
    path = Path(cell_dir) / ATTACK_INDEX_FILE
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
        return AttackIndex(arrays["index"], arrays["is_member"], arrays["train_index"])
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
