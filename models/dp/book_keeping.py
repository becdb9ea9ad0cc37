"""Per-example clipping by book-keeping (Bu, Wang, Zha and Karypis, "Differentially private
optimization on large model at small cost", ICML 2023), for models whose trainable parameters all
sit in ``nn.Linear`` and ``nn.Conv2d`` layers (the conv VAE; Opacus's DPLSTM, whose cells are
Linear layers called once per time step).

One forward pass records each layer's input a and output s; one backward pass asks autograd for
dL/ds only (``torch.autograd.grad`` with the outputs as inputs), so it never computes the summed
weight gradients it would throw away. A layer's gradient for record i is then a function of
(a_i, g_i = dL/ds_i) alone, because the loss is a sum of per-record terms, and it is a product
of two factors over R positions (:mod:`models.dp.bk_conv`): G_i = Q_i^T P_i with P_i (R, X),
Q_i (R, Y):

* Linear, with the calls of a layer stacked as T positions: P = a_i (T, d), Q = g_i (T, p);
* Conv2d: P = im2col of a_i (T output positions, D = c k_h k_w), Q = g_i (T, p); for a
  stride-1 conv reading a nearest 2x upsample of h, P = h_i (T/4 positions) and Q the sums of
  g_i over the 2x2 blocks each tap reads (a quarter of the work, exactly).

Each layer gets the per-record squared norm ||G_i||^2 by the cheaper of two exact routes,
chosen per layer from its sizes: materialising G_i (one batched product, or on the CPU for large
convolutions one weight-gradient convolution per record) or the ghost norm
||G_i||^2 = sum_{r,r'} (P_i P_i^T)_{rr'} (Q_i Q_i^T)_{rr'} (n R^2 (X + Y); for R = 1 simply
||P_i||^2 ||Q_i||^2), and from it a certified bound B_i >= ||what record i adds to the sum||
(:mod:`models.dp.bk_bound`: the norm plus the rounding errors of the tensors' own arithmetic,
float32 or float64). The clip factors c_i = min(1, C (1 - 4u) / (B_i + 1e-6)) over all layers
then re-weight Q, and the clipped sum sum_i c_i G_i is one product (c Q)^T P per ghost layer, or
the contraction of the materialised G_i: no record adds more than C, in any precision. Cost: a
forward, an input-only backward, and about one weight-gradient product per layer, against a
forward and a full backward for a non-private step.

With ``groups`` (PriVAE's partitions) the units are groups of records: each group's gradient
sum_{i in j} G_i is formed directly (one product over the group's rows) and clipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from enum import Enum

import torch
from torch import nn

from dpvae_core.precision import Precision, mixed_precision, parse_precision, upcast
from models.dp.bk_bound import certified_factors, unit_roundoff
from models.dp.bk_conv import (
    ToWeight,
    per_record_loop,
    rows,
    unfolded,
    upsampled_factors,
    upsampled_fits,
)
from models.dp.bk_layers import GhostLayer, LayerGrad, MaterialisedLayer
from models.vae import ConditionalConvVAE, folded_training

#: Opacus's guard against division by zero in the clip factor C / (||g|| + 1e-6).
CLIP_EPS = 1e-6


@dataclass(frozen=True)
class ClippedSum:
    """Sum of clipped per-unit gradients (one tensor per parameter, shaped like it), the
    unclipped norms (units,) and the loss module's output (detached)."""

    grads: list[torch.Tensor]
    norms: torch.Tensor
    values: torch.Tensor


class Route(str, Enum):
    """How a layer's per-record norms are computed: AUTO picks the cheaper of the two exact
    routes per layer from its sizes; GHOST and MATERIALISE force one (for tests and benchmarks).
    Per-group clipping always materialises the (few) group gradients."""

    AUTO = "auto"
    GHOST = "ghost"
    MATERIALISE = "materialise"


#: A layer takes the ghost route when its Gram matrices cost at most this many multiply-adds
#: per float of its materialised per-record gradient: n R^2 (X + Y) <= GHOST_RATIO n X Y (both
#: routes also make one product of n R X Y). Materialised gradients are written once and read
#: twice (norms, contraction), and once they leave the cache each float costs tens of
#: multiply-adds: on the conv VAE (one CPU thread, batches of 16 and 32) the layers with ratios
#: 1.1 to 39 (the last encoder conv, the decoder's first two) ran faster or as fast by ghost
#: norms, those at 1150 and more (the first encoder convs, the decoder's last two) 2 to 60
#: times faster materialised.
GHOST_RATIO = 64.0

#: On the CPU a conv's per-record gradients come from one weight-gradient convolution per record,
#: not from im2col and a batched product, where im2col would hold more than this many floats
#: (a 64x64 conv on a batch of 16 without an upsample to factor: 3.6 to 7 times faster so).
LOOP_MIN_FLOATS = 1 << 23


@dataclass
class _Calls:
    """What one layer saw in a forward pass, one entry per call: its inputs (detached; None for
    a folded upsample and conv, which never forms the upsampled input), outputs, and for a conv
    reading a nearest 2x upsample, the upsample's input (else None)."""

    inputs: list[torch.Tensor | None]
    outputs: list[torch.Tensor]
    halves: list[torch.Tensor | None]


def _supported(module: nn.Module) -> bool:
    if isinstance(module, nn.Linear):
        return type(module).forward is nn.Linear.forward
    if isinstance(module, nn.Conv2d):
        return (
            type(module).forward is nn.Conv2d.forward
            and module.groups == 1
            and module.padding_mode == "zeros"
            and not isinstance(module.padding, str)
        )
    return False


def _upsamples_2x(module: nn.Module) -> bool:
    """A plain nearest 2x ``nn.Upsample``: out[y, x] = in[y // 2, x // 2]."""
    if not isinstance(module, nn.Upsample) or type(module).forward is not nn.Upsample.forward:
        return False
    scale = module.scale_factor
    scales = scale if isinstance(scale, tuple) else (scale, scale)
    return module.mode == "nearest" and module.size is None and all(f == 2 for f in scales)


def unsupported_parameters(module: nn.Module, params: Sequence[nn.Parameter]) -> list[str]:
    """Names of the parameters in ``params`` that book-keeping cannot handle (empty: all can):
    those not owned directly by a plain ``nn.Linear`` or a groups=1, zero-padded ``nn.Conv2d``."""
    wanted = {id(p) for p in params}
    covered = set()
    for sub in module.modules():
        if _supported(sub):
            covered.update(id(p) for p in sub.parameters(recurse=False))
    return [
        name for name, p in module.named_parameters() if id(p) in wanted and id(p) not in covered
    ]


class BookKeepingGradients:
    """Clipped sums of per-record (or per-group) gradients of ``loss_module``'s parameters.

    ``loss_module(*inputs)`` returns a 1-D tensor of losses; records are the rows of the inputs'
    first dimension, and every layer's input and output must keep that dimension first (true of
    Linear and Conv2d called on batches). Each loss must depend on its own record only, or, with
    ``groups``, on its own group's records only: then dL/ds restricted to a record's rows is
    that record's (group's) own gradient signal.

    Every precision clips on certified bounds (:mod:`models.dp.bk_bound`) computed from the
    tensors the clipped sum reads; ``ClippedSum.norms`` are the bounds B_i, in the sum's dtype.
    ``precision="bf16"`` runs the forward and backward passes under bf16 autocast, and the
    layers' inputs and output gradients are upcast to float32 once; float32 (the default) runs
    the model's own dtype (float32, or float64 for a float64 model).

    Raises:
        ValueError: when a parameter in ``params`` is not owned by a supported layer, or
            ``precision`` is fp16 (its gradients would need loss scaling).
    """

    def __init__(
        self,
        loss_module: nn.Module,
        *,
        params: Sequence[nn.Parameter] | None = None,
        route: Route | str = "auto",
        precision: Precision | str = Precision.FLOAT32,
    ):
        self.precision = parse_precision(precision)
        if self.precision is Precision.FP16:
            raise ValueError(
                "book-keeping clipping runs per-example gradients in float32 or bf16, not fp16 "
                "(fp16 gradients would need loss scaling)"
            )
        self._all = [p for p in loss_module.parameters() if p.requires_grad]
        self.params = self._all if params is None else list(params)
        bad = unsupported_parameters(loss_module, self.params)
        if bad:
            raise ValueError(
                "book-keeping clipping handles nn.Linear and nn.Conv2d (groups=1, zero padding) "
                f"only; unsupported parameters: {', '.join(bad)}"
            )
        self.loss_module = loss_module
        self.route = Route(route)
        wanted = {id(p) for p in self.params}
        self._layers = [
            m
            for m in loss_module.modules()
            if _supported(m) and any(id(p) in wanted for p in m.parameters(recurse=False))
        ]
        self._calls: dict[nn.Module, _Calls] = {}
        self._upsampled: dict[int, tuple[torch.Tensor, int, torch.Tensor]] = {}
        self._recording = False
        self._handles = [m.register_forward_hook(self._record) for m in self._layers]
        self._handles += [
            m.register_forward_hook(self._record_upsample)
            for m in loss_module.modules()
            if _upsamples_2x(m)
        ]
        # a conv VAE's decoder folds each upsample and conv into one transposed convolution
        # during the forward pass (models.vae.folded_training: the same function, 2.25 times
        # fewer multiply-adds) and reports (conv, h, out): what the hooks would record for that
        # conv, bar the upsampled input, which the upsampled factoring never reads
        self._layer_set = set(self._layers)
        self._folding = [m for m in loss_module.modules() if isinstance(m, ConditionalConvVAE)]

    def _record_upsample(self, module: nn.Module, inputs: tuple[torch.Tensor, ...], output):
        if self._recording:  # the output's version: an in-place change after it disqualifies it
            self._upsampled[id(output)] = (output, output._version, inputs[0].detach())

    def _record(self, module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor):
        if self._recording and output.requires_grad:
            calls = self._calls.setdefault(module, _Calls([], [], []))
            a = inputs[0]
            up = self._upsampled.get(id(a))
            fits = isinstance(module, nn.Conv2d) and upsampled_fits(module)
            half = up[2] if up is not None and up[0] is a and up[1] == a._version and fits else None
            calls.inputs.append(a.detach())
            calls.outputs.append(output)
            calls.halves.append(half)

    def _record_folded(self, conv: nn.Conv2d, h: torch.Tensor, output: torch.Tensor) -> None:
        if self._recording and output.requires_grad and conv in self._layer_set:
            if not upsampled_fits(conv):  # the folded decoder's convs are 3x3, stride 1
                raise ValueError(f"a folded convolution must have stride 1, got {conv}")
            calls = self._calls.setdefault(conv, _Calls([], [], []))
            calls.inputs.append(None)
            calls.outputs.append(output)
            calls.halves.append(h.detach())

    def clipped_sum(
        self,
        *inputs: torch.Tensor,
        clip_norm: float,
        groups: torch.Tensor | None = None,
        num_groups: int = 0,
    ) -> ClippedSum:
        """``models.dp.ClippedSum``: sum_u min(1, C (1 - 4u) / (B_u + 1e-6)) g_u over units u
        (records, or the ``num_groups`` groups given by ``groups`` (n,) int64), B_u >= ||g_u||
        certified (:mod:`models.dp.bk_bound`); the bounds B_u (units,) and the losses
        (detached)."""
        n = len(inputs[0])
        units = n if groups is None else num_groups
        if n == 0 or units == 0:
            zeros = self.params[0].new_zeros(0)
            return ClippedSum([p.new_zeros(p.shape) for p in self.params], zeros, zeros)
        self._calls = {}
        self._recording = True
        try:
            with mixed_precision(inputs[0].device, self.precision), ExitStack() as folds:
                for vae in self._folding:
                    folds.enter_context(folded_training(vae, self._record_folded))
                values = self.loss_module(*inputs)
        finally:
            self._recording = False
        calls, self._calls, self._upsampled = self._calls, {}, {}
        layers = [m for m in self._layers if m in calls]
        if groups is not None:
            groups = groups.to(inputs[0].device)
        outputs = [s for m in layers for s in calls[m].outputs]
        signals = torch.autograd.grad(values.sum(), outputs, allow_unused=True) if outputs else ()
        signals = list(signals)
        per_layer: dict[nn.Module, LayerGrad] = {}
        for m in layers:
            k = len(calls[m].outputs)
            gs, signals = signals[:k], signals[k:]
            if all(g is None for g in gs):
                continue
            gs = [
                upcast(torch.zeros_like(s) if g is None else g)  # float32 stays as it is
                for g, s in zip(gs, calls[m].outputs, strict=True)
            ]
            per_layer[m] = _layer_grad(m, _upcast(calls[m]), gs, groups, units, self.route)
        # every precision clips on certified bounds of what each unit adds (models.dp.bk_bound),
        # its factors rounded to the coarsest arithmetic the sum runs in
        dtype = max((layer.dtype for layer in per_layer.values()), key=unit_roundoff, default=None)
        bound_sq = values.new_zeros(units, dtype=torch.float64)
        for layer in per_layer.values():
            bound_sq = bound_sq + layer.bound_sq()
        factor, norms = certified_factors(
            bound_sq, clip_norm, CLIP_EPS, dtype=dtype or values.dtype, layers=len(per_layer)
        )
        summed: dict[int, torch.Tensor] = {}
        for m, layer in per_layer.items():
            weight, bias = layer.weighted(factor)
            summed[id(m.weight)] = weight
            if m.bias is not None:
                summed[id(m.bias)] = bias
        grads = [
            _like(summed[id(p)], p) if id(p) in summed else p.new_zeros(p.shape)
            for p in self.params
        ]
        return ClippedSum(grads, norms.detach(), values.detach())

    def close(self) -> None:
        """Remove the forward hooks (the model is plain again)."""
        for h in self._handles:
            h.remove()
        self._handles = []


def _upcast(calls: _Calls) -> _Calls:
    """The calls' inputs in float32 where they were recorded in a lower precision (the same
    tensors otherwise): the one copy both the norms and the sum are computed from."""
    recorded = [t for t in calls.inputs + calls.halves if t is not None]
    if all(upcast(t) is t for t in recorded):
        return calls
    inputs = [None if a is None else upcast(a) for a in calls.inputs]
    halves = [None if h is None else upcast(h) for h in calls.halves]
    return _Calls(inputs, calls.outputs, halves)


def _like(grad: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """``grad`` in ``p``'s memory layout (channels-last for a channels-last conv weight)."""
    return grad if grad.stride() == p.stride() else torch.empty_like(p).copy_(grad)


def _cat1(parts: list[torch.Tensor]) -> torch.Tensor:
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def _factors(
    m: nn.Module, calls: _Calls, signals: list[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, ToWeight]:
    """(P, Q, per-record bias gradients (n, p) or None, to_weight) of one layer's calls."""
    n = signals[0].shape[0]
    if isinstance(m, nn.Conv2d):
        bias = sum(g.sum((2, 3)) for g in signals) if m.bias is not None else None
        if all(h is not None for h in calls.halves):
            parts = [upsampled_factors(m, h, g) for h, g in zip(calls.halves, signals, strict=True)]
            p, q = _cat1([f[0] for f in parts]), _cat1([f[1] for f in parts])
            return p, q, bias, parts[0][2]
        p = _cat1([unfolded(m, a) for a in calls.inputs])
        return p, _cat1([rows(g) for g in signals]), bias, _conv_weight(m)
    p = _cat1([a.reshape(n, -1, a.shape[-1]) for a in calls.inputs])
    q = _cat1([g.reshape(n, -1, g.shape[-1]) for g in signals])
    return p, q, q.sum(1) if m.bias is not None else None, lambda flat: flat


def _conv_weight(m: nn.Conv2d) -> ToWeight:
    """(p, D) in (k_h, k_w, c) order -> ``m``'s (p, c, k_h, k_w) weight gradient (a view)."""
    p, c, kh, kw = m.weight.shape
    return lambda flat: flat.view(p, kh, kw, c).permute(0, 3, 1, 2)


def _sizes(m: nn.Module, calls: _Calls, signals: list[torch.Tensor]) -> tuple[int, int, int]:
    """(R, X, Y) of the layer's factors, before building them."""
    if isinstance(m, nn.Conv2d):
        p, c, kh, kw = m.weight.shape
        if all(h is not None for h in calls.halves):
            return sum(h.shape[2] * h.shape[3] for h in calls.halves), c, kh * kw * p
        return sum(g.shape[2] * g.shape[3] for g in signals), c * kh * kw, p
    r = sum(g[0].numel() // g.shape[-1] for g in signals)
    return r, calls.inputs[0].shape[-1], signals[0].shape[-1]


def _layer_grad(
    m: nn.Module,
    calls: _Calls,
    signals: list[torch.Tensor],
    groups: torch.Tensor | None,
    units: int,
    route: Route,
) -> LayerGrad:
    """Per-unit norms of one layer by the cheaper exact route (see the module docstring), or
    the one ``route`` forces."""
    r, x, y = _sizes(m, calls, signals)
    n = signals[0].shape[0]
    ghost = route is Route.GHOST or (route is Route.AUTO and r * r * (x + y) <= GHOST_RATIO * x * y)
    if groups is None and not ghost and _loops(m, calls, n * r * x):
        bias = sum(g.sum((2, 3)) for g in signals) if m.bias is not None else None
        weight = sum(per_record_loop(m, a, g) for a, g in zip(calls.inputs, signals, strict=True))
        return MaterialisedLayer(weight, bias, _conv_weight(m))
    p, q, bias, to_weight = _factors(m, calls, signals)
    if groups is not None:
        weight = p.new_zeros(units, y, x)
        group_bias = p.new_zeros(units, bias.shape[1]) if bias is not None else None
        for j in range(units):
            rows_j = groups == j
            weight[j] = q[rows_j].reshape(-1, y).T @ p[rows_j].reshape(-1, x)
            if group_bias is not None:
                group_bias[j] = bias[rows_j].sum(0)
        return MaterialisedLayer(weight, group_bias, to_weight)
    if ghost:
        return GhostLayer(p, q, bias, to_weight)
    return MaterialisedLayer(q.transpose(1, 2) @ p, bias, to_weight)


def _loops(m: nn.Module, calls: _Calls, im2col_floats: int) -> bool:
    """Whether a conv's per-record gradients come from :func:`per_record_loop`: on the CPU,
    for an input read directly (not through an upsample) whose im2col would be large."""
    return (
        isinstance(m, nn.Conv2d)
        and any(h is None for h in calls.halves)
        and calls.inputs[0].device.type == "cpu"
        and im2col_floats > LOOP_MIN_FLOATS
    )
