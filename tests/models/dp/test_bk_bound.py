"""Book-keeping clipping's certified bounds (models.dp.bk_bound), in every precision: on inputs
built to make norms err, no record adds more than C to the clipped sum, recomputed from the
tensors the sum actually adds (float32 ones in float64 with its own error bound, float64 ones
exactly in rational arithmetic); planted bugs (norms from bf16 copies of the factors, the old
float32 norms trusted as they come) fail the same check."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from torch import nn

import models.dp.bk_layers as bk_layers
from dpvae_core.precision import Precision, native_bf16_cpu
from models.dp import book_keeping as bk
from models.dp.bk_bound import gamma64
from models.dp.engine import GradSampleMode, PerExampleGradients, SampleLoss, dp_precision
from models.vae import ConditionalConvVAE

T, D, P = 8, 6, 5  # the Linear's positions, input and output widths


class Adversary(nn.Module):
    """Four layers whose output gradients the inputs set exactly: the loss is sum <s, t> over
    each layer's output s, so dL/ds = t (rounded to bf16 under autocast). A Linear on T
    positions, a Conv2d, a Conv2d reading a nearest 2x upsample and a Linear on one position."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(D, P)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.upconv = nn.Conv2d(2, 3, 3, padding=1)
        self.vec = nn.Linear(7, 4)

    def forward(self, a_lin, a_img, a_half, a_vec, t_lin, t_img, t_up, t_vec) -> torch.Tensor:
        outs = (self.lin(a_lin), self.conv(a_img), self.upconv(self.up(a_half)), self.vec(a_vec))
        targets = (t_lin, t_img, t_up, t_vec)
        return sum((s.float() * t).flatten(1).sum(1) for s, t in zip(outs, targets, strict=True))


def adversarial_batch(clip: float, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Records built to make norms err, four of each kind (random scales and signs):

    0 cancellation: each layer's per-position products cancel to a remainder of norm C
      (kappa = S^2 / ||G||^2 from 6e4 to 2e19): alternating +-M output gradients on a
      constant input and a small gradient on a coordinate the alternating part leaves at 0;
    1 bf16 rounding boundaries: inputs and gradients at midpoints between bf16 numbers
      (1 + 2^-8, 3 * 2^-9, ...), scaled to a norm near C;
    2 one coordinate: every layer's gradient dominated by one output coordinate (1e4 times
      the rest);
    3 at the clip norm: random records scaled so that their float32 norm is C (1 + 1e-7 k),
      k in -2..1.
    """
    gen = torch.Generator().manual_seed(seed)
    n = 16

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    a_lin, t_lin = randn(n, T, D), randn(n, T, P)
    a_img, t_img = randn(n, 3, 6, 6), randn(n, 4, 6, 6)
    a_half, t_up = randn(n, 2, 3, 3), randn(n, 3, 6, 6)
    a_vec, t_vec = randn(n, 7), randn(n, 4)
    sign = torch.tensor([(-1.0) ** t for t in range(T)])
    checker = torch.tensor([[(-1.0) ** (y + x) for x in range(4)] for y in range(4)])
    for i in range(4):  # cancellation
        m = 10.0 ** (2 + 2 * i)
        a_lin[i] = randn(D).expand(T, D)
        t_lin[i] = 0
        t_lin[i, :, :3] = m * sign[:, None] * randn(3)
        t_lin[i, :, 4] = clip / (T * a_lin[i, 0].norm())  # the remainder: a gradient of norm C
        # convs: a constant input, a checkerboard on the inner 4x4 outputs, whose every tap
        # reads inside the input; the remainder on the last channel has norm C
        a_img[i] = randn(3, 1, 1).expand(3, 6, 6)
        t_img[i] = 0
        t_img[i, :3, 1:5, 1:5] = m * checker * randn(3, 1, 1)
        t_img[i, 3, 1:5, 1:5] = clip / (16 * 3 * a_img[i, :, 0, 0].norm())
        a_half[i] = randn(2, 1, 1).expand(2, 3, 3)
        t_up[i] = 0
        t_up[i, :2, 1:5, 1:5] = m * checker * randn(2, 1, 1)
        t_up[i, 2, 1:5, 1:5] = clip / (16 * 3 * a_half[i, :, 0, 0].norm())
        t_vec[i] = 0
    for i in range(4, 8):  # bf16 rounding boundaries
        mids = torch.tensor([1 + 2**-8, 3 * 2**-9, -(1 + 3 * 2**-9), 2**-7 + 2**-16])
        for t in (a_lin, t_lin, a_img, t_img, a_half, t_up, a_vec, t_vec):
            t[i] = mids[torch.randint(0, 4, t[i].shape, generator=gen)] * (1 + i)
    for i in range(8, 12):  # one coordinate
        for t in (t_lin, t_img, t_up, t_vec):
            t[i] *= 1e-4
        t_lin[i, :, i % P] = 1e3
        t_img[i, i % 4] = 1e3
        t_up[i, i % 3] = 1e3
        t_vec[i, i % 4] = 1e3
    return a_lin, a_img.bfloat16(), a_half.bfloat16(), a_vec, t_lin, t_img, t_up, t_vec


def clipped_run(
    model, inputs, clip, route, *, precision="bf16", at_c=True, groups=None
) -> tuple[list[bk_layers.LayerGrad], torch.Tensor, torch.Tensor]:
    """(the layers the engine summed, the clip factors it scaled them by, its norms B_i) of one
    clipped sum. With ``at_c``, records 12-15 are first scaled to B_i = C (1 + 1e-7 k), k in
    -2..1, by the engine's own bounds."""
    seen: list[tuple[bk_layers.LayerGrad, list[torch.Tensor]]] = []
    original = bk._layer_grad
    passes = torch.bfloat16 if precision == "bf16" else inputs[0].dtype

    def spy(m, calls, *args, **kwargs):
        layer = original(m, calls, *args, **kwargs)
        factors: list[torch.Tensor] = []
        weighted = layer.weighted

        def record(factor):
            factors.append(factor)
            return weighted(factor)

        layer.weighted = record
        assert all(s.dtype == passes for s in calls.outputs)  # the passes ran in this dtype
        seen.append((layer, factors))
        return layer

    engine = bk.BookKeepingGradients(model, route=route, precision=precision)
    bk._layer_grad = spy
    try:
        if at_c:  # records 12-15 scaled to a norm of C (1 + 1e-7 k) by the engine's own norms
            first = engine.clipped_sum(*inputs, clip_norm=math.inf).norms
            inputs = list(inputs)
            scale = clip * (1 + 1e-7 * torch.arange(-2, 2, dtype=torch.float64)) / first[12:]
            for k in (4, 5, 6, 7):  # the output gradients of records 12-15
                inputs[k] = inputs[k].clone()
                shape = (-1, *[1] * (inputs[k].dim() - 1))
                inputs[k][12:] *= scale.to(inputs[k].dtype).view(shape)
            seen.clear()
        units = {} if groups is None else {"groups": groups, "num_groups": int(groups.max()) + 1}
        out = engine.clipped_sum(*inputs, clip_norm=clip, **units)
    finally:
        bk._layer_grad = original
        engine.close()
    return [layer for layer, _ in seen], seen[0][1][0], out.norms


def float32_additions(layers, factor32) -> torch.Tensor:
    """An upper bound on ||what each unit adds to the clipped sum|| of float32 tensors: its
    float64 recomputation plus that recomputation's own error bound. The additions are
    recomputed from the float32 tensors the sum reads: the scaled Q and P of ghost layers
    (sum_r q_r p_r^T, products of float32 numbers exact in float64, sums of R terms within
    gamma64(R) S), c_i G_i of materialised ones (exact in float64); squares and the sum over m
    coordinates add a relative gamma64(m + 2)."""
    assert factor32.dtype == torch.float32
    factor = factor32.double()
    sq = torch.zeros(len(factor), dtype=torch.float64)
    product_error = torch.zeros_like(sq)
    coordinates = 0
    for layer in layers:
        if isinstance(layer, bk_layers.GhostLayer):
            q = (layer.q * factor32[:, None, None]).double()  # as weighted() scales it
            p = layer.p.double()
            sq += (q.transpose(1, 2) @ p).pow(2).sum((1, 2))
            s = (q.norm(dim=2) * p.norm(dim=2)).sum(1) * (1 + gamma64(p.shape[2] + q.shape[2]))
            product_error += gamma64(p.shape[1]) * s
            coordinates += p.shape[2] * q.shape[2]
        else:
            sq += (factor[:, None] * layer.weight.flatten(1).double()).pow(2).sum(1)
            coordinates += layer.weight[0].numel()
        if layer.bias is not None:
            sq += (factor[:, None] * layer.bias.double()).pow(2).sum(1)
            coordinates += layer.bias.shape[1]
    return sq.sqrt() * (1 + gamma64(coordinates + 2)) + product_error


def record_additions(model, inputs, clip, route, **kwargs) -> tuple[torch.Tensor, ...]:
    """(:func:`float32_additions` of a clipped sum of float32 tensors, its clip factors, the
    engine's norms)."""
    layers, factor, norms = clipped_run(model, inputs, clip, route, **kwargs)
    return float32_additions(layers, factor), factor.double(), norms


def _exact(t: torch.Tensor) -> tuple[np.ndarray, int]:
    """A float64 tensor exactly: integers (an object array) times 2**shift."""
    mantissa, exponent = np.frexp(t.detach().double().numpy())
    ints = (mantissa * 2.0**53).astype(np.int64).astype(object)  # 53 bits: exact
    exponent = exponent.astype(np.int64) - 53
    shift = int(exponent.min())
    return ints * (2 ** (exponent - shift).astype(object)), shift


def exact_squared_additions(layers, factor) -> list[Fraction]:
    """||what each unit adds to the clipped sum of float64 tensors||^2, exactly: the scaled Q
    and P of ghost layers (sum_r q_r p_r^T of the float64 tensors weighted() multiplies), c_i G_i
    of materialised ones, in integer arithmetic."""
    assert factor.dtype == torch.float64
    c, c_shift = _exact(factor)
    total = [Fraction(0)] * len(factor)

    def add(i: int, ints: np.ndarray, shift: int) -> None:
        total[i] += Fraction(int((ints * ints).sum())) * Fraction(2) ** (2 * shift)

    for layer in layers:
        if isinstance(layer, bk_layers.GhostLayer):
            (q, q_shift), (p, p_shift) = _exact(layer.q * factor[:, None, None]), _exact(layer.p)
            for i in range(len(factor)):
                add(i, q[i].T @ p[i], q_shift + p_shift)
        else:
            g, g_shift = _exact(layer.weight.flatten(1))
            for i in range(len(factor)):
                add(i, c[i] * g[i], c_shift + g_shift)
        if layer.bias is not None:
            b, b_shift = _exact(layer.bias)
            for i in range(len(factor)):
                add(i, c[i] * b[i], c_shift + b_shift)
    return total


@pytest.fixture(scope="module")
def adversary():
    torch.manual_seed(0)
    return Adversary()


@pytest.mark.parametrize("route", list(bk.Route))
def test_no_record_adds_more_than_c_on_adversarial_records(adversary, route):
    clip = 3.0
    added, factor, norms = record_additions(adversary, adversarial_batch(clip), clip, route)
    assert bool((added <= clip).all()), f"largest addition {float(added.max()) / clip:.9g} C"
    assert bool((factor[:12] < 1).all())  # the built records are clipped
    # at C, clipped or not, a record adds about C (the ghost bounds' margin: 0.1 % here)
    assert bool((added[12:] > clip * (1 - 5e-3)).all())
    if route is bk.Route.MATERIALISE:  # norms of the very tensors summed: tight
        assert bool((added[:12] > clip * (1 - 1e-5)).all())
    else:  # the ghost bound pays for cancellation it cannot see through: clipped harder
        assert float(added[3]) < 1e-3 * clip


def test_no_group_adds_more_than_c_on_adversarial_records(adversary):
    """Per-group clipping (PriVAE's partitions, cdp's microbatches): each group's summed
    gradient is materialised and bounded as a unit."""
    groups = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3, 4, 4, 4, 4, 0, 1, 2, 3])
    clip = 3.0
    added, factor, _ = record_additions(
        adversary, adversarial_batch(clip), clip, bk.Route.AUTO, at_c=False, groups=groups
    )
    assert added.shape == (5,) and bool((factor < 1).all())
    assert bool((added <= clip).all()) and bool((added > clip * (1 - 1e-5)).all())


def _bf16_norms(p, q, bias):
    """The planted bug: the ghost norm from bf16 copies of the factors, computed in bf16,
    while the sum reads the float32 factors."""
    pb, qb = p.bfloat16(), q.bfloat16()
    if p.shape[1] == 1:
        ghost = pb.pow(2).sum((1, 2)) * qb.pow(2).sum((1, 2))
    else:
        ghost = ((pb @ pb.transpose(1, 2)) * (qb @ qb.transpose(1, 2))).sum((1, 2))
    sq = ghost.double().clamp(min=0)
    return sq if bias is None else sq + bias.bfloat16().pow(2).sum(1).double()


def test_a_planted_bf16_norm_fails_the_check(adversary, monkeypatch):
    monkeypatch.setattr(bk_layers, "ghost_bound_sq", _bf16_norms)
    clip = 3.0
    added, _, _ = record_additions(adversary, adversarial_batch(clip), clip, bk.Route.GHOST)
    assert float(added.max()) > 1.5 * clip


def _trusted_norms(p, q, bias):
    """The planted bug, the clipping of float32 (and float64) models before every precision was
    certified: ghost norms as differences of Gram matrices in the tensors' own arithmetic,
    trusted as they come (a NaN where they come out negative)."""
    if p.shape[1] == 1:
        sq = p.pow(2).sum((1, 2)) * q.pow(2).sum((1, 2))
    else:
        sq = (p @ p.transpose(1, 2)).mul_(q @ q.transpose(1, 2)).sum((1, 2))
    return (sq if bias is None else sq + bias.pow(2).sum(1)).double()


def _float_batch(clip: float, dtype: torch.dtype) -> list[torch.Tensor]:
    return [t.to(dtype) for t in adversarial_batch(clip)]


@pytest.mark.parametrize("route", list(bk.Route))
def test_float32_adds_at_most_c_on_adversarial_records(adversary, route):
    """A float32 model clips on certified bounds as bf16 does (u = 2^-24)."""
    clip = 3.0
    inputs = _float_batch(clip, torch.float32)
    added, factor, _ = record_additions(adversary, inputs, clip, route, precision="float32")
    assert bool((added <= clip).all()), f"largest addition {float(added.max()) / clip:.9g} C"
    assert bool((factor[:12] < 1).all())
    assert bool((added[12:] > clip * (1 - 5e-3)).all())
    if route is bk.Route.MATERIALISE:
        assert bool((added[:12] > clip * (1 - 1e-5)).all())
    else:
        assert float(added[3]) < 1e-3 * clip


def test_the_trusted_float32_norms_fail_the_check(adversary, monkeypatch):
    """Before: float32 ghost norms err by more than the remainder of a cancelling record, which
    then adds more than C (or a NaN); the same check catches it."""
    monkeypatch.setattr(bk_layers, "ghost_bound_sq", _trusted_norms)
    clip = 3.0
    inputs = _float_batch(clip, torch.float32)
    added, _, _ = record_additions(adversary, inputs, clip, bk.Route.GHOST, precision="float32")
    assert float(added[:4].nan_to_num(nan=math.inf).max()) > 1.5 * clip  # past C on cancellation
    assert float(added[4:].max()) < clip * (1 + 1e-4)  # at C elsewhere


def _float64_run(route, clip):
    torch.manual_seed(0)
    model = Adversary().double()
    return clipped_run(model, _float_batch(clip, torch.float64), clip, route, precision="float32")


@pytest.mark.parametrize("route", list(bk.Route))
def test_a_float64_model_adds_at_most_c_exactly(route):
    """A float64 model's sum runs in float64 (u = 2^-53): its factors and bounds are float64, and
    each record's addition, recomputed exactly, is at most C."""
    clip = 3.0
    layers, factor, norms = _float64_run(route, clip)
    assert factor.dtype == norms.dtype == torch.float64
    assert all(layer.dtype == torch.float64 for layer in layers)
    squared = exact_squared_additions(layers, factor)
    worst = max(squared)
    assert worst <= Fraction(clip) ** 2, f"largest addition {math.sqrt(worst) / clip:.17g} C"
    added = torch.tensor([math.sqrt(t) for t in squared], dtype=torch.float64)
    assert bool((factor[:12] < 1).all())
    assert bool((added[12:] > clip * (1 - 5e-3)).all())
    if route is bk.Route.MATERIALISE:
        assert bool((added[:12] > clip * (1 - 1e-5)).all())


def test_the_trusted_float64_norms_fail_the_check(monkeypatch):
    monkeypatch.setattr(bk_layers, "ghost_bound_sq", _trusted_norms)
    clip = 3.0
    layers, factor, _ = _float64_run(bk.Route.GHOST, clip)
    assert not bool(factor.isnan().any())
    squared = exact_squared_additions(layers, factor)
    assert max(squared[:4]) > Fraction(clip * 1.5) ** 2  # past C on cancellation (1.83 C)


@pytest.mark.parametrize(("precision", "rtol"), [("bf16", 0.05), ("float32", 2e-3)])
def test_the_conv_vae_adds_at_most_c_per_record(precision, rtol):
    """On real records the bounds sit just above the norms (the float32 norms of Opacus's
    per-sample gradients): bf16's error plus the certified margin, or in float32 the margin
    alone (0.1 % at most on the VAE's records: the tolerance is twice that)."""
    torch.manual_seed(0)
    vae = ConditionalConvVAE(channels=3, height=16, width=16, num_classes=3, latent_dim=4)
    gen = torch.Generator().manual_seed(2)
    x, y = torch.rand(8, 3, 16, 16, generator=gen), torch.randint(0, 3, (8,), generator=gen)
    noise = torch.randn(8, 4, generator=gen)
    loss = SampleLoss(vae, beta=1.0)
    hooks = PerExampleGradients(loss, "hooks")
    reference = hooks.clipped_sum(x, y, noise, clip_norm=math.inf)
    hooks.close()
    clip = float(reference.norms.median())  # about half the records clipped
    added, factor, norms = record_additions(
        loss, (x, y, noise), clip, bk.Route.AUTO, at_c=False, precision=precision
    )
    assert bool((added <= clip).all()) and bool((factor < 1).any())
    torch.testing.assert_close(norms, reference.norms, rtol=rtol, atol=0)
    if precision == "float32":  # an upper bound of the norm (up to the reference's rounding)
        assert bool((norms >= reference.norms * (1 - 1e-6)).all())


def test_float32_is_the_default_and_bf16_only_with_book_keeping():
    assert dp_precision("bf16", GradSampleMode.BK) is Precision.BF16
    assert dp_precision("bf16", GradSampleMode.EW) is Precision.FLOAT32
    assert dp_precision("fp16", GradSampleMode.BK) is Precision.FLOAT32
    assert dp_precision("float32", GradSampleMode.BK) is Precision.FLOAT32
    model = Adversary()
    inputs = [t.float() for t in adversarial_batch(1.0)]
    before = bk.BookKeepingGradients(model).clipped_sum(*inputs, clip_norm=1.0)
    same = bk.BookKeepingGradients(model, precision="float32").clipped_sum(*inputs, clip_norm=1.0)
    assert all(torch.equal(a, b) for a, b in zip(before.grads, same.grads, strict=True))
    assert torch.equal(before.norms, same.norms)
    with pytest.raises(ValueError, match="bk grad-sample mode"):
        PerExampleGradients(model, "ew", precision="bf16")
    with pytest.raises(ValueError, match="not fp16"):
        bk.BookKeepingGradients(model, precision="fp16")


@pytest.mark.skipif(not native_bf16_cpu(), reason="bf16 DP-Adam runs where bf16 is native")
def test_train_dp_vae_records_the_precision_it_ran():
    from models.dp import DPSettings, train_dp_vae
    from models.training import VAETrainSettings

    gen = torch.Generator().manual_seed(0)
    data = (torch.rand(12, 1, 8, 8, generator=gen), torch.randint(0, 2, (12,), generator=gen))
    dp = DPSettings(noise_multiplier=1.0, clip_norm=1.0, noise_seed=0)
    runs = {}
    for precision in ("float32", "bf16"):
        torch.manual_seed(0)
        vae = ConditionalConvVAE(channels=1, height=8, width=8, num_classes=2, latent_dim=2)
        settings = VAETrainSettings(
            epochs=1, batch_size=4, lr=1e-3, beta=1.0, seed=0, precision=precision
        )
        runs[precision] = train_dp_vae(vae, data, data, settings, dp)
    assert runs["float32"].dp.precision == "float32" and runs["bf16"].dp.precision == "bf16"
    assert runs["float32"].train_loss != runs["bf16"].train_loss  # bf16 really ran
    assert math.isclose(runs["float32"].train_loss[0], runs["bf16"].train_loss[0], rel_tol=0.05)
