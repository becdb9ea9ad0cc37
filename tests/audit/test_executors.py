"""Cells as Ray tasks: the same runs.csv as the local executor, and dead workers never recorded.

The tests marked ``ray`` start a real local Ray instance (2 CPUs, loopback only); they skip where
Ray is not installed (``pip install -e '.[ray]'``; CI installs it for them).
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from audit import executors, results
from audit.config import ExecutorName, RaySettings, SweepConfig
from audit.executors import RAY_EXTRA, RayExecutor
from audit.profiles import PROFILES, ProfileName
from audit.sweep.jobs import SweepIncomplete, compute_cell
from audit.sweep.runner import run_sweep
from benchmark import main

TINY = replace(
    PROFILES[ProfileName.QUICK],
    epochs=2,
    max_train=30,
    attack_samples=3,
    classifier_epochs=2,
    classifier_patience=1,
    latent_dim=4,
    gen_records=40,
)
ARGS = ["--dataset", "digits", "--profile", "quick", "--no-progress", "--mech", "ldp"]
ARGS += ["--grid", "10", "--epochs", "2", "--max-train", "30", "--attack-samples", "3"]


def _config(out: Path, **kw) -> SweepConfig:
    kw.setdefault("attacks", ("reconstruction",))  # executor mechanics: one attack is enough
    kw.setdefault("grid", (10.0,))
    return SweepConfig(
        dataset="digits",
        mechs=("none", "ldp"),
        profile_name=ProfileName.QUICK,
        profile=TINY,
        seeds=(0,),
        out=out,
        progress=False,
        **kw,
    )


def test_without_ray_one_line_names_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # 'import ray' raises ImportError
    assert main([*ARGS, "--out", str(tmp_path / "out"), "--executor", "ray"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and RAY_EXTRA in error
    assert not (tmp_path / "out" / "cells").exists()  # refused before any cell


def test_ray_flags_apply_to_the_ray_executor_only(tmp_path, capsys):
    assert main([*ARGS, "--out", str(tmp_path), "--cell-cpus", "2"]) == 2
    assert "--cell-cpus apply to --executor ray only" in capsys.readouterr().err
    assert main([*ARGS, "--out", str(tmp_path), "--executor", "ray", "--cell-cpus", "0"]) == 2
    assert "--cell-cpus must be a positive number, got 0.0" in capsys.readouterr().err


class _FakeRay:
    """Enough of Ray's API for :class:`RayExecutor` (no processes): tasks run when submitted;
    ``interrupt``: Ctrl-C while the driver waits."""

    class exceptions:  # noqa: N801 (Ray's module name)
        RayError = RuntimeError

    def __init__(self, *, initialized: bool = False, interrupt: bool = False):
        self.initialized, self.interrupt, self.calls = initialized, interrupt, []

    def is_initialized(self):
        return self.initialized

    def init(self, **kwargs):
        self.calls.append("init")
        self.initialized = True

    def shutdown(self):
        self.calls.append("shutdown")
        self.initialized = False

    def remote(self, **options):
        return lambda fn: SimpleNamespace(remote=lambda *args: fn(*args))

    def put(self, value):
        return value

    def wait(self, refs, *, num_returns):
        if self.interrupt:
            raise KeyboardInterrupt
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        return ref


def _executor(monkeypatch, fake: _FakeRay) -> RayExecutor:
    monkeypatch.setattr(executors, "import_ray", lambda: fake)
    return RayExecutor(RaySettings())


def _double(job, dataset, *, threads):
    return 2 * job


@pytest.mark.parametrize("interrupt", [False, True])
def test_a_ray_the_executor_started_is_shut_down_when_the_sweep_ends(monkeypatch, interrupt):
    """Issue 30 item 13: a local instance's processes must not outlive the driver (a killed
    driver cannot: the README's Ray section says to run ``ray stop`` then)."""
    fake = _FakeRay(interrupt=interrupt)
    run = _executor(monkeypatch, fake).run([1, 2], None, _double)
    if interrupt:
        with pytest.raises(KeyboardInterrupt):
            list(run)
    else:
        assert sorted(run) == [2, 4]
    assert fake.calls == ["init", "shutdown"]


def test_a_ray_the_caller_started_is_left_running(monkeypatch):
    fake = _FakeRay(initialized=True)
    assert sorted(_executor(monkeypatch, fake).run([1, 2], None, _double)) == [2, 4]
    assert fake.calls == [] and fake.initialized


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason=f"Ray is not installed ({RAY_EXTRA})")
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need no tests/
    yield ray
    ray.shutdown()


def _comparable(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=["wall_s"]).reset_index(drop=True)


@pytest.mark.ray
def test_ray_sweep_writes_the_same_runs_csv_as_the_local_executor(tmp_path, ray_cluster):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a Ray task runs with --cell-cpus (1) threads
    try:
        local = run_sweep(_config(tmp_path / "local"))
    finally:
        torch.set_num_threads(threads)
    remote = run_sweep(
        _config(tmp_path / "ray", executor=ExecutorName.RAY, ray=RaySettings(cell_cpus=1))
    )
    assert (local.ran, remote.ran) == (2, 2) and len(remote.rows) == 4
    on_disk = pd.read_csv(tmp_path / "ray" / "runs.csv")
    pd.testing.assert_frame_equal(
        _comparable(pd.read_csv(tmp_path / "local" / "runs.csv")), _comparable(on_disk)
    )
    again = run_sweep(_config(tmp_path / "ray", executor=ExecutorName.RAY, ray=RaySettings()))
    assert (again.ran, again.reused) == (0, 2)  # resumes like the local executor


def _dies_once(job, dataset, *, threads=None, marker: str, mech: str):
    """A worker that is killed (SIGKILL) mid-cell on its first attempt at ``mech``'s cell."""
    if job.cell.mech == mech and os.path.exists(marker):
        os.remove(marker)
        os.kill(os.getpid(), signal.SIGKILL)
    return compute_cell(job, dataset, threads=threads)


@pytest.mark.ray
def test_a_killed_worker_is_retried(tmp_path, ray_cluster):
    marker = tmp_path / "kill-once"
    marker.touch()
    fn = functools.partial(_dies_once, marker=str(marker), mech="ldp")
    config = _config(tmp_path / "out", executor=ExecutorName.RAY, ray=RaySettings(max_retries=1))
    result = run_sweep(config, cell_fn=fn)
    assert not marker.exists()  # the first attempt died
    assert result.ran == 2 and set(result.rows.mech) == {"none", "ldp"}


@pytest.mark.ray
def test_a_worker_that_stays_dead_leaves_no_finished_cell_and_is_rerun(tmp_path, ray_cluster):
    marker = tmp_path / "kill-once"
    marker.touch()
    fn = functools.partial(_dies_once, marker=str(marker), mech="ldp")
    out = tmp_path / "out"
    config = _config(out, executor=ExecutorName.RAY, ray=RaySettings(max_retries=0))
    with pytest.raises(SweepIncomplete, match="1 cell\\(s\\) did not finish") as info:
        run_sweep(config, cell_fn=fn)
    frame = pd.read_csv(out / "runs.csv")
    assert set(frame.mech) == {"none"}  # the finished cell is kept, the dead one absent
    dead = str(info.value).split(": ", 1)[1].split(" ")[0]
    assert not results.is_finished(out / "cells" / dead)
    rerun = run_sweep(_config(out))  # the local executor computes the missing cell
    assert (rerun.ran, rerun.reused) == (1, 1) and set(rerun.rows.mech) == {"none", "ldp"}
