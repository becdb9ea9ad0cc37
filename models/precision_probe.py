"""The workload ``--precision auto`` times on a CUDA GPU: a few Adam steps of a run's target VAE,
through the non-private training loop (:func:`models.training.train_vae`), in float32 or bf16.

:func:`dpvae_core.precision.bf16_speedup` runs it in turns; the run picks bf16 only where it
measures faster (:func:`dpvae_core.precision.resolve_precision`). The records are uniform noise
of the run's record shape: the time of a step depends on the shapes, not on the values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from dpvae_core.precision import Precision
from models.training import VAETrainSettings, train_vae


@dataclass(frozen=True)
class VAEStepProbe:
    """``probe(precision)``: one pass over ``data`` (a few batches) training that precision's
    own copy of one initial VAE; returns once the device has finished (CUDA synchronised)."""

    models: dict[Precision, nn.Module]
    data: tuple[torch.Tensor, torch.Tensor]
    batch_size: int
    lr: float
    beta: float
    device: str
    seed: int = 0

    def __call__(self, precision: Precision | str) -> None:
        precision = Precision(precision)
        settings = VAETrainSettings(
            epochs=1,
            batch_size=self.batch_size,
            lr=self.lr,
            beta=self.beta,
            seed=self.seed,
            device=self.device,
            precision=precision.value,
        )
        x, y = self.data
        train_vae(self.models[precision], (x, y), (x[:1], y[:1]), settings)
        if torch.device(self.device).type == "cuda":
            torch.cuda.synchronize(self.device)


def vae_step_probe(
    make_vae: Callable[[], nn.Module],
    record_shape: Sequence[int],
    num_classes: int,
    *,
    batch_size: int,
    lr: float,
    beta: float,
    device: str,
    steps: int = 3,
    seed: int = 0,
) -> VAEStepProbe:
    """The probe of ``steps`` training steps of batch ``batch_size`` on ``device``: float32 and
    bf16 each train a copy of one VAE ``make_vae()`` builds from ``seed``, without touching
    torch's global generator (the sweep's cells seed their own draws)."""
    gen = torch.Generator().manual_seed(seed)
    n = batch_size * steps
    data = (torch.rand(n, *record_shape, generator=gen), torch.arange(n) % num_classes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        initial = make_vae()
        models = {p: make_vae() for p in (Precision.FLOAT32, Precision.BF16)}
    for model in models.values():
        model.load_state_dict(initial.state_dict())
    return VAEStepProbe(models, data, batch_size, lr, beta, device, seed)
