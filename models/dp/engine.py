"""Per-example gradients of the target VAE and their privatisation (Abadi et al. 2016): the
engines (:class:`GradSampleMode`: Opacus's grad-sample modules or the book-keeping clipper of
:mod:`models.dp.book_keeping`), clipping and the Gaussian noise, mirroring Opacus's ``DPOptimizer``
(``clip_and_accumulate``, ``add_noise``, ``scale_grad``)."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from enum import Enum

import torch
from opacus.grad_sample import (
    GradSampleModule,
    GradSampleModuleExpandedWeights,
    GradSampleModuleFastGradientClipping,
)
from torch import nn

from dpvae_core.precision import Precision, parse_precision
from dpvae_core.validation import parse_enum
from models.dp.book_keeping import CLIP_EPS, BookKeepingGradients, ClippedSum
from models.training import vae_per_example_loss as _vae_per_example_loss
from models.vae import ConditionalConvVAE

log = logging.getLogger(__name__)


class GradSampleMode(str, Enum):
    """How Opacus computes per-example gradients (``PrivacyEngine.make_private(grad_sample_mode)``).

    HOOKS: module hooks with per-layer formulas (Opacus's default).
    FUNCTORCH: the same hooks, per-layer gradients from ``torch.func`` (vmap of grad).
    EW: PyTorch's ExpandedWeights (``call_for_per_sample_grads``), computed inside autograd.
    GHOST: ghost / fast gradient clipping: per-example norms without materialising per-example
        gradients, then a second backward pass on the re-weighted loss. Clips per record only, so
        it serves the sample-wise term, never the per-partition batch-wise term.
    BK: book-keeping (``models.dp.book_keeping``; Bu et al. 2023): one forward pass, one backward
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


#: The fastest correct mode (benchmarks/bench_dp_epoch.py, the trade-off paper's 64x64x3 VAE, one
#: CPU thread, CPU time of an epoch against a non-private one): bk 1.08-1.22x at batch 32 and
#: latent 100, 1.13-1.21x at LFW20's quick batch 16 and latent 16 (1.03-1.17x per record trained
#: on; 1.68-1.91x before issue 38); ew 2.8-3.3x, ghost 3.3x, hooks 3.3-3.6x, functorch 3.4-3.9x
#: (measured before issue 38). On the LSTM VAE (DPLSTM) bk's clipped sum costs about 1.1x a
#: non-private step, ew's 4.5x.
DEFAULT_GRAD_SAMPLE_MODE = GradSampleMode.BK


def dp_precision(precision: Precision | str, mode: GradSampleMode | str) -> Precision:
    """The precision DP-Adam's per-example gradients run in for a cell of ``precision``: bf16
    where the cell runs bf16 and the mode is book-keeping (its bound is certified:
    :mod:`models.dp.bk_bound`), float32 otherwise (fp16 gradients would need loss scaling;
    Opacus's modes run float32)."""
    if parse_precision(precision) is Precision.BF16 and parse_mode(mode) is GradSampleMode.BK:
        return Precision.BF16
    return Precision.FLOAT32


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
            are summed into one unit before clipping (PriVAE's partitions, Eq. 15); None makes
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
    """(sum + N(0, (z C)^2 I)) / denominator, per parameter (PriVAE, Eq. 4 and 16).

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
    ``precision``: bf16 with BK only (:func:`dp_precision`), float32 everywhere.
    Hook-based modes are switched on only inside a call, so several engines may share one model.
    Call :meth:`close` to remove hooks and Opacus's attributes from the parameters.
    """

    def __init__(
        self,
        loss_module: nn.Module,
        mode: GradSampleMode | str = DEFAULT_GRAD_SAMPLE_MODE,
        *,
        params: Sequence[nn.Parameter] | None = None,
        precision: Precision | str = Precision.FLOAT32,
    ):
        self.mode = parse_mode(mode)
        self.precision = parse_precision(precision)
        if self.precision is not Precision.FLOAT32 and self.mode is not GradSampleMode.BK:
            raise ValueError(
                f"per-example gradients in {self.precision.value} need the bk grad-sample mode, "
                f"got {self.mode.value}"
            )
        self._all = [p for p in loss_module.parameters() if p.requires_grad]
        self.params = self._all if params is None else list(params)
        if self.mode is GradSampleMode.GHOST and params is not None:
            raise ValueError("ghost clipping clips over every parameter; params must be None")
        self._bk: BookKeepingGradients | None = None
        if self.mode is GradSampleMode.BK:
            self._bk = BookKeepingGradients(
                loss_module, params=self.params, precision=self.precision
            )
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


def parse_mode(mode: GradSampleMode | str) -> GradSampleMode:
    return parse_enum(GradSampleMode, mode, "grad-sample mode")
