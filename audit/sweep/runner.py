"""The sweep runner: one cell per dataset x mechanism x parameter x seed; caching, resume, CSV."""

from __future__ import annotations

import logging
import math
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from audit import results
from audit.config import ExecutorName, SweepConfig
from audit.datasets import check_data_home, dataset_split, load_dataset
from audit.executors import CellFailed, ProcessExecutor, make_executor, pool_threads
from audit.results import CELLS_DIR, RUNS_CSV
from audit.sweep.device_choice import resolve_sweep, resolve_workers
from audit.sweep.jobs import (
    CellComputed,
    SweepIncomplete,
    _Jobs,
    _run_local,
    _run_remote,
    _version,
)
from audit.sweep.plan import build_cells, check_sweep
from dpvae_core.path_checks import check_output_dir
from dpvae_core.progress import ProgressFactory, null_progress

log = logging.getLogger(__name__)


__all__ = ["CELLS_DIR", "RUNS_CSV", "SweepResult", "build_cells", "run_sweep"]


@dataclass(frozen=True, repr=False)
class SweepResult:
    """What a sweep did; ``rows``: ``runs.csv``'s rows; ``report``: the ``report.md`` it wrote,
    None where it wrote none (``config.report`` False, or the report failed: a logged warning
    says why). Read it with :meth:`table` and :meth:`summary`; its repr is one line."""

    out: Path
    csv_path: Path
    ran: int
    reused: int
    rows: pd.DataFrame
    report: Path | None = None

    def table(self) -> pd.DataFrame:
        """``runs.csv``'s rows (a copy of :attr:`rows`): one per cell and attack result."""
        return self.rows.copy()

    def summary(self) -> pd.DataFrame:
        """One line per cell and threat model: the strongest attack, the held-out worst case
        with its 95 % interval, the verdict, utility and DCR
        (:func:`audit.release.release_summary.summary_frame`, scores read from the cells)."""
        from audit.release.release_summary import cell_scores, summary_frame

        return summary_frame(self.rows, cell_scores(self.out))

    def __repr__(self) -> str:
        cells = self.rows["config_hash"].nunique() if "config_hash" in self.rows else 0
        report = f", report {self.report}" if self.report is not None else ""
        return (
            f"SweepResult({str(self.out)!r}: {cells} cells ({self.ran} run, {self.reused} "
            f"reused), {len(self.rows)} rows in runs.csv{report}; .table(), .summary())"
        )


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


def run_sweep(
    config: SweepConfig,
    *,
    progress: ProgressFactory = null_progress,
    command: str | None = None,
    cell_fn: Callable[..., CellComputed] | None = None,
    announce: Callable[[str], None] = log.info,
) -> SweepResult:
    """Run (or resume) every cell of ``config``; ``runs.csv`` is rebuilt after each cell, and at
    the end the report is written into ``OUT/report`` (:func:`write_sweep_report`; not with
    ``config.report`` False; a failing report is a warning, never a failed sweep).

    Refused before any work where ``config.out`` holds another run configuration
    (:func:`audit.results.claim_run`). Each cell is computed under its lock, so a concurrent
    sweep into the same directory waits for it and then reuses it. ``command``: the command line
    that started the sweep, recorded in each new cell's metadata.

    With ``config.executor`` ray, each pending cell is one Ray task (:mod:`audit.executors`),
    and with more than one local worker (``config.workers``; auto: several on a GPU) one task of
    a process pool; the driver alone writes cells and ``runs.csv``. A cell whose task died is
    not recorded, the others are, and :class:`SweepIncomplete` names the missing ones at the
    end. ``cell_fn`` replaces :func:`compute_cell` (tests only: e.g. a worker that dies on its
    first attempt).

    A device or precision of ``auto`` is resolved once, after these checks and before any cell
    is built (:func:`audit.sweep.device_choice.resolve_sweep`); ``announce`` gets one line for
    each choice and why (the command line prints them), and each new cell's metadata records
    the reasons.
    """
    check_sweep(config)  # before loading any data
    check_data_home(config.dataset, config.data_home)
    out = check_output_dir(config.out, "--out")  # creates nothing: the first write does
    executor = (
        make_executor(config.executor, config.ray)  # a missing Ray fails here, before any write
        if config.executor is ExecutorName.RAY
        else None
    )
    dataset = load_dataset(  # fails before any write
        config.dataset, data_home=config.data_home, window_stride=config.window_stride
    )
    splits = {s: dataset_split(dataset, s) for s in config.seeds}
    check_sweep(config, (dataset, splits))
    config, choices = resolve_sweep(config, dataset, out)  # no cell ever holds "auto"
    for line in choices.lines():
        announce(line)
    pairs = build_cells(config, data_sha256=dataset.content_hash)
    if executor is None:
        workers, why = resolve_workers(
            config.workers,
            config.device,
            cells=len(pairs),
            record_values=math.prod(dataset.x.shape[1:]),
        )
        announce(why)
        if workers > 1:
            executor = ProcessExecutor(workers, pool_threads(workers))
    version = code_version()
    failed: list[CellFailed] = []
    with results.sweep_session(out):  # from here on, no other sweep cleans temporary files
        results.claim_run(out, [cell.canonical() for cell, _ in pairs])  # or refuse
        bar = progress(total=len(pairs), desc=f"{config.dataset} cells")
        jobs = _Jobs(out, config, dataset, splits, version, command, choices.reasons())
        if executor is None:
            ran, reused = _run_local(jobs, pairs, progress, bar)
        else:
            side_by_side = isinstance(executor, ProcessExecutor)  # the driver's own device
            ran, reused, failed = _run_remote(
                executor, jobs, pairs, bar, cell_fn, share_references=side_by_side
            )
        bar.close()
        csv_path, frame = results.write_csv(out)
    report = write_sweep_report(out, data_home=config.data_home) if config.report else None
    if failed:
        names = ", ".join(f"{f.job.cell.config_hash} ({f.error})" for f in failed)
        raise SweepIncomplete(
            f"{len(failed)} cell(s) did not finish and were not recorded: {names}; "
            "rerun the same command to compute them"
        )
    return SweepResult(
        out=out, csv_path=csv_path, ran=ran, reused=reused, rows=frame, report=report
    )


def report_command(out: Path, data_home: Path | None = None) -> str:
    """The command line that writes the report of ``out`` (what a sweep runs at its end)."""
    extra = [] if data_home is None else ["--data-home", str(data_home)]
    return shlex.join(["python", "benchmark.py", "report", str(out), *extra])


def write_sweep_report(out: Path, *, data_home: Path | None = None) -> Path | None:
    """Write ``out``'s report as ``benchmark.py report OUT`` does; the path of ``report.md``,
    or None (with a warning naming the error and the command to rerun) where it fails.

    The cells and ``runs.csv`` are written before, so a failing report (matplotlib missing, a
    damaged cell the report cannot read) costs nothing but the report.
    """
    try:
        from audit.report import write_report  # matplotlib: needed for the report only

        return write_report(out, data_home=data_home).markdown
    except Exception as exc:  # noqa: BLE001 - any failure: the finished sweep stands
        log.warning(
            "the sweep finished but its report failed (%s: %s); rerun it with: %s",
            type(exc).__name__,
            exc,
            report_command(out, data_home),
        )
        return None
