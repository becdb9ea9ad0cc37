"""Finished cells written by hand (config.json and rows.json as the sweep writes them, their
digests recorded in run.json), so the results module, the report and the gate can be tested
without training anything. A helper that adds a file to such a cell records it again with
:func:`audit.results.record_cell`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from audit import io, results
from audit.config import CACHE_SCHEMA

PARAM_NAMES = {"none": "none", "cdp": "noise_multiplier", "ldp": "eps_i"}


def cell_config(
    mech: str = "cdp",
    value: float | None = 1.0,
    *,
    seed: int = 0,
    epochs: int = 2,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A canonical cell config (``CellConfig.canonical()``'s shape) of a digits quick run."""
    return {
        "cache_schema": CACHE_SCHEMA,
        "dataset": "digits",
        "mech": mech,
        "param_name": PARAM_NAMES[mech],
        "param_value": None if mech == "none" else value,
        "seed": seed,
        "profile": {"epochs": epochs, "batch_size": 16},
        "options": {"profile_name": "quick", "data_sha256": "d" * 64, **(options or {})},
    }


def write_cell(
    out: Path,
    config: dict[str, Any],
    *,
    mi_ap: float = 0.6,
    acc: float = 0.5,
    epsilon: float = math.inf,
) -> Path:
    """Write one finished cell (two rows: mse and ssim) of ``config`` under ``out/cells``."""
    base = {**config, "mech": "none", "param_name": "none", "param_value": None}
    base["options"] = {k: v for k, v in config["options"].items() if k in results.RUN_OPTIONS}
    digest = results.cell_hash(config)
    rows = [
        {
            "dataset": config["dataset"],
            "mech": config["mech"],
            "param_name": config["param_name"],
            "param_value": config["param_value"],
            "seed": config["seed"],
            "attack": "reconstruction",
            "distance": distance,
            "variant": "mean",
            "profile": config["options"]["profile_name"],
            "mi_ap": mi_ap,
            "acc": acc,
            "acc_base": 0.1,
            "acc_real": 0.9,
            "epsilon": epsilon,
            "config_hash": digest,
            "baseline_hash": results.cell_hash(base),
        }
        for distance in ("mse", "ssim")
    ]
    cell = Path(out) / results.CELLS_DIR / digest
    io.write_json(cell / "config.json", {"config": config, "hash": digest})
    results.finish_cell(out, cell, {"rows": rows})  # recorded in run.json, as a sweep's cell
    return cell
