"""Where cells run: in this process (the default) or as Ray tasks on a cluster.

An executor takes the sweep's pending cells and yields each one's outcome as it finishes. It
never writes: the driver (:func:`audit.sweep.runner.run_sweep`) alone writes cell directories and
``runs.csv``, so workers need no shared file system and a rerun resumes the same way whichever
executor ran the first attempt. A cell whose task died (worker killed, node lost, after Ray's
retries) comes back as :class:`CellFailed`, is not written, and so is rerun next time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
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
