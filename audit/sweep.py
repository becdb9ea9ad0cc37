"""The sweep runner: one cell per dataset x mechanism x parameter x seed; caching, resume, CSV."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import platform
import subprocess
import time
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from audit import io
from audit.config import CellConfig, MechanismName, SweepConfig
from audit.datasets import Dataset, Split, dataset_modality, load_dataset, stratified_split
from audit.mechanisms import CellData, Context, Mechanism, available_mechanisms, get_mechanism
from audit.metrics import above_chance, phi_score
from audit.pipeline import (
    cell_data,
    classifier_accuracy,
    classifier_settings,
    run_cell,
    save_outcome,
)
from audit.progress import ProgressFactory, null_progress
from audit.rows import COLUMNS

log = logging.getLogger(__name__)

CELLS_DIR = "cells"
RUNS_CSV = "runs.csv"
PHI_KEYS = ("baseline_hash", "distance")


@dataclass(frozen=True)
class SweepResult:
    out: Path
    csv_path: Path
    ran: int
    reused: int
    rows: pd.DataFrame


def code_version() -> str:
    """``git describe`` of the checkout this code runs from, else the package version."""
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return _version("dpvae-audit")


def _version(package: str) -> str:
    try:
        return importlib_metadata.version(package)
    except importlib_metadata.PackageNotFoundError:
        return "unknown"


def run_metadata(
    cell: CellConfig, device: str, version: str, command: str | None = None
) -> dict[str, Any]:
    """The cell's provenance; ``command`` is the sweep command line (what ``check --calibrate``
    names as the source of thresholds)."""
    packages = ("torch", "opacus", "numpy", "scikit-learn", "scikit-image", "pandas")
    return {
        "command": command,
        "seed": cell.seed,
        "device": device,
        "code_version": version,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {p: _version(p) for p in packages},
        "torch_threads": torch.get_num_threads(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def build_cells(config: SweepConfig) -> list[tuple[CellConfig, CellConfig]]:
    """(cell, its non-private baseline cell) for every seed, mechanism and grid value.

    The baseline of seed s is the cell of mechanism ``none`` with the same profile and seed; it
    comes first so that phi can be filled as soon as a private cell finishes.
    """
    check_options_apply(config)
    options = dict(config.mech_options)
    pairs: list[tuple[CellConfig, CellConfig]] = []
    for seed in config.seeds:
        base = CellConfig(
            config.dataset,
            MechanismName.NONE,
            "none",
            None,
            seed,
            config.profile,
            (("profile_name", config.profile_name.value), *config.data_options()),
        )
        pairs.append((base, base))
        for name in config.mechs:
            if name is MechanismName.NONE:
                continue
            mech = get_mechanism(name)
            mine = tuple(sorted((k, v) for k, v in options.items() if k in mech.option_names))
            mech.validate_options(dict(mine), batch_size=config.profile.batch_size)
            for param_name, value in _grid(mech, config, dict(mine)):
                cell = CellConfig(
                    config.dataset,
                    name,
                    param_name,
                    float(value),
                    seed,
                    config.profile,
                    base.options + mine,
                )
                pairs.append((cell, base))
    return pairs


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_options_apply(config: SweepConfig) -> None:
    """Refuse options no selected mechanism reads, and a ``--grid`` that is ambiguous.

    One ``--grid`` gives one list of values; with private mechanisms of different parameters it
    would set z, eps_i and sigma alike, so all selected private mechanisms must share one
    parameter (cdp and cdp-termwise share the noise multiplier z); and no ``--target-epsilon``,
    which replaces the grid.
    """
    private = [m for m in config.mechs if m is not MechanismName.NONE]
    names = ", ".join(m.value for m in private) or "none"
    for key, _ in config.mech_options:
        readers = [m for m in private if key in get_mechanism(m).option_names]
        if not readers:
            owners = [
                m.value for m in available_mechanisms() if key in get_mechanism(m).option_names
            ]
            raise ValueError(
                f"{_flag(key)} does not apply to --mech {names} (it is read by "
                f"{', '.join(owners)}); drop it or add a mechanism that reads it"
            )
    if config.grid is None:
        return
    if not private:
        raise ValueError(
            "--grid does not apply to --mech none (the non-private baseline has no parameter); "
            "drop --grid or add a private mechanism"
        )
    if len({get_mechanism(m).param_name for m in private}) > 1:
        params = ", ".join(f"{m.value}: {get_mechanism(m).param_name}" for m in private)
        raise ValueError(
            f"--grid gives one list of values but --mech selects {len(private)} private "
            f"mechanisms with different parameters ({params}); run mechanisms of different "
            "parameters with a --grid each"
        )
    if dict(config.mech_options).get("target_epsilon") is not None:
        raise ValueError(
            "--target-epsilon replaces the grid with one calibrated noise multiplier; "
            "give either --target-epsilon or --grid, not both"
        )


def validate_against_data(config: SweepConfig, dataset: Dataset, splits: dict[int, Split]) -> None:
    """Check every selected mechanism's options against the loaded data, before any cell.

    |D_train| is the smallest over the seeds after the ``max_train`` cap (what a cell trains on).
    """
    cap = config.profile.max_train
    n_train = min(len(s.train) if cap is None else min(cap, len(s.train)) for s in splits.values())
    options = dict(config.mech_options)
    for name in config.mechs:
        if name is MechanismName.NONE:
            continue
        mech = get_mechanism(name)
        mine = {k: v for k, v in options.items() if k in mech.option_names}
        mech.validate_for_data(
            mine,
            record_shape=dataset.shape,
            n_train=n_train,
            epochs=config.profile.epochs,
            batch_size=config.profile.batch_size,
        )


def _grid(mech: Mechanism, config: SweepConfig, options: dict[str, Any]) -> list[tuple[str, float]]:
    """(parameter name, value) of each cell: the grid, or one cell for ``--target-epsilon``."""
    target = options.get("target_epsilon")
    if target is not None:
        return [("target_epsilon", float(target))]
    values = config.grid or mech.default_grid_for(dataset_modality(config.dataset))
    for value in values:
        mech.validate_value(value)
    return [(mech.param_name, value) for value in values]


def _acc_real(out: Path, dataset: Dataset, data: CellData, cell: CellConfig, ctx: Context) -> float:
    """Classifier trained on real D_train (early stop on D_val), tested on D_test; cached."""
    settings = classifier_settings(cell, ctx.device, "real")
    stride = cell.option("window_stride")  # other windows are other records
    extra = [] if stride is None else [["window_stride", stride]]
    key = json.dumps([dataset.name, cell.seed, cell.profile.max_train, repr(settings), *extra])
    path = out / "cache" / f"acc_real-{_digest(key)}.json"
    if path.exists():
        return float(io.read_json(path)["acc_real"])
    acc = classifier_accuracy(
        data.train,
        data.val,
        data.test,
        num_classes=data.num_classes,
        settings=settings,
        ctx=ctx,
        desc="classifier on real D_train",
    )
    io.write_json(path, {"key": key, "acc_real": acc})
    return acc


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def collect_rows(out: Path) -> pd.DataFrame:
    """Every finished cell's rows under ``out``, with phi filled against its baseline."""
    rows: list[dict[str, Any]] = []
    for path in sorted((out / CELLS_DIR).glob("*/rows.json")):
        rows.extend(io.read_json(path)["rows"])
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    frame["utility_valid"] = [_utility_valid(frame, row) for row in frame.itertuples(index=False)]
    frame["phi"] = [
        _phi(frame, row) if row.utility_valid else math.nan for row in frame.itertuples(index=False)
    ]
    ordered = [c for c in COLUMNS if c in frame] + [c for c in frame if c not in COLUMNS]
    return (
        frame[ordered]
        .sort_values(["dataset", "mech", "param_value", "seed", "distance"], na_position="first")
        .reset_index(drop=True)
    )


def _baseline(frame: pd.DataFrame, row: Any) -> pd.DataFrame:
    return frame[(frame.config_hash == row.baseline_hash) & (frame.distance == row.distance)]


def _utility_valid(frame: pd.DataFrame, row: Any) -> bool:
    """Whether the row's non-private baseline classifies above chance (:func:`above_chance`):
    only then does its accuracy axis (acc, phi, sweet spots) measure anything."""
    base = _baseline(frame, row)
    if base.empty or "n_test" not in frame:
        return False
    b = base.iloc[0]
    return above_chance(float(b.acc), n_test=float(b.n_test), chance=float(b.acc_base))


def _phi(frame: pd.DataFrame, row: Any) -> float:
    if row.mech == MechanismName.NONE.value:
        return math.nan
    base = _baseline(frame, row)
    if base.empty:
        return math.nan
    b = base.iloc[0]
    return phi_score(
        atk_orig=b.mi_ap, atk=row.mi_ap, acc_orig=b.acc, acc=row.acc, acc_base=row.acc_base
    )


def write_csv(out: Path) -> tuple[Path, pd.DataFrame]:
    frame = collect_rows(out)
    path = out / RUNS_CSV
    io.write_text(path, frame.to_csv(index=False))
    return path, frame


def run_sweep(
    config: SweepConfig,
    *,
    progress: ProgressFactory = null_progress,
    command: str | None = None,
) -> SweepResult:
    """Run (or resume) every cell of ``config``; ``runs.csv`` is rewritten after each cell.

    ``command``: the command line that started the sweep, recorded in each new cell's metadata.
    """
    pairs = build_cells(config)  # validates mechanisms and grid values before any work
    dataset = load_dataset(  # fails before any write
        config.dataset, data_home=config.data_home, window_stride=config.window_stride
    )
    splits = {
        s: stratified_split(
            dataset.y,
            fractions=dataset.split_fractions,
            seed=s,
            class_names=dataset.class_names,
        )
        for s in config.seeds
    }
    validate_against_data(config, dataset, splits)
    out = Path(config.out)
    io.check_writable_dir(out)
    ctx = Context(device=config.device, progress=progress)
    version = code_version()
    ran = reused = 0
    bar = progress(total=len(pairs), desc=f"{config.dataset} cells")
    for cell, base in pairs:
        cell_dir = out / CELLS_DIR / cell.config_hash
        if (cell_dir / "rows.json").exists() and not config.overwrite:
            reused += 1
            log.info(
                "reusing finished cell %s (%s %s)",
                cell.config_hash,
                cell.mech.value,
                cell.param_value,
            )
        else:
            log.info(
                "running cell %s: %s %s=%s seed %d",
                cell.config_hash,
                cell.mech.value,
                cell.param_name,
                cell.param_value,
                cell.seed,
            )
            data = cell_data(dataset, splits[cell.seed], cell)
            acc_real = _acc_real(out, dataset, data, cell, ctx)
            outcome = run_cell(cell, data, ctx, acc_real=acc_real, code_version=version)
            for row in outcome.rows:
                row["baseline_hash"] = base.config_hash
            save_outcome(
                cell_dir, cell, outcome, run_metadata(cell, config.device, version, command)
            )
            ran += 1
        csv_path, frame = write_csv(out)
        bar.update(1)
    bar.close()
    csv_path, frame = write_csv(out)
    return SweepResult(out=out, csv_path=csv_path, ran=ran, reused=reused, rows=frame)
