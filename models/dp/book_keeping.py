"""Per-example clipping by book-keeping (Bu, Wang, Zha and Karypis, "Differentially private
optimization on large model at small cost", ICML 2023), for models whose trainable parameters all
sit in ``nn.Linear`` and ``nn.Conv2d`` layers (the conv VAE; Opacus's DPLSTM, whose cells are
Linear layers called once per time step).

One forward pass records each layer's input a and output s; one backward pass asks autograd for
dL/ds only (``torch.autograd.grad`` with the outputs as inputs), so it never computes the summed
weight gradients it would throw away. A layer's gradient for record i is then a function of
(a_i, g_i = dL/ds_i) alone, because the loss is a sum of per-record terms:

* Linear, with the calls of a layer stacked as T positions, a_i (T, d), g_i (T, p):
  G_i = g_i^T a_i;
* Conv2d, with U_i = unfold(a_i) (D = c k_h k_w, T output positions): G_i = g_i U_i^T.

Each layer gets the per-record squared norm ||G_i||^2 by the cheaper of two exact routes,
chosen per layer from its sizes: materialising G_i (n p D T multiply-adds, n p D floats) or the
ghost norm ||G_i||^2 = sum_{t,t'} (a_i a_i^T)_{tt'} (g_i g_i^T)_{tt'} (n T^2 (D + p) and n T^2;
for T = 1 simply ||a_i||^2 ||g_i||^2). The clip factors c_i = min(1, C / (||G_i|| + 1e-6)) over
all layers then re-weight g, and the clipped sum sum_i c_i G_i is one ordinary weight-gradient
product per layer (or the contraction of the materialised G_i). Cost: a forward, an input-only
backward, and about two weight-gradient products, against a forward and a full backward for a
non-private step; per-example gradients of the large dense layers are never materialised.

With ``groups`` (PriVAE's partitions) the units are groups of records: each group's gradient
sum_{i in j} G_i is formed directly (one product over the group's rows) and clipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import torch
from torch import nn
from torch.nn import functional as F

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


@dataclass
class _Calls:
    """What one layer saw in a forward pass: its inputs (detached) and outputs, one per call."""

    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]


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

    Raises:
        ValueError: when a parameter in ``params`` is not owned by a supported layer.
    """

    def __init__(
        self,
        loss_module: nn.Module,
        *,
        params: Sequence[nn.Parameter] | None = None,
        route: Route | str = "auto",
    ):
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
        self._recording = False
        self._handles = [m.register_forward_hook(self._record) for m in self._layers]

    def _record(self, module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor):
        if self._recording and output.requires_grad:
            calls = self._calls.setdefault(module, _Calls([], []))
            calls.inputs.append(inputs[0].detach())
            calls.outputs.append(output)

    def clipped_sum(
        self,
        *inputs: torch.Tensor,
        clip_norm: float,
        groups: torch.Tensor | None = None,
        num_groups: int = 0,
    ) -> ClippedSum:
        """``models.dp.ClippedSum``: sum_u min(1, C / (||g_u|| + 1e-6)) g_u over units u
        (records, or the ``num_groups`` groups given by ``groups`` (n,) int64), the unclipped
        norms (units,) and the losses (detached)."""
        n = len(inputs[0])
        units = n if groups is None else num_groups
        if n == 0 or units == 0:
            zeros = self.params[0].new_zeros(0)
            return ClippedSum([p.new_zeros(p.shape) for p in self.params], zeros, zeros)
        self._calls = {}
        self._recording = True
        try:
            values = self.loss_module(*inputs)
        finally:
            self._recording = False
        calls, self._calls = self._calls, {}
        layers = [m for m in self._layers if m in calls]
        if groups is not None:
            groups = groups.to(inputs[0].device)
        outputs = [s for m in layers for s in calls[m].outputs]
        signals = torch.autograd.grad(values.sum(), outputs, allow_unused=True) if outputs else ()
        signals = list(signals)
        per_layer: dict[nn.Module, _LayerGrad] = {}
        sq = values.new_zeros(units)
        for m in layers:
            k = len(calls[m].outputs)
            gs, signals = signals[:k], signals[k:]
            if all(g is None for g in gs):
                continue
            gs = [
                torch.zeros_like(s) if g is None else g
                for g, s in zip(gs, calls[m].outputs, strict=True)
            ]
            layer = _layer_grad(m, calls[m].inputs, gs, groups, units, self.route)
            per_layer[m] = layer
            sq = sq + layer.sq_norms.to(sq.dtype)
        norms = sq.sqrt()
        factor = (clip_norm / (norms + CLIP_EPS)).clamp(max=1.0)
        summed: dict[int, torch.Tensor] = {}
        for m, layer in per_layer.items():
            weight, bias = layer.weighted(factor)
            summed[id(m.weight)] = weight
            if m.bias is not None:
                summed[id(m.bias)] = bias
        grads = [summed.get(id(p), p.new_zeros(p.shape)) for p in self.params]
        return ClippedSum(grads, norms.detach(), values.detach())

    def close(self) -> None:
        """Remove the forward hooks (the model is plain again)."""
        for h in self._handles:
            h.remove()
        self._handles = []


class _LayerGrad:
    """One layer's per-unit squared norms (units,), and its re-weighted sum on demand."""

    sq_norms: torch.Tensor

    def weighted(self, factor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(sum_u factor_u G_u for the weight, the same for the bias or None)."""
        raise NotImplementedError


class _Materialised(_LayerGrad):
    """Per-unit gradients (units, *weight.shape) and (units, *bias.shape) held in memory."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        self.weight, self.bias = weight, bias
        sq = weight.flatten(1).pow(2).sum(1)
        if bias is not None:
            sq = sq + bias.pow(2).sum(1)
        self.sq_norms = sq

    def weighted(self, factor):
        w = (factor @ self.weight.flatten(1)).view(self.weight.shape[1:])
        return w, None if self.bias is None else factor @ self.bias


class _GhostLinear(_LayerGrad):
    """Linear layer, ghost norms: a (n, T, d), g (n, T, p); the sum is (c g)^T a."""

    def __init__(self, act: torch.Tensor, sig: torch.Tensor, has_bias: bool):
        self.act, self.sig, self.has_bias = act, sig, has_bias
        self.sq_norms = _ghost_sq_norms(act, sig, has_bias)

    def weighted(self, factor):
        p, d = self.sig.shape[2], self.act.shape[2]
        sig = self.sig * factor[:, None, None]
        w = sig.reshape(-1, p).T @ self.act.reshape(-1, d)
        return w, sig.sum((0, 1)) if self.has_bias else None


class _GhostConv(_LayerGrad):
    """Conv2d layer, ghost norms from unfolded activations; the sum is the ordinary weight
    gradient (``torch.nn.grad.conv2d_weight``) of the re-weighted signal."""

    def __init__(self, m: nn.Conv2d, inputs: list[torch.Tensor], signals: list[torch.Tensor]):
        self.m, self.inputs, self.signals = m, inputs, signals
        act = _cat1(
            [
                F.unfold(a, m.kernel_size, m.dilation, m.padding, m.stride).transpose(1, 2)
                for a in inputs
            ]
        )
        sig = _cat1([g.flatten(2).transpose(1, 2) for g in signals])
        self.sq_norms = _ghost_sq_norms(act, sig, m.bias is not None)

    def weighted(self, factor):
        scaled = [g * factor[:, None, None, None] for g in self.signals]
        w = sum(_conv_weight_grad(self.m, a, g) for a, g in zip(self.inputs, scaled, strict=True))
        b = sum(g.sum((0, 2, 3)) for g in scaled) if self.m.bias is not None else None
        return w, b


def _cat1(parts: list[torch.Tensor]) -> torch.Tensor:
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def _ghost_sq_norms(act: torch.Tensor, sig: torch.Tensor, has_bias: bool) -> torch.Tensor:
    """||g_i^T a_i||_F^2 (+ ||sum_t g_i||^2) per record from Gram matrices over positions."""
    if act.shape[1] == 1:
        sq = act.pow(2).sum((1, 2)) * sig.pow(2).sum((1, 2))
    else:
        sq = (act @ act.transpose(1, 2)).mul_(sig @ sig.transpose(1, 2)).sum((1, 2))
    if has_bias:
        sq = sq + sig.sum(1).pow(2).sum(1)
    return sq


def _conv_weight_grad(
    m: nn.Conv2d, a: torch.Tensor, g: torch.Tensor, *, per_record: bool = False
) -> torch.Tensor:
    """sum_i dL/dW from inputs a (n, c, H, W) and signals g (n, p, H', W'), or, with
    ``per_record``, each record's own (n, *W.shape): a grouped convolution with one group per
    record (the batching rule torch.func uses), which runs at about the speed of the summed one."""
    kw = {"stride": m.stride, "padding": m.padding, "dilation": m.dilation}
    if not per_record:
        return torch.nn.grad.conv2d_weight(a, m.weight.shape, g, **kw)
    n, c = a.shape[:2]
    p = g.shape[1]
    out = torch.nn.grad.conv2d_weight(
        a.reshape(1, n * c, *a.shape[2:]),
        (n * p, *m.weight.shape[1:]),
        g.reshape(1, n * p, *g.shape[2:]),
        groups=n,
        **kw,
    )
    return out.view(n, *m.weight.shape)


def _layer_grad(
    m: nn.Module,
    inputs: list[torch.Tensor],
    signals: list[torch.Tensor],
    groups: torch.Tensor | None,
    units: int,
    route: Route,
) -> _LayerGrad:
    """Per-unit norms of one layer by the cheaper exact route (see the module docstring), or
    the one ``route`` forces."""
    has_bias = m.bias is not None
    if isinstance(m, nn.Conv2d):
        if groups is not None:
            return _Materialised(*_group_grads(m, inputs, signals, groups, units))
        p, d = m.weight.shape[0], m.weight[0].numel()
        t = sum(g.shape[2] * g.shape[3] for g in signals)
        if route is Route.GHOST or (route is Route.AUTO and t * (d + p) < p * d):
            return _GhostConv(m, inputs, signals)
        weight = sum(
            _conv_weight_grad(m, a, g, per_record=True)
            for a, g in zip(inputs, signals, strict=True)
        )
        bias = sum(g.sum((2, 3)) for g in signals) if has_bias else None
        return _Materialised(weight, bias)
    n = inputs[0].shape[0]
    act = _cat1([a.reshape(n, -1, a.shape[-1]) for a in inputs])
    sig = _cat1([g.reshape(n, -1, g.shape[-1]) for g in signals])
    t, d, p = act.shape[1], act.shape[2], sig.shape[2]
    if groups is not None:
        weight = act.new_zeros(units, p, d)
        bias = act.new_zeros(units, p) if has_bias else None
        for j in range(units):
            rows = groups == j
            s, a = sig[rows].reshape(-1, p), act[rows].reshape(-1, d)
            weight[j] = s.T @ a
            if bias is not None:
                bias[j] = s.sum(0)
        return _Materialised(weight, bias)
    if route is Route.GHOST or (route is Route.AUTO and (t == 1 or t * (d + p) < p * d)):
        return _GhostLinear(act, sig, has_bias)
    return _Materialised(sig.transpose(1, 2) @ act, sig.sum(1) if has_bias else None)


def _group_grads(
    m: nn.Conv2d,
    inputs: list[torch.Tensor],
    signals: list[torch.Tensor],
    groups: torch.Tensor,
    units: int,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-group conv gradients (units, *W.shape) and (units, p): one product per group."""
    weight = inputs[0].new_zeros(units, *m.weight.shape)
    bias = inputs[0].new_zeros(units, m.weight.shape[0]) if m.bias is not None else None
    for j in range(units):
        rows = groups == j
        if not bool(rows.any()):
            continue
        for a, g in zip(inputs, signals, strict=True):
            weight[j] += _conv_weight_grad(m, a[rows], g[rows])
            if bias is not None:
                bias[j] += g[rows].sum((0, 2, 3))
    return weight, bias
