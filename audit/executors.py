"""Where cells run: in this process (the default), in worker processes on this machine
(``--workers N``: several cells at a time, e.g. on one GPU whose small kernels leave it idle
most of a cell's time), or as Ray tasks on a cluster.

An executor takes the sweep's pending cells and yields each one's outcome as it finishes. It
never writes: the driver (:func:`audit.sweep.runner.run_sweep`) alone writes cell directories and
``runs.csv``, so workers need no shared file system and a rerun resumes the same way whichever
executor ran the first attempt. A cell whose task died (worker killed, node lost, after Ray's
retries) comes back as :class:`CellFailed`, is not written, and so is rerun next time.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from audit.config import ExecutorName, RaySettings

log = logging.getLogger(__name__)

RAY_EXTRA = "pip install -e '.[ray]'"


@dataclass(frozen=True)
class CellFailed:
    """A cell whose computation did not finish; nothing of it is written."""

    job: Any
    error: str


class CellFn(Protocol):
    """Computes one cell's outcome from its job and the dataset; must not write files."""

    def __call__(self, job: Any, dataset: Any, *, threads: int | None) -> Any: ...


class Executor(Protocol):
    def run(
        self, jobs: Iterable[Any], dataset: Any, compute: CellFn
    ) -> Iterator[Any | CellFailed]: ...


class LocalExecutor:
    """Cells one after another in this process; an exception stops the sweep (after the cells
    already yielded were written)."""

    def run(self, jobs: Iterable[Any], dataset: Any, compute: CellFn) -> Iterator[Any]:
        for job in jobs:
            yield compute(job, dataset, threads=None)


def _exit_with_parent(parent: int, period: float = 1.0) -> None:
    """End this process once its parent (the driver) is gone, even killed with SIGKILL or
    SIGTERM, which run none of its clean-up: a cell computed for nobody would hold the GPU."""
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(period)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _cell_process(
    conn: Any, inputs: str, dataset_file: str, threads: int, level: int, driver: int
) -> None:
    """A worker process's whole life: one cell, its outcome (or its error) sent back as bytes.

    It reads its compute function and job (``inputs``) and the dataset (``dataset_file``, written
    once for all cells) from files the driver wrote: ``spawn`` sends a process's arguments
    through a pipe that the child reads while it imports what they name, so large arguments
    would hold the driver until each child had imported torch, starting the cells one after
    another. The outcome is pickled here with the plain pickler, so tensors travel as bytes (a
    CUDA tensor is copied), never as shared-memory or CUDA IPC handles this process would have
    to outlive. Its log lines go to stderr at the driver's level, named by process."""
    _exit_with_parent(driver)
    fmt = "%(levelname)s %(processName)s %(name)s: %(message)s"
    logging.basicConfig(level=level, format=fmt, force=True)  # opacus configures it on import
    try:
        with open(inputs, "rb") as f:
            compute, job = pickle.load(f)
        with open(dataset_file, "rb") as f:
            dataset = pickle.load(f)
        payload = ("ok", pickle.dumps(compute(job, dataset, threads=threads), protocol=5))
    except BaseException as exc:  # noqa: BLE001 (the driver logs it; the cell is rerun later)
        payload = ("error", f"{exc!r}\n{traceback.format_exc()}")
    conn.send_bytes(pickle.dumps(payload, protocol=5))
    conn.close()


class ProcessExecutor:
    """Cells side by side in processes of this machine, at most ``workers`` at a time, each
    with ``threads`` torch threads; outcomes come back to the driver as they finish (the driver
    alone writes, as with Ray).

    Each cell gets a fresh process, started with ``spawn`` (a CUDA context cannot be forked), so
    a cell whose process dies (killed, out of memory) loses no other cell's work: it comes back
    as :class:`CellFailed`, as does a cell whose code raises (its traceback logged), and is not
    written, so the next run computes it. On a GPU, cells share it: DP-Adam's and the attacks'
    kernels are small, so one cell leaves the GPU idle most of its time and cells side by side
    fill it.
    """

    def __init__(self, workers: int, threads: int) -> None:
        if workers < 1 or threads < 1:
            raise ValueError(f"workers and threads must be positive, got {workers}, {threads}")
        self.workers, self.threads = workers, threads

    def run(self, jobs: Iterable[Any], dataset: Any, compute: CellFn) -> Iterator[Any | CellFailed]:
        import shutil
        import tempfile
        from multiprocessing.connection import wait

        ctx = multiprocessing.get_context("spawn")
        level = logging.getLogger().getEffectiveLevel()
        waiting = list(enumerate(jobs))
        if not waiting:  # every cell reused: no process, no scratch files
            return
        waiting.reverse()  # pop() takes them in order
        running: dict[Any, tuple[Any, Any]] = {}  # the driver's end of a pipe: (process, job)
        log.info("running %d cell(s), at most %d at a time", len(waiting), self.workers)
        scratch = Path(tempfile.mkdtemp(prefix="dpvae-cells-"))  # the processes' inputs
        try:
            dataset_file = scratch / "dataset.pkl"
            dataset_file.write_bytes(pickle.dumps(dataset, protocol=5))
            while waiting or running:
                while waiting and len(running) < self.workers:
                    index, job = waiting.pop()
                    inputs = scratch / f"job-{index}.pkl"
                    inputs.write_bytes(pickle.dumps((compute, job), protocol=5))
                    ours, theirs = ctx.Pipe(duplex=False)
                    args = (
                        theirs,
                        str(inputs),
                        str(dataset_file),
                        self.threads,
                        level,
                        os.getpid(),
                    )
                    process = ctx.Process(target=_cell_process, args=args, daemon=True)
                    process.start()
                    theirs.close()  # the child holds its end: EOF here once it is gone
                    running[ours] = (process, job)
                for conn in wait(list(running)):
                    process, job = running.pop(conn)
                    yield self._outcome(conn, process, job)
        finally:
            for process, _ in running.values():  # interrupted (Ctrl-C) or closed early
                process.terminate()
            for process, _ in running.values():
                process.join()
            shutil.rmtree(scratch, ignore_errors=True)

    @staticmethod
    def _outcome(conn: Any, process: Any, job: Any) -> Any:
        try:
            status, body = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            process.join()
            return CellFailed(job=job, error=f"its process died (exit code {process.exitcode})")
        finally:
            conn.close()
        process.join()
        if status == "ok":
            return pickle.loads(body)
        log.error("cell failed in its process:\n%s", body)
        first = body.strip().splitlines()[0] if body.strip() else "an unknown error"
        return CellFailed(job=job, error=first)


def pool_threads(workers: int, cpus: int | None = None) -> int:
    """torch threads per worker: this machine's cores shared out, at least one each."""
    return max(1, (cpus or os.cpu_count() or 1) // workers)


def import_ray() -> Any:
    """The ``ray`` module, or a ValueError naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise ValueError(
            f"--executor ray needs Ray, which is not installed; install the extra: {RAY_EXTRA}"
        ) from None
    return ray


def _remote_cell(compute: CellFn, job: Any, dataset: Any, threads: int) -> Any:
    return compute(job, dataset, threads=threads)


class RayExecutor:
    """Each cell is one Ray task; outcomes come back to the driver as they finish.

    The dataset is put into Ray's object store once and shared by every task. A task that dies
    (``WorkerCrashedError``, ``NodeDiedError``, ``OwnerDiedError``) is retried up to
    ``max_retries`` times by Ray; if it still fails it is yielded as :class:`CellFailed`. An
    exception raised by the cell's code itself (``RayTaskError``) is yielded as
    :class:`CellFailed` too, with its message.

    A local instance this executor started is shut down when :meth:`run` ends (or is
    interrupted). A driver killed with SIGKILL cannot do that: Ray's fate sharing stops its
    GCS and raylet, but its agent processes (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``)
    stay; ``ray stop`` stops them (README, "Many machines").
    """

    def __init__(self, settings: RaySettings, *, init: Callable[..., Any] | None = None) -> None:
        self.settings = settings
        self.ray = import_ray()
        self._init = init

    def _ensure_running(self) -> bool:
        """Start or connect Ray unless this process has already; True where this call did."""
        if self.ray.is_initialized():
            return False
        kwargs: dict[str, Any] = {"log_to_driver": True}
        if self.settings.address is not None:
            kwargs["address"] = self.settings.address
        else:  # a local instance: loopback only, no dashboard
            kwargs.update(include_dashboard=False, _node_ip_address="127.0.0.1")
        log.info("starting Ray (%s)", self.settings.address or "a local instance")
        self.ray.init(**kwargs)
        return True

    def run(self, jobs: Iterable[Any], dataset: Any, compute: CellFn) -> Iterator[Any | CellFailed]:
        """Yield each cell's outcome as it finishes. Where this call started Ray (or connected
        to a cluster), it shuts it down when done, interrupted (Ctrl-C) or closed, so that a
        local instance's processes do not outlive the sweep; a Ray the caller started stays."""
        started = self._ensure_running()
        try:
            yield from self._run(jobs, dataset, compute)
        finally:
            if started:
                log.info("shutting Ray down")
                self.ray.shutdown()

    def _run(
        self, jobs: Iterable[Any], dataset: Any, compute: CellFn
    ) -> Iterator[Any | CellFailed]:
        ray = self.ray
        threads = max(1, int(self.settings.cell_cpus))
        task = ray.remote(
            num_cpus=self.settings.cell_cpus,
            num_gpus=self.settings.cell_gpus,
            max_retries=self.settings.max_retries,
            retry_exceptions=False,
        )(_remote_cell)
        data_ref = ray.put(dataset)
        pending = {task.remote(compute, job, data_ref, threads): job for job in jobs}
        log.info("submitted %d cell(s) to Ray", len(pending))
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                job = pending.pop(ref)
                try:
                    yield ray.get(ref)
                except ray.exceptions.RayError as exc:  # died after retries, or raised
                    message = str(exc).strip().splitlines()
                    yield CellFailed(job=job, error=message[-1] if message else repr(exc))


def make_executor(name: ExecutorName, ray_settings: RaySettings | None = None) -> Executor:
    if name is ExecutorName.LOCAL:
        return LocalExecutor()
    return RayExecutor(ray_settings or RaySettings())
