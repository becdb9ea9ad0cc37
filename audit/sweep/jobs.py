"""Cells as jobs: what a worker computes for one cell, locally or as a Ray task."""

from __future__ import annotations

import logging
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import torch

from audit import io, results
from audit.cell.membership import cell_data
from audit.cell.references import ReferenceModel, cell_reference_specs
from audit.cell.tuning import TuningRecord, tune_cell, tuned_cell
from audit.config import CellConfig, SweepConfig
from audit.datasets import Dataset, Split
from audit.executors import CellFailed, Executor
from audit.mechanisms import Context
from audit.results import CELLS_DIR
from audit.results.reference_cache import cached_models, save_trained
from audit.sweep.cell_run import CellOutcome, run_cell, save_outcome
from audit.sweep.real_accuracy import (
    _acc_real_key,
    _acc_real_path,
    _cached_acc_real,
    _compute_acc_real,
)
from audit.sweep.shared_references import train_shared_references
from audit.sweep.tuning_cache import cached_tuning, save_tuning, tuning_path
from dpvae_core.allocator import keep_freed_memory
from dpvae_core.progress import ProgressFactory, null_progress

log = logging.getLogger(__name__)


def _run_local(
    jobs: _Jobs, pairs: list[tuple[CellConfig, CellConfig]], progress: ProgressFactory, bar: Any
) -> tuple[int, int]:
    """Every cell in this process, each computed under its lock; returns (ran, reused)."""
    out, overwrite = jobs.out, jobs.config.overwrite
    results.drop_changed_caches(out)  # edited cache files: computed again where needed
    ran = reused = 0
    for cell, base in pairs:
        if _reusable(out, cell, overwrite):
            reused += 1
        else:
            with results.cell_lock(out, cell.config_hash):
                if _reusable(out, cell, overwrite, warn=False):  # a concurrent sweep finished it
                    reused += 1
                else:
                    job = jobs.job(cell, base)
                    saved = partial(save_tuning, out)  # at once: a resumed sweep does not retune
                    _save(out, compute_cell(job, jobs.dataset, progress=progress, on_tuned=saved))
                    ran += 1
        results.write_csv(out)
        bar.update(1)
    return ran, reused


class SweepIncomplete(RuntimeError):
    """Some cells' tasks died (after the executor's retries); they were not recorded."""


@dataclass(frozen=True)
class CellJob:
    """What a worker needs to compute one cell besides the dataset: no paths, no files."""

    cell: CellConfig
    base: CellConfig
    split: Split
    acc_real: float | None  # the driver's cached value, or None: the worker computes it
    acc_key: str
    device: str
    version: str
    command: str | None
    references: tuple[ReferenceModel, ...] = ()  # the cache's reference models for this cell
    choices: tuple[tuple[str, str], ...] = ()  # why this device and precision (--device auto)
    tuning: TuningRecord | None = None  # the cache's tuning of a tuned cell (--tune)


@dataclass(frozen=True)
class CellComputed:
    """A cell's outcome as it comes back to the driver, which alone writes it."""

    job: CellJob
    outcome: CellOutcome
    acc_real: float
    metadata: dict[str, Any]
    tuning: TuningRecord | None = None  # a tuned cell's tuning (computed here or the job's)


def compute_cell(
    job: CellJob,
    dataset: Dataset,
    *,
    threads: int | None = None,
    progress: ProgressFactory = null_progress,
    on_tuned: Callable[[TuningRecord], Any] | None = None,
) -> CellComputed:
    """Compute one cell without writing anything (the unit of work of both executors).

    ``threads``: torch's thread count in this process (a Ray task's ``--cell-cpus``). A tuned
    cell (``--tune``) is tuned first where the job carries no tuning
    (:func:`audit.cell.tuning.tune_cell`; ``on_tuned`` gets the record as soon as it exists:
    the local executor stores it then), and runs with the chosen values.
    """
    keep_freed_memory()  # a DP-Adam step no longer faults its scratch memory in again
    if threads is not None:
        torch.set_num_threads(threads)
    log.info(
        "running cell %s: %s %s=%s seed %d",
        job.cell.config_hash,
        job.cell.mech,
        job.cell.param_name,
        job.cell.param_value,
        job.cell.seed,
    )
    ctx = Context(device=job.device, progress=progress)
    data = cell_data(dataset, job.split, job.cell)
    acc_real = job.acc_real if job.acc_real is not None else _compute_acc_real(data, job.cell, ctx)
    cell, tuning = job.cell, job.tuning
    if cell.option("tune_trials") is not None:
        if tuning is None:
            tuning = tune_cell(cell, data, ctx)  # D_train and D_val only
            if on_tuned is not None:
                on_tuned(tuning)
        cell = tuned_cell(job.cell, tuning)
    outcome = run_cell(
        cell,
        data,
        ctx,
        acc_real=acc_real,
        code_version=job.version,
        baseline_hash=job.base.config_hash,
        cached_references=job.references,
    )
    meta = run_metadata(job.cell, job.device, job.version, job.command, dict(job.choices))
    if tuning is not None:
        path = tuning_path(Path(), tuning.key)  # relative to OUT
        seconds = tuning.info.get("seconds")  # the cell's own wall_s leaves the tuning out
        meta["tuning"] = {"record": path.as_posix(), "chosen": tuning.chosen, "seconds": seconds}
    return CellComputed(job, outcome, acc_real, meta, tuning)


@dataclass(frozen=True)
class _Jobs:
    out: Path
    config: SweepConfig
    dataset: Dataset
    splits: dict[int, Split]
    version: str
    command: str | None
    choices: dict[str, str] = field(default_factory=dict)

    def job(self, cell: CellConfig, base: CellConfig) -> CellJob:
        """The job of ``cell``, with what the driver's caches already hold for it: the
        real-data classifier's accuracy and the reference models (read when the job is made:
        the local executor makes each job as its cell starts, so a cell reuses the models an
        earlier cell of the sweep trained; Ray jobs are made up front, so cells running at the
        same time may each train the models the cache lacks)."""
        key = _acc_real_key(self.dataset, cell, self.config.device)
        tuning = cached_tuning(self.out, cell) if cell.option("tune_trials") is not None else None
        specs = ()
        if cell.reference_models:
            data = cell_data(self.dataset, self.splits[cell.seed], cell)
            ran = cell if tuning is None else tuned_cell(cell, tuning)  # the recipe it trains
            specs = cell_reference_specs(ran, data)
        return CellJob(
            cell=cell,
            base=base,
            split=self.splits[cell.seed],
            acc_real=_cached_acc_real(self.out, key),
            acc_key=key,
            device=self.config.device,
            version=self.version,
            command=self.command,
            references=tuple(m for spec in specs for m in cached_models(self.out, spec)),
            choices=tuple(self.choices.items()),
            tuning=tuning,
        )


def _run_remote(
    executor: Executor,
    jobs: _Jobs,
    pairs: list[tuple[CellConfig, CellConfig]],
    bar: Any,
    cell_fn: Callable[..., CellComputed] | None,
    *,
    share_references: bool = False,
) -> tuple[int, int, list[CellFailed]]:
    """Pending cells through ``executor``; the driver writes each outcome as it arrives, under
    the cell's lock (a cell another sweep finished meanwhile is kept, ours dropped).
    ``share_references``: first train, here, the non-private reference models several pending
    cells need (:mod:`audit.sweep.shared_references`; cells side by side on this machine)."""
    out, overwrite = jobs.out, jobs.config.overwrite
    results.drop_changed_caches(out)  # edited cache files: computed again where needed
    todo = [(cell, base) for cell, base in pairs if not _reusable(out, cell, overwrite)]
    if share_references and len(todo) > 1:  # side by side on this machine: train them once
        cells = [cell for cell, _ in todo]
        train_shared_references(out, jobs.dataset, jobs.splits, cells, device=jobs.config.device)
    pending = [jobs.job(cell, base) for cell, base in todo]  # with the cache's models
    reused = len(pairs) - len(pending)
    bar.update(reused)
    ran, failed = 0, []
    for result in executor.run(pending, jobs.dataset, cell_fn or compute_cell):
        if isinstance(result, CellFailed):
            log.error("cell %s failed: %s", result.job.cell.config_hash, result.error)
            failed.append(result)
        else:
            job = result.job
            with results.cell_lock(out, job.cell.config_hash):
                if _reusable(out, job.cell, overwrite, warn=False):  # another sweep finished it
                    reused += 1
                else:
                    _save(out, result)
                    ran += 1
            results.write_csv(out)
        bar.update(1)
    return ran, reused, failed


log = logging.getLogger(__name__)


def _version(package: str) -> str:
    try:
        return importlib_metadata.version(package)
    except importlib_metadata.PackageNotFoundError:
        return "unknown"


def run_metadata(
    cell: CellConfig,
    device: str,
    version: str,
    command: str | None = None,
    choices: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The cell's provenance; ``command`` is the sweep command line (what ``check --calibrate``
    names as the source of thresholds); ``choices``: why the sweep ran on ``device`` in the
    cell's precision (``--device auto``, ``--precision auto``: what this machine offered)."""
    packages = ("torch", "opacus", "numpy", "scikit-learn", "scikit-image", "pandas")
    return {
        "command": command,
        "seed": cell.seed,
        "device": device,
        **({"choices": choices} if choices else {}),
        "code_version": version,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {p: _version(p) for p in packages},
        "torch_threads": torch.get_num_threads(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _save(out: Path, computed: CellComputed) -> None:
    """Write a computed cell under ``out/cells`` (``rows.json`` last) and, where the worker
    computed them, the real-data classifier's accuracy and reference models into the caches."""
    job = computed.job
    if job.acc_real is None:
        path = _acc_real_path(out, job.acc_key)
        io.write_json(path, {"key": job.acc_key, "acc_real": computed.acc_real})
        results.record_file(out, path)
    for references in computed.outcome.references:
        save_trained(out, references)
    if computed.tuning is not None and cached_tuning(out, job.cell, warn=False) is None:
        save_tuning(out, computed.tuning)  # a Ray task's (the local executor stored its own)
    cell_dir = out / CELLS_DIR / job.cell.config_hash
    save_outcome(cell_dir, job.cell, computed.outcome, computed.metadata)


def _reusable(out: Path, cell: CellConfig, overwrite: bool, *, warn: bool = True) -> bool:
    """Whether ``cell`` is finished in ``out`` and may be reused: a torn or foreign rows.json
    is not finished, and a cell whose files do not match the digests ``run.json`` recorded
    (edited, added, missing, none recorded) is named in a warning (``warn``: the first time it
    is asked); either runs again."""
    cell_dir = out / CELLS_DIR / cell.config_hash
    if overwrite or not results.is_finished(cell_dir):
        return False
    problem = results.cell_problem(out, cell_dir)
    if problem is not None:
        if warn:
            log.warning("computing cell %s again: %s", cell_dir, problem)
        return False
    log.info("reusing finished cell %s (%s %s)", cell.config_hash, cell.mech, cell.param_value)
    return True
