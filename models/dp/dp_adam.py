"""DP-Adam for the target VAE (the trade-off paper, Section 2.3; Abadi et al. 2016): Poisson-sampled
batches, per-example gradients clipped at C, Gaussian noise of std z*C on their sum, Adam.

Per-example gradients come from Opacus's grad-sample modules (:class:`GradSampleMode`); clipping
and noise mirror Opacus's ``DPOptimizer`` (``clip_and_accumulate``, ``add_noise``,
``scale_grad``) so that the same code serves the term-wise variant
(:mod:`models.dp.termwise_loop`), whose batch-wise term plugs in through :class:`BatchTerm`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Protocol

import torch
from opacus.utils.uniform_sampler import UniformWithReplacementSampler

from dpvae_core.precision import float32_training
from dpvae_core.progress import ProgressFactory, null_progress
from dpvae_core.schedule import dp_sgd_steps
from dpvae_core.validation import check_non_negative, check_positive, check_positive_int
from models.dp.book_keeping import ClippedSum
from models.dp.engine import (
    DEFAULT_GRAD_SAMPLE_MODE,
    GradSampleMode,
    PerExampleGradients,
    SampleLoss,
    dp_precision,
    noisy_average,
    parse_mode,
)
from models.dp.microbatch import batch_units, microbatch_groups, unit_clip_norm
from models.training import (
    Pair,
    TrainHistory,
    VAETrainSettings,
    channels_last_model,
    image_layout,
    record_validation,
    training_noise,
)
from models.vae import ConditionalConvVAE

log = logging.getLogger(__name__)


def standard_dp_noise_std_with_batch_term(
    *, batch_size: int, clip_norm: float, noise_multiplier: float
) -> float:
    """Noise std a standard DP-Adam step must add when every example's loss has a batch-wise term.

    PriVAE (Table 1, micro aggregation) counts the sensitivity of the summed clipped gradients
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


class BatchTerm(Protocol):
    """A batch-wise term released beside the sample-wise sum (PriVAE; see termwise_loop).

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
    noise std stays z*C). ``noiseless``: another one: no Gaussian noise is added (the run's
    record, and so the claim, keep z). ``begin`` receives, once before the first step, the
    parameters the private gradient is taken of (the order of every gradient list below).
    ``add_canaries`` returns the step's clipped sum with the gradient
    canaries Poisson-sampled into this step added before the noise; ``observe`` sees the noisy
    gradient each step releases.
    """

    unclipped: bool
    noiseless: bool

    def begin(self, params: list[torch.nn.Parameter]) -> None: ...

    def add_canaries(
        self, summed: list[torch.Tensor], *, clip_norm: float
    ) -> list[torch.Tensor]: ...

    def observe(self, noisy: list[torch.Tensor]) -> None: ...


@dataclass(frozen=True)
class DPSettings:
    """Standard DP-Adam's privacy knobs; ``VAETrainSettings.batch_size`` is the expected batch
    size B (Poisson sample rate q = B / N_train) and divides the noisy sum. ``microbatch``: k
    records per clipping group (:mod:`models.dp.microbatch`; 1: per-record clipping), groups
    keyed by ``noise_seed``."""

    noise_multiplier: float
    clip_norm: float
    noise_seed: int
    grad_sample_mode: GradSampleMode = DEFAULT_GRAD_SAMPLE_MODE
    microbatch: int = 1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.noise_multiplier) and self.noise_multiplier >= 0):
            raise ValueError(
                f"noise_multiplier must be a finite number >= 0, got {self.noise_multiplier!r}"
            )
        if not (math.isfinite(self.clip_norm) and self.clip_norm > 0):
            raise ValueError(f"clip_norm must be a positive finite number, got {self.clip_norm!r}")
        object.__setattr__(self, "grad_sample_mode", parse_mode(self.grad_sample_mode))
        if not isinstance(self.microbatch, int) or isinstance(self.microbatch, bool):
            raise ValueError(f"microbatch must be an integer >= 1, got {self.microbatch!r}")
        if self.microbatch < 1:
            raise ValueError(f"microbatch must be an integer >= 1, got {self.microbatch!r}")


@dataclass(frozen=True)
class BatchTermRun:
    """What a batch-wise term released each step (term-wise DP-Adam, PriVAE)."""

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
    term-wise loop's batch-wise release, if any; ``precision``: what the per-example gradients
    ran in (:func:`models.dp.engine.dp_precision`; the norms, clipping, sum and noise are
    float32 under either, and the sensitivity C holds under either: docs/mechanisms.md).
    """

    noise_multiplier: float
    clip_norm: float
    steps: int
    sample_rate: float
    mean_batch_size: float
    grad_sample_mode: GradSampleMode
    batch_term: BatchTermRun | None = None
    microbatch: int = 1
    precision: str = "float32"


def check_per_example_objective(
    *, divergence: str | None, alpha: float | None, batch_size: int
) -> None:
    """Refuse a batch-wise term in standard DP-Adam (PriVAE, Section 3 and Table 1).

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
        f"move by up to (2B - 1) C when one record changes (PriVAE, Table 1, counts B*C), so "
        f"the noise std would have to be {factor:g} z*C at B = {batch_size}, not z*C. Use "
        f"--mech cdp-termwise (PriVAE's term-wise DP-Adam) for a divergence term, or drop "
        f"--divergence/--alpha"
    )


@float32_training
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
    Book-keeping clips on certified bounds in every precision (:mod:`models.dp.bk_bound`). With
    ``settings.precision`` bf16 and book-keeping the per-example gradients' forward and backward
    passes run under bf16 autocast (the bounds, clip factors, sum and noise in IEEE float32);
    otherwise all in float32.

    Notes:
        The number of steps is ``ceil(epochs * N / B)``, the schedule the accountant
        (``audit.privacy.dp_sgd_accounting``) assumes; the steps taken are recorded in
        ``history.dp``.
        Epochs here are ``N / B`` steps each and only group the loss history. The train loss in
        the history is the mean unclipped phi over sampled records (not privatised; it is never
        released).
    """
    device = torch.device(settings.device)
    model.to(device).train()
    x_train, y_train = train
    n = len(x_train)
    steps = dp_sgd_steps(n_train=n, batch_size=settings.batch_size, epochs=settings.epochs)
    # book-keeping takes the layout train_vae uses (same values; Opacus's ExpandedWeights cannot)
    layout = dp.grad_sample_mode is GradSampleMode.BK
    if layout:
        channels_last_model(model)
    gen = torch.Generator().manual_seed(settings.seed)
    noise_gen = torch.Generator(device=device).manual_seed(dp.noise_seed)
    groups = microbatch_groups(n, dp.microbatch, seed=dp.noise_seed)
    sampler = UniformWithReplacementSampler(
        num_samples=n, sample_rate=settings.batch_size / n, generator=gen, steps=steps
    )
    precision = dp_precision(settings.precision, dp.grad_sample_mode)
    engine = PerExampleGradients(
        SampleLoss(model, beta=settings.beta), dp.grad_sample_mode, precision=precision
    )
    if audit_hook is not None:
        audit_hook.begin(engine.params)
    opt = torch.optim.Adam(model.parameters(), lr=settings.lr)
    history = TrainHistory()
    val_subset = settings.validation.subset(val, seed=settings.seed)
    bar = progress(total=settings.epochs, desc="train VAE (DP)")
    seen = total = records = 0.0
    taken = 0
    try:
        for step, batch in enumerate(sampler):
            index = torch.as_tensor(batch, dtype=torch.long)
            noise = training_noise(model, len(index), generator=gen)
            xb, yb, nb = x_train[index].to(device), y_train[index].to(device), noise.to(device)
            xb = image_layout(xb) if layout else xb
            grads, sample = private_gradient(
                engine,
                (xb, yb, nb, index),
                dp=dp,
                expected_batch_size=settings.batch_size,
                generator=noise_gen,
                batch_term=batch_term,
                audit_hook=audit_hook,
                groups=None if groups is None else groups[index],
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
        microbatch=dp.microbatch,
        precision=precision.value,
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
    groups: torch.Tensor | None = None,
) -> tuple[list[torch.Tensor], ClippedSum]:
    """One step's noisy gradient, the one Adam receives, and the sample-wise clipped sum.

    ``batch`` = (x, y, reparameterisation noise, D_train indices). The gradient is
    ``(sum_i clip_C(g_i) + N(0, (z C)^2 I)) / B`` (PriVAE, Eq. 4), plus, with a batch term,
    ``(sum_j clip_C2(h_j) + N(0, (z C2)^2 I)) / b`` (Eq. 16); B is the expected batch size.
    With ``groups`` (the sampled records' microbatch groups, :mod:`models.dp.microbatch`) the
    units clipped are the groups' sums, at C / 2; the noise stays z*C and canaries stay C.
    """
    x, y, noise, index = batch
    clip = math.inf if audit_hook is not None and audit_hook.unclipped else dp.clip_norm
    units = None if groups is None else batch_units(groups)
    unit_clip = clip if groups is None else unit_clip_norm(clip, dp.microbatch)
    if units is None:
        sample = engine.clipped_sum(x, y, noise, clip_norm=unit_clip)
    else:
        sample = engine.clipped_sum(
            x, y, noise, clip_norm=unit_clip, groups=units[0], num_groups=units[1]
        )
    summed = (
        sample.grads
        if audit_hook is None
        else audit_hook.add_canaries(sample.grads, clip_norm=clip)
    )
    z = 0.0 if audit_hook is not None and audit_hook.noiseless else dp.noise_multiplier
    grads = noisy_average(
        summed,
        clip_norm=dp.clip_norm,
        noise_multiplier=z,
        denominator=expected_batch_size,
        generator=generator,
    )
    if batch_term is not None:
        summed = batch_term.clipped_sum(x, y, noise, index)
        extra = noisy_average(
            summed.grads,
            clip_norm=batch_term.clip_norm,
            noise_multiplier=z,
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
