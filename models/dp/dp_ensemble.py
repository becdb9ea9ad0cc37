"""DP-Adam for M VAEs of one recipe together (an ensemble): each member trained as
:func:`models.dp.dp_adam.train_dp_vae` trains it alone, its privacy claim unchanged.

Each member keeps everything its solo run's claim reads: its own Poisson coins (Opacus's
``UniformWithReplacementSampler`` on its own generator seeded with ``settings.seed``, drawn in
the solo order: a step's coins, then its reparameterisation noise), its own number of steps
(``dp_sgd_steps`` of its own |D_train|), its own clip norm C and noise multiplier z, and its own
Gaussian noise (:func:`models.dp.engine.noisy_average` on its own generator seeded with
``dp.noise_seed``, parameter by parameter in the solo order). What is shared is the arithmetic
of the per-example gradients: one step computes every active member's per-record gradients at
once (``torch.func``: ``vmap`` over the members of ``vmap`` over the records of ``grad``), then
per member the clipped sum, clipped on certified bounds as the solo engines
(:mod:`models.dp.bk_bound`, :data:`models.dp.book_keeping.CLIP_EPS`).

Why each member's clipped sum has sensitivity C: record i of member a adds c_i G_i to its
member's sum, G_i its materialised gradient over its own member's parameters (one tensor per
parameter) and each product c_i G_i rounded once in the gradients' IEEE arithmetic (unit
roundoff u), so ||fl(c_i G_i)|| <= c_i (1 + u) ||G_i||. B_i^2, the float64 sum over the
parameter tensors of :func:`~models.dp.bk_bound.materialised_bound_sq`, bounds (1 + u)^2
||G_i||^2 from above, its own float64 rounding included, and
:func:`~models.dp.bk_bound.certified_factors` (``layers`` the number of parameter tensors) turns
it into c_i = min(1, C (1 - 4u) / (B_i + 1e-6)), rounded to the gradients' dtype, with
c_i B_i < C: no record adds more than C, by construction rather than up to a tolerance. (A norm
computed in float32, as in a clip factor min(1, C / (norm + 1e-6)), can fall below the norm of
what is summed and let a record add C (1 + O(u)).) C is each member's own float, not rounded to
the gradients' dtype: the C its accountant reads. The rounding of the sum over records is the
sum's own, as in every DP-SGD implementation; it is no record's addition.

Poisson batches differ in size per member and step: each member's batch is padded to the step's
widest with copies of its first record (or record 0 for an empty batch) whose clip factor is 0,
so the padding adds exact zeros to its member's sum and nothing to any other. A record's
gradient touches only its own member's parameters, so each member's clipped sum has
sensitivity C exactly as alone; the noise std is its z * C, the denominator its expected batch
size B. The accountant reads each member's :class:`~models.dp.dp_adam.DPRun`, which records
the same steps, rate, z and C as the solo run's (``grad_sample_mode``: ``functorch``, the
per-record gradients torch.func computes).

The per-example gradients are materialised (A x b x P floats a step, where the solo default,
book-keeping, never forms them): for GPUs, where one launch for M models pays (``benchmarks/
gpu_ensemble_check.sh``); not wired into a cell yet. Not supported: microbatch groups, the
term-wise batch term, the audit hook (the audits train alone).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from opacus.utils.uniform_sampler import UniformWithReplacementSampler
from torch import nn

from dpvae_core.precision import ieee_float32
from dpvae_core.progress import ProgressFactory, null_progress
from dpvae_core.schedule import dp_sgd_steps
from models.dp.bk_bound import certified_factors, materialised_bound_sq, unit_roundoff
from models.dp.book_keeping import CLIP_EPS
from models.dp.dp_adam import DPRun, DPSettings
from models.dp.engine import GradSampleMode, noisy_average
from models.training import (
    Pair,
    TrainHistory,
    VAETrainSettings,
    channels_last_model,
    record_validation,
    training_noise,
    vae_per_example_loss,
)


@dataclass(frozen=True)
class DPEnsembleMember:
    """One model of a DP-Adam ensemble and what :func:`~models.dp.dp_adam.train_dp_vae` would
    take (``dp.microbatch`` must be 1)."""

    model: nn.Module
    train: Pair
    val: Pair
    settings: VAETrainSettings
    dp: DPSettings


def dp_ensemble_recipe(member: DPEnsembleMember) -> tuple:
    """What members of one DP-Adam ensemble share: the model's class and parameter shapes and
    every training setting but the seed (z, C and the noise seed are each member's own)."""
    shapes = tuple((k, tuple(v.shape), v.dtype) for k, v in member.model.state_dict().items())
    return (type(member.model), shapes, replace(member.settings, seed=0))


class _Record(nn.Module):
    """One record's training loss (a scalar) of ``model`` (a private copy), for ``torch.func``.

    ``F.one_hot`` checks its labels' range with a host read, which ``torch.func.grad`` refuses;
    the copy's one-hot encoding is an equality test against the class indices instead (the same
    0/1 values for labels in range, which the datasets guarantee)."""

    def __init__(self, model: nn.Module, beta: float) -> None:
        super().__init__()
        self.model, self.beta = model, beta
        if hasattr(model, "_one_hot") and hasattr(model, "num_classes"):
            classes = model.num_classes

            def one_hot(y: torch.Tensor) -> torch.Tensor:
                codes = torch.arange(classes, device=y.device)
                return (y.long().unsqueeze(-1) == codes).to(torch.get_default_dtype())

            model._one_hot = one_hot

    def forward(self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        loss = vae_per_example_loss(
            self.model, x.unsqueeze(0), y.unsqueeze(0), noise.unsqueeze(0), beta=self.beta
        )
        return loss[0]


class _MemberRun:
    """One member's place in its own DP-Adam run: its sampler, generators, step, history."""

    def __init__(self, member: DPEnsembleMember, device: torch.device, bar) -> None:
        self.model, self.settings, self.dp, self.val, self.bar = (
            member.model,
            member.settings,
            member.dp,
            member.val,
            bar,
        )
        self.x, self.y = (t.to(device) for t in member.train)
        self.n = len(self.x)
        batch, epochs = member.settings.batch_size, member.settings.epochs
        self.steps = dp_sgd_steps(n_train=self.n, batch_size=batch, epochs=epochs)
        self.gen = torch.Generator().manual_seed(member.settings.seed)
        self.noise_gen = torch.Generator(device=device).manual_seed(member.dp.noise_seed)
        sampler = UniformWithReplacementSampler(
            num_samples=self.n, sample_rate=batch / self.n, generator=self.gen, steps=self.steps
        )
        self.batches = iter(sampler)
        self.val_subset = member.settings.validation.subset(member.val, seed=member.settings.seed)
        self.history = TrainHistory()
        self.step = self.taken = self.records = self.seen = 0
        self.sums: list[torch.Tensor] = []

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """This step's Poisson batch and its reparameterisation noise; None when done."""
        if self.step >= self.steps:
            return None
        index = torch.as_tensor(next(self.batches), dtype=torch.long)
        return index, training_noise(self.model, len(index), generator=self.gen)

    def stepped(self, count: int, loss_sum: torch.Tensor) -> None:
        """Book a step of ``count`` records; close the epochs that end with it (solo's rule)."""
        self.seen, self.records, self.taken = (
            self.seen + count,
            self.records + count,
            self.taken + 1,
        )
        self.sums.append(loss_sum)
        epochs = self.settings.epochs
        while (self.step + 1) * epochs // self.steps > len(self.history.train_loss):
            total = 0.0
            for value in torch.stack(self.sums).tolist():
                total = total + value
            self.history.train_loss.append(total / self.seen if self.seen else math.nan)
            epoch = len(self.history.train_loss) - 1
            record_validation(
                self.model, self.val, self.val_subset, self.settings, self.history, epoch
            )
            self.bar.update(1)
            self.seen, self.sums = 0, []
        self.step += 1

    def record(self) -> DPRun:
        return DPRun(
            noise_multiplier=self.dp.noise_multiplier,
            clip_norm=self.dp.clip_norm,
            steps=self.taken,
            sample_rate=self.settings.batch_size / self.n,
            mean_batch_size=self.records / max(self.taken, 1),
            grad_sample_mode=GradSampleMode.FUNCTORCH,
        )


def train_dp_vae_ensemble(
    members: Sequence[DPEnsembleMember], *, progress: ProgressFactory = null_progress
) -> list[TrainHistory]:
    """Train every member in place by DP-Adam as :func:`~models.dp.dp_adam.train_dp_vae`
    would alone (IEEE float32 on CUDA, as there); their histories, each with its ``dp``."""
    if not members:
        return []
    if len({dp_ensemble_recipe(m) for m in members}) > 1:
        raise ValueError("DP ensemble members must share model and settings but the seed")
    if any(m.dp.microbatch != 1 for m in members):
        raise ValueError("the DP ensemble clips per record (microbatch 1)")
    with ieee_float32(members[0].settings.device):
        return _train(members, progress)


def _train(members: Sequence[DPEnsembleMember], progress: ProgressFactory) -> list[TrainHistory]:
    settings = members[0].settings
    device = torch.device(settings.device)
    for member in members:
        channels_last_model(member.model.to(device)).train()
    bar = progress(total=settings.epochs * len(members), desc=f"train {len(members)} VAEs (DP)")
    runs = [_MemberRun(m, device, bar) for m in members]
    params = [dict(run.model.named_parameters()) for run in runs]
    record = _Record(copy.deepcopy(members[0].model).to("meta"), settings.beta)

    def loss_of(state, x, y, noise):
        return torch.func.functional_call(record, state, (x, y, noise))

    per_record = torch.func.vmap(torch.func.grad_and_value(loss_of), in_dims=(None, 0, 0, 0))
    batched = torch.func.vmap(per_record)
    opt = torch.optim.Adam([p for named in params for p in named.values()], lr=settings.lr)
    while True:
        drawn = [(i, run.next_batch()) for i, run in enumerate(runs)]
        active = [(i, b) for i, b in drawn if b is not None]
        if not active:
            break
        width = max(1, *(len(index) for _, (index, _) in active))
        xs, ys, noises, counts = [], [], [], []
        for i, (index, noise) in active:
            counts.append(len(index))
            index, noise = _padded(index, noise, width)
            xs.append(runs[i].x[index.to(runs[i].x.device)])
            ys.append(runs[i].y[index.to(runs[i].y.device)])
            noises.append(noise)
        state = {
            f"model.{name}": torch.stack([params[i][name].detach() for i, _ in active])
            for name in params[0]
        }
        grads, values = batched(state, torch.stack(xs), torch.stack(ys), torch.stack(noises))
        real = torch.arange(width, device=device).unsqueeze(0) < torch.tensor(
            counts, device=device
        ).unsqueeze(1)
        clips = [runs[i].dp.clip_norm for i, _ in active]
        summed = _clipped_sums(list(grads.values()), real, clips)
        opt.zero_grad(set_to_none=True)
        for k, (i, _) in enumerate(active):
            run = runs[i]
            noisy = noisy_average(
                [s[k] for s in summed],
                clip_norm=run.dp.clip_norm,
                noise_multiplier=run.dp.noise_multiplier,
                denominator=run.settings.batch_size,
                generator=run.noise_gen,
            )
            for p, g in zip(params[i].values(), noisy, strict=True):
                p.grad = g
        opt.step()
        sums = torch.where(real, values.detach(), 0.0).sum(1)
        for k, (i, _) in enumerate(active):
            runs[i].stepped(counts[k], sums[k])
    bar.close()
    for run in runs:
        run.model.eval()
        run.history.dp = run.record()
    return [run.history for run in runs]


def _padded(
    index: torch.Tensor, noise: torch.Tensor, width: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``index`` and ``noise`` padded to ``width`` rows with copies of the first (record 0 and
    zero noise for an empty batch); the padding's clip factor is 0."""
    pad = width - len(index)
    if not pad:
        return index, noise
    if len(index) == 0:
        return torch.zeros(pad, dtype=torch.long), noise.new_zeros((pad, *noise.shape[1:]))
    return (
        torch.cat([index, index[:1].expand(pad)]),
        torch.cat([noise, noise[:1].expand(pad, *noise.shape[1:])]),
    )


def _clip_factors(
    grads: list[torch.Tensor], real: torch.Tensor, clips: Sequence[float]
) -> torch.Tensor:
    """(A, b) certified clip factors (:mod:`models.dp.bk_bound`) in the gradients' dtype:
    ``grads`` (A, b, *p.shape) per parameter, ``real`` (A, b), ``clips`` (A,) each member's C. A
    record's bound B_i is over every parameter tensor of its own member, each a term of
    :func:`~models.dp.bk_bound.certified_factors`'s ``layers``; padding records get exactly 0."""
    a, b = real.shape
    if len(clips) != a:
        raise ValueError(f"{len(clips)} clip norms for {a} members")
    dtype = max((g.dtype for g in grads), key=unit_roundoff)  # the coarsest sum's arithmetic
    bound_sq = torch.zeros(a * b, dtype=torch.float64, device=real.device)
    for g in grads:
        bound_sq = bound_sq + materialised_bound_sq(g.reshape(a * b, -1), None)
    bound_sq = bound_sq.reshape(a, b)
    factor = torch.stack(
        [
            certified_factors(bound_sq[k], float(c), CLIP_EPS, dtype=dtype, layers=len(grads))[0]
            for k, c in enumerate(clips)
        ]
    )
    return torch.where(real, factor, torch.zeros((), dtype=dtype, device=factor.device))


def _clipped_sums(
    grads: list[torch.Tensor], real: torch.Tensor, clips: Sequence[float]
) -> list[torch.Tensor]:
    """Per member, sum_i c_i g_i over its real records, c_i its certified clip factor
    (:func:`_clip_factors`, the arguments': no record adds more than its member's C)."""
    factor = _clip_factors(grads, real, clips)
    return [torch.einsum("ab,ab...->a...", factor.to(g.dtype), g) for g in grads]
