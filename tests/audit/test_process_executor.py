"""Cells side by side in processes (``--workers N``): the same rows as one after another, and a
cell whose process dies or raises is not recorded, loses no other cell's work and is rerun."""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path

import pandas as pd
import pytest
import torch

from audit import results
from audit.config import SweepConfig
from audit.executors import CellFailed, ProcessExecutor, pool_threads
from audit.sweep.device_choice import (
    CPU_SIDE_BY_SIDE_VALUES,
    GIB_PER_CPU_WORKER,
    MAX_CPU_WORKERS,
    MAX_GPU_WORKERS,
    resolve_workers,
)
from audit.sweep.jobs import SweepIncomplete, compute_cell
from audit.sweep.runner import run_sweep
from tests.audit.test_executors import _config as executors_config


def _config(out: Path, **kw) -> SweepConfig:
    """The executors' tiny sweep (none and ldp), with two ldp cells, on the CPU."""
    return executors_config(out, **{"grid": (10.0, 2.0), "device": "cpu", **kw})


def _comparable(frame: pd.DataFrame) -> pd.DataFrame:
    return (
        frame.drop(columns=["wall_s"]).sort_values(list(frame.columns[:6])).reset_index(drop=True)
    )


def test_cells_side_by_side_write_the_same_rows_as_one_after_another(tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # each process below runs with one thread (2 cores, 2 workers)
    try:
        alone = run_sweep(_config(tmp_path / "alone", workers=1))
    finally:
        torch.set_num_threads(threads)
    side = run_sweep(_config(tmp_path / "side", workers=2))
    assert (alone.ran, side.ran) == (3, 3) and len(side.rows) == len(alone.rows) > 0
    pd.testing.assert_frame_equal(_comparable(alone.rows), _comparable(side.rows))
    again = run_sweep(_config(tmp_path / "side", workers=2))
    assert (again.ran, again.reused) == (0, 3)  # resumes like one after another


def _fails_once(job, dataset, *, threads=None, marker: str):
    """A cell whose process dies (SIGKILL) on its first attempt at the ldp cell of eps_i 2."""
    if job.cell.param_value == 2.0 and os.path.exists(marker):
        os.remove(marker)
        os.kill(os.getpid(), signal.SIGKILL)
    return compute_cell(job, dataset, threads=threads)


def _planted(job, dataset, *, threads=None):
    """Job 2 dies (SIGKILL), job 3 raises, the others return their job times ten."""
    if job == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    if job == 3:
        raise RuntimeError("planted failure")
    return job * 10


def test_a_dead_or_raising_cell_fails_alone(caplog):
    outcomes = list(ProcessExecutor(workers=4, threads=1).run([1, 2, 3, 4, 5], None, _planted))
    done = sorted(o for o in outcomes if isinstance(o, int))
    failed = {o.job: o.error for o in outcomes if isinstance(o, CellFailed)}
    assert done == [10, 40, 50]  # the cells beside the dead one kept their work
    assert failed == {2: "its process died (exit code -9)", 3: "RuntimeError('planted failure')"}
    assert "Traceback" in caplog.text and "planted failure" in caplog.text


@pytest.mark.slow
def test_a_failed_cell_is_not_recorded_and_is_rerun(tmp_path):
    marker = tmp_path / "fail-once"
    marker.touch()
    fn = functools.partial(_fails_once, marker=str(marker))
    out = tmp_path / "out"
    with pytest.raises(SweepIncomplete, match="1 cell\\(s\\) did not finish") as info:
        run_sweep(_config(out, workers=3), cell_fn=fn)
    assert not marker.exists() and "exit code -9" in str(info.value)
    assert pd.read_csv(out / "runs.csv").config_hash.nunique() == 2  # the others are kept
    dead = str(info.value).split(": ", 1)[1].split(" ")[0]
    assert not results.is_finished(out / "cells" / dead)
    rerun = run_sweep(_config(out, workers=3))
    assert (rerun.ran, rerun.reused) == (1, 2)


def test_an_interrupted_driver_leaves_no_process_running(tmp_path):
    executor = ProcessExecutor(workers=2, threads=1)
    jobs = [1, 2, 3]
    outcomes = executor.run(jobs, None, _sleeper)
    first = next(outcomes)  # the quick job; the other two still running
    assert first == 0
    children = [p for p, _ in outcomes.gi_frame.f_locals["running"].values()]
    assert children and all(p.is_alive() for p in children)
    outcomes.close()  # what Ctrl-C in the driver does to the generator
    assert not any(p.is_alive() for p in children)


def _sleeper(job, dataset, *, threads=None):
    import time

    time.sleep(0 if job == 1 else 60)
    return 0


def test_workers_auto_fills_a_gpu_and_leaves_the_cpu_to_one_cell():
    assert resolve_workers(None, "cpu")[0] == 1
    assert resolve_workers(3, "cpu")[0] == 3
    assert resolve_workers(None, "cuda", cpus=16, free_gib=79)[0] == MAX_GPU_WORKERS
    assert resolve_workers(None, "cuda", cpus=6, free_gib=79)[0] == 3  # two cores a cell
    assert resolve_workers(None, "cuda", cpus=16, free_gib=9)[0] == 2  # 4 GiB a cell
    assert resolve_workers(None, "cuda", cpus=1, free_gib=1)[0] == 1
    assert pool_threads(8, cpus=16) == 2 and pool_threads(3, cpus=2) == 1


def test_workers_auto_on_the_cpu_runs_large_record_cells_side_by_side():
    """Cells of LFW-sized records (64x64x3: 12,288 values) side by side on the CPU, one core
    each, bounded by the cells, the cores, MAX_CPU_WORKERS and GIB_PER_CPU_WORKER of memory;
    small records (digits' 64 values, lfw-subset's 625), one cell, or one core: one at a time."""
    lfw = {"record_values": 64 * 64 * 3, "memory_gib": 24.0}
    assert resolve_workers(None, "cpu", cpus=2, cells=8, **lfw) == (
        2,
        "workers: 2 (auto: 8 cells of 12288-value records side by side on the CPU, one core "
        "each; at most 8, 2 cores, 24 GiB / 3)",
    )
    assert resolve_workers(None, "cpu", cpus=16, cells=8, **lfw)[0] == MAX_CPU_WORKERS
    assert resolve_workers(None, "cpu", cpus=16, cells=3, **lfw)[0] == 3  # the cells
    assert (
        resolve_workers(None, "cpu", cpus=16, cells=8, record_values=12288, memory_gib=7)[0]
        == 7 // GIB_PER_CPU_WORKER
    )
    one = "workers: 1 (auto: on the CPU one cell at a time uses every core)"
    assert resolve_workers(None, "cpu", cpus=2, cells=1, **lfw) == (1, one)
    assert resolve_workers(None, "cpu", cpus=1, cells=8, **lfw) == (1, one)
    for small in (64, 625, CPU_SIDE_BY_SIDE_VALUES - 1):
        assert resolve_workers(None, "cpu", cpus=16, cells=28, record_values=small) == (1, one)
    assert resolve_workers(None, "cpu", cpus=2, cells=8, record_values=12288, memory_gib=5) == (
        1,
        one,
    )
    assert resolve_workers(1, "cpu", cpus=2, cells=8, **lfw)[0] == 1  # --workers 1 wins


DRIVER = """
import sys, time
sys.path.insert(0, {root!r})
from audit.executors import ProcessExecutor
from tests.audit.test_process_executor import _sleeper
outcomes = ProcessExecutor(workers=2, threads=1).run([2, 3], None, _sleeper)
next(outcomes)
"""


def _pids_of_children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc")
def test_cells_end_when_their_driver_is_killed():
    import subprocess
    import sys
    import time

    root = str(Path(__file__).resolve().parents[2])
    driver = subprocess.Popen([sys.executable, "-c", DRIVER.format(root=root)])
    deadline = time.monotonic() + 60
    children: list[int] = []
    while len(children) < 2 and time.monotonic() < deadline:  # both cells started
        time.sleep(0.5)
        children = [c for c in _pids_of_children(driver.pid) if _is_python(c)]
    assert len(children) == 2
    time.sleep(3)  # the cells' processes have imported and are computing
    driver.kill()  # SIGKILL: the driver runs no clean-up at all
    driver.wait()
    deadline = time.monotonic() + 15
    while any(_alive(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not any(_alive(c) for c in children)


def _is_python(pid: int) -> bool:
    try:
        return "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except OSError:
        return False
    return state != "Z"


def test_a_cells_process_gets_small_arguments(monkeypatch):
    """spawn pipes a process's arguments to it while it imports what they name: large ones
    (the dataset) would hold the driver until each child had imported torch, so the cells would
    start one after another. The dataset and the job go through files; the arguments stay under
    a pipe's buffer (64 KiB), so starting a process never waits for the one before."""
    import multiprocessing
    import pickle

    import numpy as np

    sizes: list[int] = []
    real = multiprocessing.get_context

    class Recording:
        def __init__(self, ctx):
            self.ctx = ctx

        def __getattr__(self, name):
            return getattr(self.ctx, name)

        def Process(self, *, target, args, daemon):  # noqa: N802 (multiprocessing's name)
            sizes.append(len(pickle.dumps(args[1:])))  # the pipe end (args[0]) is a handle
            return self.ctx.Process(target=target, args=args, daemon=daemon)

    monkeypatch.setattr(multiprocessing, "get_context", lambda kind: Recording(real(kind)))
    big = np.zeros(2_000_000, np.float32)  # 8 MB, as a dataset would be
    outcomes = list(ProcessExecutor(workers=2, threads=1).run([1, 4, 5], big, _planted))
    assert sorted(outcomes) == [10, 40, 50]
    assert len(sizes) == 3 and max(sizes) < 65536


def test_no_cells_start_no_process_and_write_nothing():
    """Every cell reused: the dataset is not even pickled (a lambda cannot be)."""
    assert list(ProcessExecutor(workers=2, threads=1).run([], lambda: 0, _planted)) == []


def test_cells_side_by_side_train_a_shared_reference_set_once(tmp_path):
    """The seed's non-private reference models, which every cell here uses, are trained once
    by the driver before the cells start, and every cell reads them from the cache."""
    result = run_sweep(_config(tmp_path / "out", workers=2, attacks=("latent-search",)))
    notes = [n.split("non-private reference models: ")[1] for n in result.rows.privacy_notes]
    keys = {n.split("key ")[1][:16] for n in notes}
    assert len(result.rows.config_hash.unique()) == 3 and len(keys) == 1
    assert all("0 trained in this cell (0.0 s) and 2 from the cache" in n for n in notes)
