"""The run manifest ``OUT/run.json``: the configuration every cell of a run directory shares,
the cells every sweep into it planned (or, for ``benchmark.py attack``, the release's inputs), and
the SHA-256 of every file the run stored (``files``, :mod:`audit.results.integrity`).

The manifest carries the SHA-256 of its own contents (``digest``); one that does not match it
(edited by hand) is refused with one line, as is one of another cache schema. It is read and
rewritten only under its lock (:func:`manifest_lock`), atomically, so sweeps sharing a directory
never lose each other's entries.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from audit import io
from audit.attack_plan import CELL_DEFAULT_ATTACKS
from audit.config import CACHE_SCHEMA, RUN_OPTIONS, check_cache_schema
from audit.results.layout import MANIFEST
from audit.results.locks import locked
from dpvae_core.digests import bytes_sha256, json_digest

#: The manifest's record of the run's stored files: path relative to OUT -> SHA-256 (hex).
FILES = "files"
#: The SHA-256 of the manifest's own contents (everything but itself and ``schema_version``).
SEAL = "digest"
#: What ``benchmark.py attack`` records of the release it attacked (its inputs' digests).
RELEASE = "release"

#: Mechanism options that are grid values, not settings (``--target-epsilon`` replaces the grid).
GRID_OPTIONS = frozenset({"target_epsilon"})


def _plain(value: Any) -> Any:
    """``value`` as JSON would read it back (tuples as lists), so that settings compare."""
    return json.loads(json.dumps(value, default=str))


def run_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The run configuration of a cell's canonical ``config`` (``CellConfig.canonical()``):
    the cache schema, dataset, every profile setting and the run-wide options
    (:data:`RUN_OPTIONS`).

    ``reference_models`` is left out: only the cells whose attacks calibrate carry it, so one
    sweep mixes cells with and without it (a changed R gives those cells other hashes, as a
    changed attack list does). So are the knobs the profile sets ``per_setting`` (the trade-off
    paper's learning rate and batch size per z, :mod:`audit.paper_recipe`), which differ from
    cell to cell of one run; ``per_setting`` itself stays."""
    options = config.get("options", {})
    per_setting = {"reference_models", *dict(config["profile"]).get("per_setting", ())}
    profile = {k: v for k, v in dict(config["profile"]).items() if k not in per_setting}
    return _plain(
        {
            "cache_schema": config.get("cache_schema", CACHE_SCHEMA),
            "dataset": config["dataset"],
            **profile,
            **{k: v for k, v in options.items() if k in RUN_OPTIONS},
        }
    )


def mech_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The mechanism's own options in a cell's canonical ``config`` (grid values excluded)."""
    options = config.get("options", {})
    skip = {*RUN_OPTIONS, *GRID_OPTIONS}
    return _plain({k: v for k, v in options.items() if k not in skip})


def run_hash(config: dict[str, Any]) -> str:
    """Names a run configuration: equal for every cell of one run."""
    return json_digest(run_settings(config))


def setting_hash(config: dict[str, Any]) -> str:
    """Names a setting: a cell's whole config but its seed (the unit the report averages)."""
    return json_digest({k: v for k, v in config.items() if k != "seed"})


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
        cell_hash(c): {
            **{k: c[k] for k in ("mech", "param_name", "param_value", "seed")},
            "attacks": list(c.get("attacks", CELL_DEFAULT_ATTACKS)),  # left out at its default
        }
        for c in configs
    }
    return {"settings": run_settings(configs[0]), "mechs": mechs, "cells": cells}


def cell_hash(config: dict[str, Any]) -> str:
    """:attr:`audit.config.CellConfig.config_hash`, recomputed from the canonical dict."""
    return json_digest(config)


def manifest_conflicts(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Settings on which a sweep (``new``) differs from a directory's manifest (``old``): the
    run settings, and the options of each mechanism both have (a mechanism that only one of
    them runs cannot conflict)."""
    found = differences(old["settings"], new["settings"])
    for mech in sorted(set(old["mechs"]) & set(new["mechs"])):
        found += [f"{mech} {d}" for d in differences(old["mechs"][mech], new["mechs"][mech])]
    return found


def manifest_lock(out: Path) -> contextlib.AbstractContextManager[None]:
    """The lock held while ``out``'s manifest is read for an update and rewritten."""
    return locked(Path(out) / f".{MANIFEST}.lock")


def _seal(body: dict[str, Any]) -> str:
    """SHA-256 of ``body`` as read back from disk, without its seal and schema version."""
    content = {k: v for k, v in body.items() if k not in (SEAL, "schema_version")}
    return bytes_sha256(json.dumps(content, sort_keys=True).encode())


def write_body(out: Path, body: dict[str, Any]) -> None:
    """Write ``body`` as ``out/run.json`` with the cache schema and its seal, atomically; the
    caller holds :func:`manifest_lock`."""
    content = {k: v for k, v in body.items() if k not in (SEAL, "schema_version")}
    content["cache_schema"] = CACHE_SCHEMA
    content = json.loads(io.json_text(content))  # as it will read back (non-finite as text)
    content.pop("schema_version")
    io.write_json(Path(out) / MANIFEST, {**content, SEAL: _seal(content)})


def read_body(run_dir: Path) -> dict[str, Any] | None:
    """``run_dir/run.json`` as written (any kind: a sweep's, a release attack's, or the files
    alone), None where there is none; ValueError in one line where it is unreadable, of another
    cache schema, or does not match its own SHA-256 (edited)."""
    path = Path(run_dir) / MANIFEST
    if not path.exists():
        return None
    try:
        data = io.read_json(path)
    except (OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(
            f"run manifest {path} is unreadable ({exc}); move the directory aside and rerun"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get(FILES, {}), dict):
        raise ValueError(f"run manifest {path} is not a manifest of this code")
    if isinstance(data.get("settings"), dict):
        check_cache_schema(data["settings"], f"run {Path(run_dir)}")
    check_cache_schema(data, f"run {Path(run_dir)}")
    if data.get(SEAL) != _seal(data):
        raise ValueError(
            f"run manifest {path} was edited or damaged: its contents do not match the SHA-256 it "
            "carries, so the digests it records of the run's files cannot be trusted; move "
            f"{Path(run_dir)} aside and rerun into a fresh --out"
        )
    return data


def claim_run(out: Path, configs: Sequence[dict[str, Any]]) -> None:
    """Record the sweep of cells ``configs`` in ``out``'s manifest, or refuse it.

    The first sweep into ``out`` writes ``run.json``; a later one must have the same run
    configuration and the same options for each mechanism both run, else ValueError names every
    differing setting with its two values before anything is written. Its mechanisms and cells
    are added to the manifest (the cells that the gate then expects rows of); the files it
    records are kept. A folder holding an attacked release is refused.
    """
    out = Path(out)
    new = manifest_of(configs)
    with manifest_lock(out):
        body = read_body(out) or {}
        if RELEASE in body:
            raise ValueError(
                f"{out} holds an attacked release (benchmark.py attack); sweep into a folder of "
                "its own (another --out)"
            )
        if "settings" in body:
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
        write_body(out, {**new, FILES: body.get(FILES, {})})


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """A sweep's manifest ``run_dir/run.json``; ValueError naming the file if it is absent,
    damaged, edited or foreign (no sweep's settings, mechs and cells)."""
    path = Path(run_dir) / MANIFEST
    data = read_body(run_dir)
    if data is None:
        raise ValueError(f"run manifest {path} is unreadable (no such file); rerun the sweep")
    if not all(isinstance(data.get(k), dict) for k in ("settings", "mechs", "cells")):
        raise ValueError(f"run manifest {path} lacks settings, mechs or cells")
    return data


def _is_sweep(run_dir: Path) -> bool:
    """Whether ``run_dir`` has a manifest a sweep wrote (not the files alone, not a release's)."""
    body = read_body(run_dir)
    return body is not None and "cells" in body


def planned_cells(run_dir: Path) -> list[dict[str, Any]] | None:
    """The cells every sweep into ``run_dir`` planned, each with ``dataset`` and ``profile``
    added, and ``attacks`` (the attacks it runs); None for a directory no sweep claimed
    (``runs.csv`` alone, or cells written otherwise)."""
    if not _is_sweep(run_dir):
        return None
    manifest = read_manifest(run_dir)
    settings = manifest["settings"]
    extra = {"dataset": settings.get("dataset"), "profile": settings.get("profile_name")}
    return [{**cell, **extra} for cell in manifest["cells"].values()]


def planned_hashes(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The cells every sweep into ``run_dir`` planned, by config hash (empty where no sweep
    claimed it)."""
    if not _is_sweep(run_dir):
        return {}
    return dict(read_manifest(run_dir)["cells"])
