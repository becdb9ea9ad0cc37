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
from dpvae_core.validation import AUTO, DeviceChoice, resolve_device


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


def resolve_workers(
    requested: int | None, device: str, *, cpus: int | None = None, free_gib: float | None = None
) -> tuple[int, str]:
    """How many cells run at a time, and the line that says why. ``requested``: ``--workers``
    (None: auto). Auto is 1 on the CPU (a cell already uses every core) and, on a GPU, as many
    as :data:`MAX_GPU_WORKERS`, the cores (two each) and the free memory allow: a cell's small
    kernels leave the GPU idle most of its time, so cells side by side fill it."""
    if requested is not None:
        return requested, f"workers: {requested} (--workers {requested})"
    if torch.device(device).type != "cuda":
        return 1, "workers: 1 (auto: on the CPU one cell at a time uses every core)"
    cpus = cpus or os.cpu_count() or 1
    if free_gib is None:
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        free_gib = free / 2**30
    by_memory = int(free_gib // GIB_PER_GPU_WORKER)
    workers = max(1, min(MAX_GPU_WORKERS, cpus // 2, by_memory))
    return workers, (
        f"workers: {workers} (auto: cells side by side on {device}; at most "
        f"{MAX_GPU_WORKERS}, {cpus} CPU cores / 2, {free_gib:.0f} GiB free / {GIB_PER_GPU_WORKER})"
    )
