"""Non-private training of M VAEs of one architecture and recipe together (an ensemble): the
target of a cell and its reference models (:mod:`audit.cell.ensemble_training`).

Each member is trained as :func:`models.training.train_vae` trains it alone: its own data, its
own generator seeded with its own ``settings.seed`` (the same shuffles and reparameterisation
noise, drawn in the same order), its own Adam state, its own validation. What is shared is the
arithmetic: one step evaluates every active member's per-example loss in one vectorised call
(``torch.func.vmap`` over the members' parameters, stacked for the step), so that a GPU runs one
set of kernels for M models instead of M sets.

- **Parameters.** Each member's parameters stay its own module's leaves; a step stacks them
  (``torch.stack``, differentiable), so each member's gradient lands in its own ``.grad``.
- **Adam.** One ``torch.optim.Adam`` over all members' parameters: Adam is elementwise and keeps
  its state (moments, step count) per parameter tensor, so each member's update is the update
  its solo optimizer makes from the same gradient (tests/models/test_ensemble.py checks it bit
  for bit). A member without a step this round has no gradient (``None``), which Adam skips:
  its moments and step count stay as they were.
- **Unequal data sizes.** A member with n records runs ceil(n / B) steps an epoch, so members
  of different sizes step out of phase: step t of the ensemble is each member's own step t.
  Batches shorter than the longest of a step are padded with copies of their first record (and
  its noise) at weight 0; each member's loss is the mean over its own records (weights 1/b,
  the gradient that ``loss.mean()`` gives), the padding contributing exact zeros. A member
  whose steps are all done leaves the step (no gradient, no Adam update).

The results equal the solo runs' up to the order of floating-point sums: a batched convolution
(grouped) and a batched matrix product accumulate in another order than the solo kernels, so
the weights differ in their last bits after a step, and those differences grow over training
as any rounding difference does (the test bounds them against float64).

On the CPU the ensemble is slower than M solo runs (grouped convolutions and the layout
copies around them cost more there: ``benchmarks/bench_ensemble.py``); :func:`ensemble_pays`
says where it is used (CUDA). fp16 is not supported (a shared loss scaler would skip every
member's step when one overflows).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import nn

from dpvae_core.precision import Precision, mixed_precision, parse_precision
from dpvae_core.progress import ProgressFactory, null_progress
from models.training import (
    Pair,
    TrainHistory,
    VAETrainSettings,
    channels_last_model,
    record_validation,
    training_noise,
    vae_per_example_loss,
)

#: The device types where training a cell's models as one ensemble pays (measured by
#: ``benchmarks/bench_ensemble.py``: on the CPU the solo runs are faster).
ENSEMBLE_DEVICE_TYPES: frozenset[str] = frozenset({"cuda"})


def ensemble_pays(device: str | torch.device, precision: str = "float32") -> bool:
    """Whether models on ``device`` in ``precision`` train as one ensemble (CUDA; not fp16)."""
    if parse_precision(precision) is Precision.FP16:
        return False
    return torch.device(device).type in ENSEMBLE_DEVICE_TYPES


def ensemble_supports(model: nn.Module) -> bool:
    """Whether ``model`` can train in an ensemble: ``vmap`` batches every layer but recurrent
    ones (no batching rule for ``aten::lstm``: the LSTM VAE trains alone)."""
    return not any(isinstance(m, nn.RNNBase) for m in model.modules())


@dataclass(frozen=True)
class EnsembleMember:
    """One model of an ensemble and what :func:`models.training.train_vae` would take."""

    model: nn.Module
    train: Pair
    val: Pair
    settings: VAETrainSettings


def _shapes(model: nn.Module) -> tuple[tuple[str, tuple[int, ...], torch.dtype], ...]:
    return tuple((k, tuple(v.shape), v.dtype) for k, v in model.state_dict().items())


def ensemble_recipe(member: EnsembleMember) -> tuple:
    """What members of one ensemble share: the model's class and parameter shapes and every
    setting but the seed. Members with equal recipes may train together."""
    return (type(member.model), _shapes(member.model), replace(member.settings, seed=0))


class _Objective(nn.Module):
    """The per-example training loss of ``model`` as a module (for ``functional_call``)."""

    def __init__(self, model: nn.Module, beta: float) -> None:
        super().__init__()
        self.model, self.beta = model, beta

    def forward(self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return vae_per_example_loss(self.model, x, y, noise, beta=self.beta)


class _MemberRun:
    """One member's place in its own training: epoch, shuffle, batch, loss sums, history."""

    def __init__(self, member: EnsembleMember, device: torch.device, bar) -> None:
        self.model, self.settings, self.val, self.bar = (
            member.model,
            member.settings,
            member.val,
            bar,
        )
        self.x, self.y = (t.to(device) for t in member.train)
        self.n = len(self.x)
        self.gen = torch.Generator().manual_seed(member.settings.seed)
        self.val_subset = member.settings.validation.subset(member.val, seed=member.settings.seed)
        self.history = TrainHistory()
        self.epoch, self.start, self.seen = 0, 0, 0
        self.order: torch.Tensor | None = None
        self.sums: list[torch.Tensor] = []

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """This member's next (indices, noise), drawn as train_vae draws them, closing the
        epochs that end before it; None when its training is over."""
        batch = self.settings.batch_size
        while self.epoch < self.settings.epochs:
            if self.order is None:
                self.order, self.start = torch.randperm(self.n, generator=self.gen), 0
            if self.start < self.n:
                idx = self.order[self.start : self.start + batch]
                self.start += batch
                return idx, training_noise(self.model, len(idx), generator=self.gen)
            self._end_epoch()
        return None

    def _end_epoch(self) -> None:
        total = 0.0
        for value in torch.stack(self.sums).tolist() if self.sums else []:
            total = total + value
        self.history.train_loss.append(total / max(self.seen, 1))
        record_validation(
            self.model, self.val, self.val_subset, self.settings, self.history, self.epoch
        )
        self.epoch, self.order, self.seen, self.sums = self.epoch + 1, None, 0, []
        self.bar.update(1)


def _batch_weights(
    counts: list[int], width: int, loss: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(which of a step's ``width`` rows are real, (A, width) bool; their weights): 1/b on each
    of a member's b real rows, the gradient ``loss.mean()`` gives them (the same division, in
    the loss's dtype), 0 on its padding."""
    n = torch.tensor(counts, dtype=loss.dtype, device=loss.device).unsqueeze(1)
    real = torch.arange(width, device=loss.device).unsqueeze(0) < n
    return real, real.to(loss.dtype) / n


def train_vae_ensemble(
    members: Sequence[EnsembleMember], *, progress: ProgressFactory = null_progress
) -> list[TrainHistory]:
    """Train every member in place as :func:`models.training.train_vae` would alone, all in one
    loop; their histories in order. Members must share :func:`ensemble_recipe`."""
    if not members:
        return []
    recipes = {ensemble_recipe(m) for m in members}
    if len(recipes) > 1:
        raise ValueError(
            f"ensemble members must share model and settings but the seed, got {len(recipes)} "
            "different recipes"
        )
    settings = members[0].settings
    if parse_precision(settings.precision) is Precision.FP16:
        raise ValueError("the ensemble does not train in fp16 (one loss scaler per member)")
    with mixed_precision(settings.device, settings.precision):
        return _train(members, settings, progress)


def _train(
    members: Sequence[EnsembleMember], settings: VAETrainSettings, progress: ProgressFactory
) -> list[TrainHistory]:
    device = torch.device(settings.device)
    for member in members:
        channels_last_model(member.model.to(device)).train()
    bar = progress(total=settings.epochs * len(members), desc=f"train {len(members)} VAEs")
    runs = [_MemberRun(m, device, bar) for m in members]
    params = [dict(run.model.named_parameters()) for run in runs]
    buffers = [dict(run.model.named_buffers()) for run in runs]
    opt = torch.optim.Adam([p for named in params for p in named.values()], lr=settings.lr)
    objective = _Objective(copy.deepcopy(members[0].model).to("meta"), settings.beta)

    def loss_of(state: dict[str, torch.Tensor], x, y, noise) -> torch.Tensor:
        return torch.func.functional_call(objective, state, (x, y, noise))

    batched = torch.func.vmap(loss_of)
    while True:
        drawn = [(i, run.next_batch()) for i, run in enumerate(runs)]
        active = [(i, b) for i, b in drawn if b is not None]
        if not active:
            break
        width = max(len(idx) for _, (idx, _) in active)
        xs, ys, noises, counts = [], [], [], []
        for i, (idx, noise) in active:
            pad = width - len(idx)
            if pad:  # copies of the first record and its noise, at weight 0
                idx = torch.cat([idx, idx[:1].expand(pad)])
                noise = torch.cat([noise, noise[:1].expand(pad, *noise.shape[1:])])
            xs.append(runs[i].x[idx.to(runs[i].x.device)])
            ys.append(runs[i].y[idx.to(runs[i].y.device)])
            noises.append(noise)
            counts.append(len(idx) - pad)
        state = {
            f"model.{name}": torch.stack([params[i][name] for i, _ in active]) for name in params[0]
        }
        state.update(
            {
                f"model.{name}": torch.stack([buffers[i][name] for i, _ in active])
                for name in buffers[0]
            }
        )
        loss = batched(state, torch.stack(xs), torch.stack(ys), torch.stack(noises).to(device))
        real, weights = _batch_weights(counts, width, loss)
        opt.zero_grad(set_to_none=True)
        (loss * weights).sum().backward()
        opt.step()
        sums = torch.where(real, loss.detach(), 0.0).sum(1)
        for k, (i, _) in enumerate(active):
            runs[i].sums.append(sums[k])
            runs[i].seen += counts[k]
    bar.close()
    for run in runs:
        run.model.eval()
    return [run.history for run in runs]
