"""The run manifest ``OUT/run.json``: the configuration every cell of a run directory shares,
and the cells every sweep into it planned."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from audit import io
from audit.cell.attack_plan import CELL_DEFAULT_ATTACKS
from audit.config import CACHE_SCHEMA, RUN_OPTIONS, check_cache_schema
from audit.results.layout import MANIFEST
from audit.results.locks import locked
from dpvae_core.digests import json_digest

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
    changed attack list does)."""
    options = config.get("options", {})
    profile = {k: v for k, v in dict(config["profile"]).items() if k != "reference_models"}
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
    check_cache_schema(data["settings"], f"run {Path(run_dir)}")
    return data


def planned_cells(run_dir: Path) -> list[dict[str, Any]] | None:
    """The cells every sweep into ``run_dir`` planned, each with ``dataset`` and ``profile``
    added, and ``attacks`` (the attacks it runs); None for a directory without a manifest
    (``runs.csv`` alone)."""
    if not (Path(run_dir) / MANIFEST).exists():
        return None
    manifest = read_manifest(run_dir)
    settings = manifest["settings"]
    extra = {"dataset": settings.get("dataset"), "profile": settings.get("profile_name")}
    return [{**cell, **extra} for cell in manifest["cells"].values()]


def planned_hashes(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The cells every sweep into ``run_dir`` planned, by config hash (empty without a
    manifest)."""
    if not (Path(run_dir) / MANIFEST).exists():
        return {}
    return dict(read_manifest(run_dir)["cells"])
