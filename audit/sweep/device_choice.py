"""A sweep's ``--device auto`` and ``--precision auto``, resolved once: after every check of the
request and the loaded data, before any cell is built, so that no cell ever holds ``auto``.

The device: the first CUDA GPU where torch sees one, else the CPU
(:func:`dpvae_core.validation.resolve_device`). The precision
(:func:`dpvae_core.precision.resolve_precision`): bf16 on a CPU with native bf16; on a CUDA GPU
bf16 only where a probe of the run's own VAE shapes measures it faster
(:func:`models.precision_probe.vae_step_probe`); float32 elsewhere. A run directory holds one
precision, so ``auto`` into a directory that already holds cells takes their precision where
this machine computes it, and is refused with one line where it does not; an explicit
precision other than the directory's is refused likewise, before any work.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from audit.config import SweepConfig
from audit.datasets import Dataset
from audit.results.manifest import read_body
from dpvae_core.precision import (
    PrecisionChoice,
    bf16_speedup,
    check_precision_supported,
    resolve_precision,
)
from dpvae_core.validation import AUTO, DeviceChoice, machine_memory, resolve_device


@dataclass(frozen=True)
class SweepChoices:
    """What a sweep runs on and in which precision, and why."""

    device: DeviceChoice
    precision: PrecisionChoice

    def lines(self) -> list[str]:
        """The lines the command prints before any cell: the device, then the precision."""
        return [self.device.line(), self.precision.line()]

    def reasons(self) -> dict[str, str]:
        """Why each was chosen, as each new cell's metadata records it."""
        return {"device": self.device.reason, "precision": self.precision.reason}


def resolve_sweep(
    config: SweepConfig, dataset: Dataset, out: Path
) -> tuple[SweepConfig, SweepChoices]:
    """``config`` with its device and precision resolved (each as given where not ``auto``,
    which must then be available here), and the choices."""
    device = resolve_device(config.device)
    precision = _precision(config, dataset, Path(out), device.device)
    resolved = replace(config, device=device.device, precision=precision.precision.value)
    return resolved, SweepChoices(device, precision)


def held_precision(out: Path) -> str | None:
    """The precision of the cells a sweep into ``out`` recorded (``run.json``), None where no
    sweep has claimed it."""
    body = read_body(out)
    if body is None or not isinstance(body.get("settings"), dict):
        return None
    return str(body["settings"].get("precision", "float32"))  # float32 cells name none


def _precision(config: SweepConfig, dataset: Dataset, out: Path, device: str) -> PrecisionChoice:
    held = held_precision(out)
    if config.precision != AUTO:
        chosen = resolve_precision(config.precision, device)
        if held is not None and held != chosen.precision.value:
            raise ValueError(
                f"--precision {chosen.precision.value}: {out} holds {held} cells, and a run "
                f"directory holds one precision; resume it with --precision {held} (or auto), "
                "or choose another --out"
            )
        return chosen
    if held is not None:
        try:
            precision = check_precision_supported(held, device)
        except ValueError as exc:
            raise ValueError(
                f"--precision auto: {out} holds {held} cells (one precision per --out), which "
                f"--device {device} cannot compute here ({exc}); resume it on a machine that "
                f"computes {held}, or sweep into another --out"
            ) from None
        return PrecisionChoice(
            precision, f"{AUTO}: {out} holds {held} cells, one precision per --out"
        )
    probe = None
    if torch.device(device).type == "cuda":
        probe = lambda: bf16_speedup(_vae_probe(config, dataset, device))  # noqa: E731
    return resolve_precision(AUTO, device, probe=probe)


def _vae_probe(config: SweepConfig, dataset: Dataset, device: str):  # -> the probe's run
    from models.factory import model_family
    from models.precision_probe import vae_step_probe

    profile = config.profile
    family = model_family(dataset.shape, dataset.num_classes)
    return vae_step_probe(
        lambda: family.target_vae(latent_dim=profile.latent_dim, per_example_gradients=False),
        dataset.shape,
        dataset.num_classes,
        batch_size=profile.batch_size,
        lr=profile.lr,
        beta=profile.beta,
        device=device,
    )


#: ``--workers auto`` on a GPU: at most this many cells side by side, one per two CPU cores
#: and per :data:`GIB_PER_GPU_WORKER` of free GPU memory (a CUDA context and a cell's models).
MAX_GPU_WORKERS = 8
GIB_PER_GPU_WORKER = 4


#: ``--workers auto`` on the CPU: cells whose records hold at least this many values (LFW20's
#: 64x64x3 faces: 12,288) run side by side, one core each, where the sweep has several; smaller
#: records (digits, lfw-subset) keep one cell at a time on every core, their cells taking
#: seconds, about what starting a worker process costs. On LFW20's quick main command (8 cells,
#: 2 cores, bf16) two cells side by side, one thread each, took 32.3 min against 40.2 min one at a
#: time: a small model's convolutions gain 1.2-1.35x from a second thread, a second cell 2x
#: (benchmarks/README.md).
CPU_SIDE_BY_SIDE_VALUES = 4096
#: At most this many cells side by side on the CPU, and one per this many GiB of the machine's
#: memory (a quick LFW20 cell's process peaked at 2.3 GB).
MAX_CPU_WORKERS = 8
GIB_PER_CPU_WORKER = 3


def resolve_workers(
    requested: int | None,
    device: str,
    *,
    cpus: int | None = None,
    free_gib: float | None = None,
    cells: int = 1,
    record_values: int = 0,
    memory_gib: float | None = None,
) -> tuple[int, str]:
    """How many cells run at a time, and the line that says why. ``requested``: ``--workers``
    (None: auto). Auto on the CPU is 1 (a cell uses every core) unless the sweep has several
    ``cells`` of records with at least :data:`CPU_SIDE_BY_SIDE_VALUES` values
    (``record_values``): then as many as the cells, the cores (one each),
    :data:`MAX_CPU_WORKERS` and the memory (:data:`GIB_PER_CPU_WORKER` each) allow. On a GPU, as
    many as :data:`MAX_GPU_WORKERS`, the cores (two each) and the free memory allow: a cell's
    small kernels leave the GPU idle most of its time, so cells side by side fill it."""
    if requested is not None:
        return requested, f"workers: {requested} (--workers {requested})"
    cpus = cpus or os.cpu_count() or 1  # as pool_threads counts them
    if torch.device(device).type != "cuda":
        return _cpu_workers(cpus, cells, record_values, memory_gib)
    if free_gib is None:
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        free_gib = free / 2**30
    by_memory = int(free_gib // GIB_PER_GPU_WORKER)
    workers = max(1, min(MAX_GPU_WORKERS, cpus // 2, by_memory))
    return workers, (
        f"workers: {workers} (auto: cells side by side on {device}; at most "
        f"{MAX_GPU_WORKERS}, {cpus} CPU cores / 2, {free_gib:.0f} GiB free / {GIB_PER_GPU_WORKER})"
    )


def _cpu_workers(
    cpus: int, cells: int, record_values: int, memory_gib: float | None
) -> tuple[int, str]:
    """``--workers auto`` on the CPU (:func:`resolve_workers`)."""
    one = (1, "workers: 1 (auto: on the CPU one cell at a time uses every core)")
    if record_values < CPU_SIDE_BY_SIDE_VALUES or cells < 2 or cpus < 2:
        return one
    if memory_gib is None:
        memory_gib = machine_memory() / 2**30
    by_memory = int(memory_gib // GIB_PER_CPU_WORKER)
    workers = max(1, min(MAX_CPU_WORKERS, cells, cpus, by_memory))
    if workers == 1:
        return one
    return workers, (
        f"workers: {workers} (auto: {cells} cells of {record_values}-value records side by side "
        f"on the CPU, one core each; at most {MAX_CPU_WORKERS}, {cpus} cores, "
        f"{memory_gib:.0f} GiB / {GIB_PER_CPU_WORKER})"
    )
