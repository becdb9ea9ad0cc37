"""DP-Adam for the target VAE (paper 003, Section 2.3; Abadi et al. 2016): Poisson-sampled
batches, per-example gradients clipped at C, Gaussian noise of std z*C on their sum, Adam.

Per-example gradients come from Opacus's grad-sample modules (:class:`GradSampleMode`); clipping
and noise mirror Opacus's ``DPOptimizer`` (``clip_and_accumulate``, ``add_noise``,
``scale_grad``) so that the same code serves the term-wise variant (``models.termwise``), whose
batch-wise term plugs in through :class:`BatchTerm`.
"""

from __future__ import annotations

import copy
import logging
import math
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import torch
from opacus.grad_sample import (
    GradSampleModule,
    GradSampleModuleExpandedWeights,
    GradSampleModuleFastGradientClipping,
)
from opacus.utils.uniform_sampler import UniformWithReplacementSampler
from torch import nn

from core.progress import ProgressFactory, null_progress
from core.schedule import dp_sgd_steps
from core.validation import check_non_negative, check_positive, check_positive_int
from models.bk_clipping import CLIP_EPS, BookKeepingGradients, ClippedSum
from models.training import Pair, TrainHistory, VAETrainSettings, record_validation
from models.training import vae_per_example_loss as _vae_per_example_loss
from models.vae import ConditionalConvVAE

log = logging.getLogger(__name__)

#: Default clip norm C for the conv VAE's objective (``models.training.vae_per_example_loss``:
#: per-pixel cross-entropy summed over the image + beta * KL). Unclipped per-example gradient
#: norms measured on the embedded datasets are about 25 to 55 on digits (8x8) and 45 to 400 on
#: the LFW subset (25x25), at initialisation and over a 20-epoch non-private run. C = 10 lies
#: below them, so (nearly) every gradient is clipped: per-example normalisation, under which
#: Adam's update does not depend on C (Adam divides by the gradient's scale) and C only sets the
#: unit of the noise std z*C. The trade-off then hinges on z and B.
DEFAULT_CLIP_NORM = 10.0
#: Epochs of the non-private warm-up behind the 'median' clip norm (paper 003 uses 100 training
#: epochs; a short warm-up keeps the quick and standard profiles cheap).
MEDIAN_WARMUP_EPOCHS = 5


class GradSampleMode(str, Enum):
    """How Opacus computes per-example gradients (``PrivacyEngine.make_private(grad_sample_mode)``).

    HOOKS: module hooks with per-layer formulas (Opacus's default).
    FUNCTORCH: the same hooks, per-layer gradients from ``torch.func`` (vmap of grad).
    EW: PyTorch's ExpandedWeights (``call_for_per_sample_grads``), computed inside autograd.
    GHOST: ghost / fast gradient clipping: per-example norms without materialising per-example
        gradients, then a second backward pass on the re-weighted loss. Clips per record only, so
        it serves the sample-wise term, never the per-partition batch-wise term.
    BK: book-keeping (``models.bk_clipping``; Bu et al. 2023): one forward pass, one backward
        pass for the layers' output gradients only, per-layer norms by ghost norms or
        materialised per-record gradients (whichever costs less), then one re-weighted
        weight-gradient product per layer. Linear and Conv2d layers only (the conv VAE, and
        Opacus's DPLSTM, whose cells are Linear layers); clips per record or per group.
    """

    HOOKS = "hooks"
    FUNCTORCH = "functorch"
    EW = "ew"
    GHOST = "ghost"
    BK = "bk"


#: The fastest correct mode (benchmarks/bench_dp_epoch.py, paper 003's 64x64x3 VAE, batch 32, one
#: CPU thread, CPU time of an epoch against a non-private one): bk 1.16-1.39x, ew 2.8-3.3x,
#: ghost 3.3x, hooks 3.3-3.6x, functorch 3.4-3.9x. On the LSTM VAE (DPLSTM) bk's clipped sum
#: costs about 1.1x a non-private step, ew's 4.5x.
DEFAULT_GRAD_SAMPLE_MODE = GradSampleMode.BK


def standard_dp_noise_std_with_batch_term(
    *, batch_size: int, clip_norm: float, noise_multiplier: float
) -> float:
    """Noise std a standard DP-Adam step must add when every example's loss has a batch-wise term.

    Paper 004 (Table 1, micro aggregation) counts the sensitivity of the summed clipped gradients
    of ``phi(x_i) + psi(batch)`` as B*C. Under add/remove adjacency, removing one record drops
    its own clipped gradient (C) and can move each of the other B - 1 clipped gradients anywhere
    in the C ball (2C each), so the sensitivity is (2B - 1) C, and the std returned here is
    ``noise_multiplier * (2 * batch_size - 1) * clip_norm``, which is never smaller than the
    paper's ``noise_multiplier * B * C``.

    Notes:
        ``batch_size`` must bound the realised batch: Poisson batches vary in size, so a run must
        cap (truncate) its batches at this size or refuse, never silently under-noise.
    """
    b = check_positive_int("batch_size", batch_size)
    c = check_positive("clip_norm", clip_norm)
    z = check_non_negative("noise_multiplier", noise_multiplier)
    return z * (2 * b - 1) * c


def per_unit_norms(grads: Sequence[torch.Tensor]) -> torch.Tensor:
    """L2 norms (n,) over all parameters of per-unit gradients given as (n, *p.shape) tensors."""
    n = grads[0].shape[0]
    return torch.stack([g.reshape(n, -1).norm(2, dim=1) for g in grads], dim=1).norm(2, dim=1)


def clip_and_sum(
    grads: Sequence[torch.Tensor],
    *,
    clip_norm: float,
    groups: torch.Tensor | None = None,
    num_groups: int = 0,
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """(sum_u pi_C(g_u), norms): each unit's gradient scaled by min(1, C / (||g_u|| + 1e-6)).

    Args:
        grads: per-record gradients, one (n, *p.shape) tensor per parameter.
        clip_norm: C >= 0 (0 zeroes every unit).
        groups: optional (n,) int64 group of each record in [0, num_groups): records of a group
            are summed into one unit before clipping (paper 004's partitions, Eq. 15); None makes
            every record a unit (Eq. 14, Opacus ``DPOptimizer.clip_and_accumulate``).
    """
    if groups is not None:
        grads = [
            g.new_zeros((num_groups, *g.shape[1:])).index_add_(0, groups.to(g.device), g)
            for g in grads
        ]
    if grads[0].shape[0] == 0:
        return [g.new_zeros(g.shape[1:]) for g in grads], grads[0].new_zeros(0)
    norms = per_unit_norms(grads)
    factor = (clip_norm / (norms + CLIP_EPS)).clamp(max=1.0)
    return [torch.einsum("i,i...->...", factor, g) for g in grads], norms


def noisy_average(
    summed: Sequence[torch.Tensor],
    *,
    clip_norm: float,
    noise_multiplier: float,
    denominator: float,
    generator: torch.Generator,
    noise_on: Sequence[bool] | None = None,
) -> list[torch.Tensor]:
    """(sum + N(0, (z C)^2 I)) / denominator, per parameter (paper 004, Eq. 4 and 16).

    Noise is drawn parameter by parameter with ``torch.normal`` from ``generator`` exactly as
    Opacus's ``DPOptimizer.add_noise`` does (nothing is drawn when z*C = 0). ``noise_on`` limits
    the noise to the parameters a term can reach: coordinates on which every unit's gradient is
    the constant 0 have sensitivity 0 and need none.
    """
    std = noise_multiplier * clip_norm
    out = []
    for i, g in enumerate(summed):
        if std > 0 and (noise_on is None or noise_on[i]):
            g = g + torch.normal(
                mean=0.0,
                std=std,
                size=g.shape,
                device=g.device,
                generator=generator,
                dtype=g.dtype,
            )
        out.append(g / denominator)
    return out


@contextmanager
def quiet_backward_hooks() -> Iterator[None]:
    """Silence PyTorch's warning that Opacus's full backward hooks fire on a layer whose inputs
    need no gradient (the first layer); it says nothing about the gradients' correctness."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        yield


class PerExampleGradients:
    """Per-record gradients of ``loss_module``'s parameters from one Opacus grad-sample mode.

    ``loss_module(*inputs)`` returns a 1-D tensor of losses whose sum is differentiated; records
    are the rows of ``inputs[0]``. For per-example losses a record's gradient is that of its own
    loss; for a loss coupling records (a partition's divergence) it is the record's contribution,
    so that summing a group's records gives the gradient of the group's loss.

    ``params`` restricts the returned gradients to a subset (in module order), e.g. the only
    parameters a loss can reach; the default is every trainable parameter. Not with GHOST.
    Hook-based modes are switched on only inside a call, so several engines may share one model.
    Call :meth:`close` to remove hooks and Opacus's attributes from the parameters.
    """

    def __init__(
        self,
        loss_module: nn.Module,
        mode: GradSampleMode | str = DEFAULT_GRAD_SAMPLE_MODE,
        *,
        params: Sequence[nn.Parameter] | None = None,
    ):
        self.mode = _parse_mode(mode)
        self._all = [p for p in loss_module.parameters() if p.requires_grad]
        self.params = self._all if params is None else list(params)
        if self.mode is GradSampleMode.GHOST and params is not None:
            raise ValueError("ghost clipping clips over every parameter; params must be None")
        self._bk: BookKeepingGradients | None = None
        if self.mode is GradSampleMode.BK:
            self._bk = BookKeepingGradients(loss_module, params=self.params)
            return
        if self.mode is GradSampleMode.EW:
            self._gsm = GradSampleModuleExpandedWeights(loss_module, loss_reduction="sum")
        elif self.mode is GradSampleMode.GHOST:
            self._gsm = GradSampleModuleFastGradientClipping(
                loss_module, loss_reduction="sum", max_grad_norm=1.0, use_ghost_clipping=True
            )
        else:
            self._gsm = GradSampleModule(
                loss_module,
                loss_reduction="sum",
                force_functorch=self.mode is GradSampleMode.FUNCTORCH,
            )
        if self.mode is not GradSampleMode.EW:
            self._gsm.disable_hooks()

    def gradients(self, *inputs: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """(per-record gradients, one (n, *p.shape) tensor per parameter; loss values)."""
        if self.mode in (GradSampleMode.GHOST, GradSampleMode.BK):
            raise ValueError(
                f"{self.mode.value} clipping never materialises per-example gradients; "
                "use clipped_sum, or another grad-sample mode"
            )
        n = len(inputs[0])
        if n == 0:
            return [p.new_zeros((0, *p.shape)) for p in self.params], self.params[0].new_zeros(0)
        with self._hooks():
            values = self._gsm(*inputs)
            values.sum().backward()
        grads = [
            p.grad_sample if p.grad_sample is not None else p.new_zeros((n, *p.shape))
            for p in self.params
        ]
        self._clear()
        return grads, values.detach()

    def clipped_sum(
        self,
        *inputs: torch.Tensor,
        clip_norm: float,
        groups: torch.Tensor | None = None,
        num_groups: int = 0,
    ) -> ClippedSum:
        """Clipped sum over the records, or over ``groups`` (see :func:`clip_and_sum`)."""
        if self._bk is not None:
            return self._bk.clipped_sum(
                *inputs, clip_norm=clip_norm, groups=groups, num_groups=num_groups
            )
        if self.mode is GradSampleMode.GHOST:
            if groups is not None:
                raise ValueError(
                    "ghost clipping clips per record; per-group clipping needs "
                    "hooks, functorch or ew"
                )
            return self._ghost_clipped_sum(inputs, clip_norm)
        grads, values = self.gradients(*inputs)
        summed, norms = clip_and_sum(
            grads, clip_norm=clip_norm, groups=groups, num_groups=num_groups
        )
        return ClippedSum(summed, norms, values)

    def _ghost_clipped_sum(self, inputs: tuple[torch.Tensor, ...], clip_norm: float) -> ClippedSum:
        """Opacus's ``DPTensorFastGradientClipping.backward``: norms, then sum_i c_i * loss_i."""
        if len(inputs[0]) == 0:
            return ClippedSum(
                [p.new_zeros(p.shape) for p in self.params],
                self.params[0].new_zeros(0),
                self.params[0].new_zeros(0),
            )
        self._gsm.max_grad_norm = clip_norm
        with self._hooks():
            values = self._gsm(*inputs)
            values.sum().backward(retain_graph=True)
            coef = self._gsm.get_clipping_coef().detach()
            norms = self._gsm.per_sample_gradient_norms.detach()
        self._clear()
        with quiet_backward_hooks():
            (coef * values).sum().backward()
        summed = [p.grad if p.grad is not None else p.new_zeros(p.shape) for p in self.params]
        self._clear()
        return ClippedSum(summed, norms, values.detach())

    @contextmanager
    def _hooks(self) -> Iterator[None]:
        if self.mode is GradSampleMode.EW:
            yield
            return
        self._gsm.enable_hooks()
        try:
            with quiet_backward_hooks():
                yield
        finally:
            self._gsm.disable_hooks()

    def _clear(self) -> None:
        for p in self._all:
            p.grad_sample = None
            p.grad = None

    def close(self) -> None:
        """Remove Opacus's hooks and per-parameter attributes (the model is plain again)."""
        if self._bk is not None:
            self._bk.close()
            return
        self._gsm.cleanup()


class SampleLoss(nn.Module):
    """The sample-wise term phi(x_i) per example (n,): the non-private objective,
    ``models.training.vae_per_example_loss`` (reconstruction + beta * KL to N(0, I))."""

    def __init__(self, vae: ConditionalConvVAE, *, beta: float) -> None:
        super().__init__()
        self.vae, self.beta = vae, beta

    def forward(self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return _vae_per_example_loss(self.vae, x, y, noise, beta=self.beta)


class BatchTerm(Protocol):
    """A batch-wise term released beside the sample-wise sum (paper 004; ``models.termwise``).

    Its clipped sum gets its own noise N(0, (z * clip_norm)^2) and is divided by ``denominator``.
    """

    clip_norm: float
    denominator: int

    def clipped_sum(
        self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor, index: torch.Tensor
    ) -> ClippedSum:
        """Clipped sum for the batch (x, y, reparameterisation noise; D_train indices)."""
        ...

    def noise_mask(self) -> list[bool]:
        """Per parameter (model order): whether the term's gradient can be non-zero there."""
        ...

    def close(self) -> None: ...


class AuditHook(Protocol):
    """AUDIT/TEST-ONLY access to each DP step (``audit.empirical.one_run``); None in real runs.

    ``unclipped``: a deliberately broken mechanism for tests: records are not clipped (the
    noise std stays z*C). ``add_canaries`` returns the step's clipped sum with the gradient
    canaries Poisson-sampled into this step added before the noise; ``observe`` sees the noisy
    gradient each step releases.
    """

    unclipped: bool

    def add_canaries(
        self, summed: list[torch.Tensor], *, clip_norm: float
    ) -> list[torch.Tensor]: ...

    def observe(self, noisy: list[torch.Tensor]) -> None: ...


@dataclass(frozen=True)
class DPSettings:
    """Standard DP-Adam's privacy knobs; ``VAETrainSettings.batch_size`` is the expected batch
    size B (Poisson sample rate q = B / N_train) and divides the noisy sum."""

    noise_multiplier: float
    clip_norm: float
    noise_seed: int
    grad_sample_mode: GradSampleMode = DEFAULT_GRAD_SAMPLE_MODE

    def __post_init__(self) -> None:
        if not (math.isfinite(self.noise_multiplier) and self.noise_multiplier >= 0):
            raise ValueError(
                f"noise_multiplier must be a finite number >= 0, got {self.noise_multiplier!r}"
            )
        if not (math.isfinite(self.clip_norm) and self.clip_norm > 0):
            raise ValueError(f"clip_norm must be a positive finite number, got {self.clip_norm!r}")
        object.__setattr__(self, "grad_sample_mode", _parse_mode(self.grad_sample_mode))


@dataclass(frozen=True)
class BatchTermRun:
    """What a batch-wise term released each step (term-wise DP-Adam, paper 004)."""

    clip_norm_2: float
    """C2; 0.0 when the term was inactive (alpha = 0 or C2 = 0)."""
    alpha: float
    partitions: int
    divergence: str

    def facts(self) -> dict[str, float | str]:
        return {
            "clip_norm_2": self.clip_norm_2,
            "alpha": self.alpha,
            "partitions": self.partitions,
            "divergence": self.divergence,
        }


@dataclass(frozen=True)
class DPRun:
    """What a DP-Adam loop ran, as the privacy claim reads it.

    ``steps``: noisy steps taken; ``sample_rate``: the Poisson rate B/N; ``mean_batch_size``:
    the realised batches' mean size (released outside the accounting); ``batch_term``: the
    term-wise loop's batch-wise release, if any.
    """

    noise_multiplier: float
    clip_norm: float
    steps: int
    sample_rate: float
    mean_batch_size: float
    grad_sample_mode: GradSampleMode
    batch_term: BatchTermRun | None = None


def check_per_example_objective(
    *, divergence: str | None, alpha: float | None, batch_size: int
) -> None:
    """Refuse a batch-wise term in standard DP-Adam (paper 004, Section 3 and Table 1).

    Raises:
        ValueError: when ``divergence`` is given or ``alpha > 0``: per-example clipping bounds
            the sum's sensitivity by C only if every loss term depends on one record.
    """
    if divergence is None and not (alpha is not None and alpha > 0):
        return
    factor = standard_dp_noise_std_with_batch_term(
        batch_size=batch_size, clip_norm=1.0, noise_multiplier=1.0
    )
    raise ValueError(
        f"standard DP-Adam (cdp) cannot train a batch-wise divergence (divergence={divergence!r}, "
        f"alpha={alpha!r}): with psi(batch) in every example's loss the summed clipped gradients "
        f"move by up to (2B - 1) C when one record changes (paper 004, Table 1, counts B*C), so "
        f"the noise std would have to be {factor:g} z*C at B = {batch_size}, not z*C. Use "
        f"--mech cdp-termwise (paper 004's term-wise DP-Adam) for a divergence term, or drop "
        f"--divergence/--alpha"
    )


def train_dp_vae(
    model: ConditionalConvVAE,
    train: Pair,
    val: Pair,
    settings: VAETrainSettings,
    dp: DPSettings,
    *,
    batch_term: BatchTerm | None = None,
    progress: ProgressFactory = null_progress,
    audit_hook: AuditHook | None = None,
) -> TrainHistory:
    """DP-Adam on the VAE objective for ``dp_sgd_steps`` Poisson-sampled steps.

    Each step includes every record of ``train`` independently with probability q = B / N
    (Opacus's ``UniformWithReplacementSampler``) and sets the gradient to
    ``(sum_i clip_C(g_i) + N(0, (z C)^2 I)) / B`` (plus the batch term's release, if any) before
    ``torch.optim.Adam.step``. Sampling and reparameterisation noise come from a generator
    seeded with ``settings.seed``; the Gaussian noise from one seeded with ``dp.noise_seed``.

    Notes:
        The number of steps is ``ceil(epochs * N / B)``, the schedule the accountant
        (``audit.privacy.cdp``) assumes; the steps taken are recorded in ``history.dp``.
        Epochs here are ``N / B`` steps each and only group the loss history. The train loss in
        the history is the mean unclipped phi over sampled records (not privatised; it is never
        released).
    """
    device = torch.device(settings.device)
    model.to(device).train()
    x_train, y_train = train
    n = len(x_train)
    steps = dp_sgd_steps(n_train=n, batch_size=settings.batch_size, epochs=settings.epochs)
    gen = torch.Generator().manual_seed(settings.seed)
    noise_gen = torch.Generator(device=device).manual_seed(dp.noise_seed)
    sampler = UniformWithReplacementSampler(
        num_samples=n, sample_rate=settings.batch_size / n, generator=gen, steps=steps
    )
    engine = PerExampleGradients(SampleLoss(model, beta=settings.beta), dp.grad_sample_mode)
    opt = torch.optim.Adam(model.parameters(), lr=settings.lr)
    history = TrainHistory()
    val_subset = settings.validation.subset(val, seed=settings.seed)
    bar = progress(total=settings.epochs, desc="train VAE (DP)")
    seen = total = records = 0.0
    taken = 0
    try:
        for step, batch in enumerate(sampler):
            index = torch.as_tensor(batch, dtype=torch.long)
            noise = torch.randn(len(index), model.latent_dim, generator=gen)
            xb, yb, nb = x_train[index].to(device), y_train[index].to(device), noise.to(device)
            grads, sample = private_gradient(
                engine,
                (xb, yb, nb, index),
                dp=dp,
                expected_batch_size=settings.batch_size,
                generator=noise_gen,
                batch_term=batch_term,
                audit_hook=audit_hook,
            )
            if audit_hook is not None:
                audit_hook.observe(grads)
            for p, g in zip(engine.params, grads, strict=True):
                p.grad = g
            opt.step()
            seen, total = seen + len(index), total + float(sample.values.sum())
            records, taken = records + len(index), taken + 1
            while (step + 1) * settings.epochs // steps > len(history.train_loss):
                _end_epoch(model, (val, val_subset), settings, history, seen, total, bar)
                seen = total = 0.0
    finally:
        engine.close()
        if batch_term is not None:
            batch_term.close()
    bar.close()
    model.eval()
    history.dp = DPRun(
        noise_multiplier=dp.noise_multiplier,
        clip_norm=dp.clip_norm,
        steps=taken,
        sample_rate=settings.batch_size / n,
        mean_batch_size=records / max(taken, 1),
        grad_sample_mode=dp.grad_sample_mode,
    )
    return history


def private_gradient(
    engine: PerExampleGradients,
    batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    *,
    dp: DPSettings,
    expected_batch_size: int,
    generator: torch.Generator,
    batch_term: BatchTerm | None = None,
    audit_hook: AuditHook | None = None,
) -> tuple[list[torch.Tensor], ClippedSum]:
    """One step's noisy gradient, the one Adam receives, and the sample-wise clipped sum.

    ``batch`` = (x, y, reparameterisation noise, D_train indices). The gradient is
    ``(sum_i clip_C(g_i) + N(0, (z C)^2 I)) / B`` (paper 004, Eq. 4), plus, with a batch term,
    ``(sum_j clip_C2(h_j) + N(0, (z C2)^2 I)) / b`` (Eq. 16); B is the expected batch size.
    """
    x, y, noise, index = batch
    clip = math.inf if audit_hook is not None and audit_hook.unclipped else dp.clip_norm
    sample = engine.clipped_sum(x, y, noise, clip_norm=clip)
    summed = (
        sample.grads
        if audit_hook is None
        else audit_hook.add_canaries(sample.grads, clip_norm=clip)
    )
    grads = noisy_average(
        summed,
        clip_norm=dp.clip_norm,
        noise_multiplier=dp.noise_multiplier,
        denominator=expected_batch_size,
        generator=generator,
    )
    if batch_term is not None:
        summed = batch_term.clipped_sum(x, y, noise, index)
        extra = noisy_average(
            summed.grads,
            clip_norm=batch_term.clip_norm,
            noise_multiplier=dp.noise_multiplier,
            denominator=batch_term.denominator,
            generator=generator,
            noise_on=batch_term.noise_mask(),
        )
        grads = [g + h for g, h in zip(grads, extra, strict=True)]
    return grads, sample


def _end_epoch(
    model: ConditionalConvVAE,
    val: tuple[Pair, Pair],
    settings: VAETrainSettings,
    history: TrainHistory,
    seen: float,
    total: float,
    bar,
) -> None:
    epoch = len(history.train_loss)
    history.train_loss.append(total / seen if seen else math.nan)
    record_validation(model, *val, settings, history, epoch)
    bar.update(1)
    bar.set_postfix(train=f"{history.train_loss[-1]:.2f}", val=f"{history.last_val_loss:.2f}")


def median_gradient_norm(
    model: ConditionalConvVAE,
    train: Pair,
    settings: VAETrainSettings,
    *,
    epochs: int = MEDIAN_WARMUP_EPOCHS,
    mode: GradSampleMode | str = DEFAULT_GRAD_SAMPLE_MODE,
) -> float:
    """Paper 003's clip norm (Abadi et al.'s heuristic): the median of the unclipped per-example
    gradient norms over a non-private warm-up of ``epochs`` epochs on ``train``.

    A deep copy of ``model`` trains with plain Adam on shuffled batches (seeded with
    ``settings.seed``); ``model`` itself is left untouched.

    Notes:
        The warm-up looks at D_train outside the privacy accounting, so the clip norm it returns
        is data-dependent and not covered by the run's epsilon; a run using it must say so.
    """
    device = torch.device(settings.device)
    warm = copy.deepcopy(model).to(device).train()
    mode = _parse_mode(mode)
    engine = PerExampleGradients(
        SampleLoss(warm, beta=settings.beta),
        GradSampleMode.EW if mode in (GradSampleMode.GHOST, GradSampleMode.BK) else mode,
    )
    opt = torch.optim.Adam(warm.parameters(), lr=settings.lr)
    gen = torch.Generator().manual_seed(settings.seed)
    x_train, y_train = train
    norms: list[torch.Tensor] = []
    try:
        for _ in range(epochs):
            order = torch.randperm(len(x_train), generator=gen)
            for start in range(0, len(order), settings.batch_size):
                idx = order[start : start + settings.batch_size]
                noise = torch.randn(len(idx), warm.latent_dim, generator=gen)
                grads, _ = engine.gradients(
                    x_train[idx].to(device), y_train[idx].to(device), noise.to(device)
                )
                norms.append(per_unit_norms(grads).cpu())
                for p, g in zip(engine.params, grads, strict=True):
                    p.grad = g.mean(0)
                opt.step()
    finally:
        engine.close()
    median = float(torch.cat(norms).median())
    log.info("median clip norm %.4g from %d per-example norms", median, sum(map(len, norms)))
    return median


def _parse_mode(mode: GradSampleMode | str) -> GradSampleMode:
    try:
        return GradSampleMode(mode)
    except ValueError:
        choices = ", ".join(m.value for m in GradSampleMode)
        raise ValueError(f"unknown grad-sample mode {mode!r}; choose one of: {choices}") from None
