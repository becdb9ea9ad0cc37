"""DP2-VAE (the DP2-VAE paper, Jiang et al., Algorithms 1 and 2): encoders pre-trained non-privately
on K disjoint subsets of D_train, then a re-initialised decoder trained by DP-Adam, each step on a
batch of one uniformly chosen subset, while that subset's encoder keeps training non-privately.

Stage 1 (Algorithm 1), per subset k: a copy of the target VAE's encoder and a throw-away decoder
(re-initialised, seeded by k) train with Adam on shuffled batches of B records of D_k for
``pretrain_epochs`` epochs; the whole-batch gradient is clipped at C, the encoder's and the
decoder's separately (lines 7 and 9).
Stage 2 (Algorithm 2): the decoder is re-initialised (seeded); each of T steps chooses
k ~ Unif{0..K-1}, draws a Poisson batch from D_k at rate min(1, B / |D_k|), truncated to B_max
records (a uniformly random B_max of them), and releases the decoder gradient
``(sum_i clip_C(g_i) + N(0, (sigma C)^2 I)) / B`` (``models.dp.private_gradient``: the
repo's per-example engine, clipping and noise; B the expected batch size) for Adam, while encoder
k takes one Adam step on the batch's mean loss, whole-batch gradient clipped at C. (The DP2-VAE
paper's line 13 steps the encoder once per record inside the loop; one step per batch is the same
non-private update at batch granularity and changes nothing in the privacy analysis.)

Only the decoder is released: the target module keeps its initial, data-independent encoder
weights, so the whole module is as private as its decoder. The image VAE and the LSTM VAE are
both supported (:data:`models.dp.dp2vae_decoder.DECODER_MODULES`).

Notes:
    The accounting is ``audit.privacy.dp2vae_accounting``; it reads :class:`Dp2Record`. Every
    random draw is independent of the data: a record's subset is a keyed hash of (seed, D_train
    index) alone (:mod:`models.dp.dp2vae_subsets`), so adding or removing a record moves no
    other record; the subset choices come from one generator, each step's Poisson coins and
    reparameterisation noise from a generator keyed by the step, and the DP noise draws the
    same number of values every step, so a record changes nothing in steps on other subsets.
    Encoder k is a non-private function of all of D_k, so one record can move every clipped
    decoder gradient of a batch from its subset: the step's sensitivity is 2 B_max C, which is
    why batches are truncated at B_max.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from torch import nn

from dpvae_core.precision import float32_training
from dpvae_core.progress import ProgressFactory, null_progress
from dpvae_core.schedule import dp_sgd_steps
from dpvae_core.seeding import Purpose, derive_seed, torch_generator
from dpvae_core.validation import check_positive_int
from models.dp import (
    AuditHook,
    DPSettings,
    GradSampleMode,
    PerExampleGradients,
    private_gradient,
)
from models.dp.book_keeping import ClippedSum
from models.dp.dp2vae_decoder import (
    decoder_parameters,
    encoder_side_parameters,
    reinitialise_decoder,
    share_decoder,
)
from models.dp.dp2vae_subsets import poisson_batch, subset_assignment
from models.training import Pair, VAETrainSettings, training_noise, vae_per_example_loss


@dataclass(frozen=True)
class Dp2Settings:
    """DP2-VAE's own knobs: K subsets, stage-1 epochs per subset and the batch cap B_max
    (None: the expected batch size B). The privacy bound grows linearly in B_max."""

    subsets: int
    pretrain_epochs: int
    max_batch_size: int | None = None

    def __post_init__(self) -> None:
        check_positive_int("subsets", self.subsets)
        if not isinstance(self.pretrain_epochs, int) or self.pretrain_epochs < 0:
            raise ValueError(
                f"pretrain_epochs must be an integer >= 0, got {self.pretrain_epochs!r}"
            )
        if self.max_batch_size is not None:
            check_positive_int("max_batch_size", self.max_batch_size)


@dataclass(frozen=True)
class Dp2Record:
    """What a DP2-VAE run did; ``audit.privacy.dp2vae_accounting`` reads n_train, subsets, steps,
    noise_multiplier and max_batch_size.

    Attributes:
        subset_sizes: |D_k| per subset; sample_rates: the Poisson rate min(1, B / |D_k|).
        pretrain_steps: stage-1 Adam steps per subset.
        subset_choices: stage-2 steps that chose each subset (sum = steps).
        subset_probability: 1/K, the chance a step touches a given subset.
        truncated_batches: stage-2 batches cut down to max_batch_size.
        train_loss: mean unclipped per-example loss per epoch-equivalent (N/B steps); not
            privatised, never released.
    """

    n_train: int
    subsets: int
    subset_sizes: tuple[int, ...]
    pretrain_steps: tuple[int, ...]
    steps: int
    noise_multiplier: float
    clip_norm: float
    expected_batch_size: int
    max_batch_size: int
    sample_rates: tuple[float, ...]
    subset_probability: float
    subset_choices: tuple[int, ...]
    truncated_batches: int
    mean_batch_size: float
    grad_sample_mode: str
    train_loss: tuple[float, ...]

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready values (tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def _clip_(params: Sequence[nn.Parameter], clip_norm: float) -> None:
    torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], clip_norm)


def pretrain_encoder(
    vae: nn.Module, data: Pair, settings: VAETrainSettings, *, epochs: int, clip_norm: float
) -> int:
    """Algorithm 1 on one subset, in place: Adam on the mean loss over shuffled batches of
    ``settings.batch_size``, encoder and decoder gradients each clipped at ``clip_norm``.
    Shuffling and reparameterisation noise from ``settings.seed``. Returns the step count."""
    device = torch.device(settings.device)
    x_all, y_all = data
    gen = torch.Generator().manual_seed(settings.seed)
    opt = torch.optim.Adam(vae.parameters(), lr=settings.lr)
    groups = (encoder_side_parameters(vae), decoder_parameters(vae))
    vae.train()
    steps = 0
    for _ in range(epochs):
        order = torch.randperm(len(x_all), generator=gen)
        for start in range(0, len(order), settings.batch_size):
            idx = order[start : start + settings.batch_size]
            noise = training_noise(vae, len(idx), generator=gen)
            loss = vae_per_example_loss(
                vae,
                x_all[idx].to(device),
                y_all[idx].to(device),
                noise.to(device, x_all.dtype),
                beta=settings.beta,
            ).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            for params in groups:
                _clip_(params, clip_norm)
            opt.step()
            steps += 1
    return steps


class _ActiveVAELoss(nn.Module):
    """Per-example loss (n,) of whichever subset's VAE is active; all share one decoder."""

    def __init__(self, vae: nn.Module, *, beta: float) -> None:
        super().__init__()
        self.vae, self.beta = vae, beta

    def forward(self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return vae_per_example_loss(self.vae, x, y, noise, beta=self.beta)


class Stage2:
    """Algorithm 2's step on K VAEs that share one decoder (``decoder_owner``'s modules).

    ``step(k, ...)`` releases the decoder's private gradient on the batch (per-example
    gradients of the decoder parameters only, clipped at C, noise sigma*C, divided by the
    expected batch size) and steps the decoder's Adam with it, then steps encoder k's own Adam
    with its whole-batch gradient clipped at C; both gradients are taken at the same weights.
    """

    def __init__(
        self,
        vaes: Sequence[nn.Module],
        decoder_owner: nn.Module,
        *,
        dp: DPSettings,
        expected_batch_size: int,
        lr: float,
        beta: float,
        device: str | torch.device = "cpu",
        audit_hook: AuditHook | None = None,
    ) -> None:
        if dp.grad_sample_mode is GradSampleMode.GHOST:
            raise ValueError(
                "grad-sample mode 'ghost' clips over every parameter; DP2-VAE clips the "
                "decoder's only: use bk, hooks, functorch or ew"
            )
        self.vaes, self.dp, self.lr = list(vaes), dp, lr
        self.expected_batch_size = check_positive_int("expected_batch_size", expected_batch_size)
        self.decoder = decoder_parameters(decoder_owner)
        shared = {id(p) for p in self.decoder}
        for k, vae in enumerate(self.vaes):
            if {id(p) for p in decoder_parameters(vae)} != shared:
                raise ValueError(f"VAE {k} does not share the decoder of decoder_owner")
        self._loss = _ActiveVAELoss(self.vaes[0], beta=beta)
        self.engine = PerExampleGradients(self._loss, dp.grad_sample_mode, params=self.decoder)
        self.decoder_opt = torch.optim.Adam(self.decoder, lr=lr)
        self._encoder_opts: dict[int, torch.optim.Optimizer] = {}
        self.noise_gen = torch.Generator(device=device).manual_seed(dp.noise_seed)
        self.audit_hook = audit_hook
        if audit_hook is not None:
            audit_hook.begin(self.engine.params)

    def step(
        self, k: int, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor, index: torch.Tensor
    ) -> tuple[list[torch.Tensor], ClippedSum]:
        """One step on subset ``k``'s batch; returns (the decoder's noisy gradient, its
        clipped sum)."""
        self._loss.vae = self.vaes[k]
        grads, sample = private_gradient(
            self.engine,
            (x, y, noise, index),
            dp=self.dp,
            expected_batch_size=self.expected_batch_size,
            generator=self.noise_gen,
            audit_hook=self.audit_hook,
        )
        if self.audit_hook is not None:
            self.audit_hook.observe(grads)
        encoder_grads = self._encoder_gradient(k, x, y, noise)
        for p, g in zip(self.decoder, grads, strict=True):
            p.grad = g
        self.decoder_opt.step()
        self.decoder_opt.zero_grad(set_to_none=True)
        if encoder_grads is not None:
            params = encoder_side_parameters(self.vaes[k])
            for p, g in zip(params, encoder_grads, strict=True):
                p.grad = g
            _clip_(params, self.dp.clip_norm)
            opt = self._encoder_opts.setdefault(k, torch.optim.Adam(params, lr=self.lr))
            opt.step()
            opt.zero_grad(set_to_none=True)
        return grads, sample

    def _encoder_gradient(
        self, k: int, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, ...] | None:
        if len(x) == 0:
            return None
        loss = vae_per_example_loss(self.vaes[k], x, y, noise, beta=self._loss.beta).mean()
        params = encoder_side_parameters(self.vaes[k])
        return torch.autograd.grad(loss, params, allow_unused=True, materialize_grads=True)

    def close(self) -> None:
        self.engine.close()


def _pretrain_all(
    model: nn.Module,
    train: Pair,
    assignment: torch.Tensor,
    settings: VAETrainSettings,
    dp2: Dp2Settings,
    clip_norm: float,
    progress: ProgressFactory,
) -> tuple[list[nn.Module], list[int]]:
    """Stage 1 for every subset; returns the K VAEs (sharing ``model``'s decoder) and steps."""
    vaes, steps = [], []
    bar = progress(total=dp2.subsets, desc="DP2-VAE stage 1 (encoders)")
    for k in range(dp2.subsets):
        vae = copy.deepcopy(model)
        reinitialise_decoder(vae, seed=derive_seed(settings.seed, Purpose.INIT, "dp2vae-s1", k))
        vae.to(settings.device)
        members = torch.nonzero(assignment == k).flatten()
        sub = VAETrainSettings(
            epochs=settings.epochs,
            batch_size=settings.batch_size,
            lr=settings.lr,
            beta=settings.beta,
            seed=derive_seed(settings.seed, Purpose.TRAIN, "dp2vae-s1", k),
            device=settings.device,
        )
        data = (train[0][members], train[1][members])
        steps.append(
            pretrain_encoder(vae, data, sub, epochs=dp2.pretrain_epochs, clip_norm=clip_norm)
        )
        vaes.append(share_decoder(vae, model))
        bar.update(1)
    bar.close()
    return vaes, steps


@float32_training
def train_dp2vae(
    model: nn.Module,
    train: Pair,
    settings: VAETrainSettings,
    dp: DPSettings,
    dp2: Dp2Settings,
    *,
    progress: ProgressFactory = null_progress,
    audit_hook: AuditHook | None = None,
) -> Dp2Record:
    """DP2-VAE on ``train``; trains ``model``'s decoder in place and returns what ran.

    ``model`` must be on the CPU (its decoder is re-initialised there) and is moved to
    ``settings.device``. Stage 2 runs ``dp_sgd_steps(N, B, settings.epochs)`` steps (epochs
    counted as N/B steps, as in DP-Adam); ``settings.seed`` keys the subsets, the stage-1
    initialisations and batches, the subset choices and each step's Poisson coins;
    ``dp.noise_seed`` the Gaussian noise. ``model``'s encoder keeps its initial weights.
    ``audit_hook`` (audit/test only) reaches each stage-2 step's clipped decoder sum and sees
    the noisy decoder gradient it releases (:class:`models.dp.AuditHook`).
    """
    x_train, _ = train
    n = len(x_train)
    if dp2.subsets > n:
        raise ValueError(f"subsets K must not exceed |D_train| = {n}, got {dp2.subsets!r}")
    b = settings.batch_size
    b_max = dp2.max_batch_size or b
    assignment = subset_assignment(n, dp2.subsets, seed=settings.seed)
    vaes, pre_steps = _pretrain_all(model, train, assignment, settings, dp2, dp.clip_norm, progress)
    reinitialise_decoder(model, seed=derive_seed(settings.seed, Purpose.INIT, "dp2vae-decoder"))
    model.to(settings.device)
    members = [torch.nonzero(assignment == k).flatten() for k in range(dp2.subsets)]
    rates = [min(1.0, b / len(m)) if len(m) else 1.0 for m in members]
    steps = dp_sgd_steps(n_train=n, batch_size=b, epochs=settings.epochs)
    choices = torch.randint(
        dp2.subsets,
        (steps,),
        generator=torch_generator(settings.seed, Purpose.TRAIN, "dp2vae-choice"),
    )
    stage = Stage2(
        vaes,
        model,
        dp=dp,
        expected_batch_size=b,
        lr=settings.lr,
        beta=settings.beta,
        device=settings.device,
        audit_hook=audit_hook,
    )
    run = _run_stage2(stage, train, members, rates, choices, settings, b_max, progress)
    model.eval()
    return Dp2Record(
        n_train=n,
        subsets=dp2.subsets,
        subset_sizes=tuple(len(m) for m in members),
        pretrain_steps=tuple(pre_steps),
        steps=steps,
        noise_multiplier=dp.noise_multiplier,
        clip_norm=dp.clip_norm,
        expected_batch_size=b,
        max_batch_size=b_max,
        sample_rates=tuple(rates),
        subset_probability=1 / dp2.subsets,
        subset_choices=tuple(torch.bincount(choices, minlength=dp2.subsets).tolist()),
        grad_sample_mode=dp.grad_sample_mode.value,
        **run,
    )


def _run_stage2(
    stage: Stage2,
    train: Pair,
    members: list[torch.Tensor],
    rates: list[float],
    choices: torch.Tensor,
    settings: VAETrainSettings,
    max_batch_size: int,
    progress: ProgressFactory,
) -> dict[str, object]:
    device = torch.device(settings.device)
    latent, dtype = stage.vaes[0].latent_dim, train[0].dtype
    steps, epochs = len(choices), settings.epochs
    losses: list[float] = []
    total = seen = batch_records = 0.0
    truncated = 0
    bar = progress(total=epochs, desc="DP2-VAE stage 2 (decoder, DP)")
    try:
        for t, k in enumerate(choices.tolist()):
            gen = torch_generator(settings.seed, Purpose.TRAIN, "dp2vae-step", t)
            index, cut = poisson_batch(
                members[k], rate=rates[k], max_batch_size=max_batch_size, generator=gen
            )
            noise = torch.randn(len(index), latent, generator=gen, dtype=dtype)
            _, sample = stage.step(
                k,
                train[0][index].to(device),
                train[1][index].to(device),
                noise.to(device),
                index,
            )
            truncated += int(cut)
            total, seen = total + float(sample.values.sum()), seen + len(index)
            batch_records += len(index)
            while (t + 1) * epochs // steps > len(losses):
                losses.append(total / seen if seen else math.nan)
                total = seen = 0.0
                bar.update(1)
    finally:
        stage.close()
        bar.close()
    return {
        "truncated_batches": truncated,
        "mean_batch_size": batch_records / max(steps, 1),
        "train_loss": tuple(losses),
    }
