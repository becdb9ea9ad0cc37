"""DP-Adam's per-example gradients in bf16 (models.dp.bk_bound): on inputs built to make
low-precision norms err, no record adds more than C to the clipped sum, recomputed in float64
from the float32 vectors the sum actually adds; a planted bug (norms from bf16 values while the
sum uses the float32 ones) fails the same check."""

from __future__ import annotations

import math

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


def record_additions(
    model, inputs, clip, route, *, at_c: bool = True, groups: torch.Tensor | None = None
) -> tuple[torch.Tensor, ...]:
    """(an upper bound on ||what each record adds to the clipped sum||: its float64
    recomputation plus that recomputation's own error bound; the clip factors; the engine's
    norms). The additions are recomputed from the float32 tensors the sum reads: the scaled Q
    and P of ghost layers (sum_r q_r p_r^T, products of float32 numbers exact in float64, sums
    of R terms within gamma64(R) S), c_i G_i of materialised ones (exact in float64); squares
    and the sum over m coordinates add a relative gamma64(m + 2)."""
    seen: list[tuple[bk_layers.LayerGrad, list[torch.Tensor]]] = []
    original = bk._layer_grad

    def spy(m, calls, *args, **kwargs):
        layer = original(m, calls, *args, **kwargs)
        factors: list[torch.Tensor] = []
        weighted = layer.weighted

        def record(factor):
            factors.append(factor)
            return weighted(factor)

        layer.weighted = record
        assert all(s.dtype == torch.bfloat16 for s in calls.outputs)  # the passes ran in bf16
        seen.append((layer, factors))
        return layer

    engine = bk.BookKeepingGradients(model, route=route, precision="bf16")
    bk._layer_grad = spy
    try:
        if at_c:  # records 12-15 scaled to a norm of C (1 + 1e-7 k) by the engine's own norms
            first = engine.clipped_sum(*inputs, clip_norm=math.inf).norms
            inputs = list(inputs)
            scale = clip * (1 + 1e-7 * torch.arange(-2, 2, dtype=torch.float64)) / first[12:]
            for k in (4, 5, 6, 7):  # the output gradients of records 12-15
                inputs[k] = inputs[k].clone()
                inputs[k][12:] *= scale.float().view(-1, *[1] * (inputs[k].dim() - 1))
            seen.clear()
        units = {} if groups is None else {"groups": groups, "num_groups": int(groups.max()) + 1}
        out = engine.clipped_sum(*inputs, clip_norm=clip, **units)
    finally:
        bk._layer_grad = original
        engine.close()
    factor32 = seen[0][1][0]
    factor = factor32.double()
    sq = torch.zeros(len(factor), dtype=torch.float64)
    product_error = torch.zeros_like(sq)
    coordinates = 0
    for layer, _ in seen:
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
    added = sq.sqrt() * (1 + gamma64(coordinates + 2)) + product_error
    return added, factor, out.norms


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


def test_float32_ghost_norms_trust_cancellation(adversary):
    """What docs/mechanisms.md says of the float32 path (unchanged by the bf16 one): its ghost
    norms are float32 differences, and on records built to cancel they err by more than the
    remainder, so such a record can add more than C (or a NaN)."""
    seen: list[tuple[bk_layers.LayerGrad, list[torch.Tensor]]] = []
    original = bk._layer_grad

    def spy(m, calls, *args, **kwargs):
        layer = original(m, calls, *args, **kwargs)
        factors: list[torch.Tensor] = []
        weighted = layer.weighted
        layer.weighted = lambda f: factors.append(f) or weighted(f)
        seen.append((layer, factors))
        return layer

    inputs = [t.float() for t in adversarial_batch(3.0)]
    bk._layer_grad = spy
    try:
        bk.BookKeepingGradients(adversary, route="ghost").clipped_sum(*inputs, clip_norm=3.0)
    finally:
        bk._layer_grad = original
    factor32 = seen[0][1][0]
    sq = torch.zeros(len(factor32), dtype=torch.float64)
    for layer, _ in seen:
        q = (layer.q * factor32[:, None, None]).double()
        sq += (q.transpose(1, 2) @ layer.p.double()).pow(2).sum((1, 2))
        if layer.bias is not None:
            sq += (factor32.double()[:, None] * layer.bias.double()).pow(2).sum(1)
    added = sq.sqrt() / 3.0
    assert float(added[:4].nan_to_num(nan=math.inf).max()) > 1.5  # past C on cancellation
    assert float(added[4:].max()) < 1 + 1e-4  # at C elsewhere


def test_the_conv_vae_in_bf16_adds_at_most_c_per_record():
    torch.manual_seed(0)
    vae = ConditionalConvVAE(channels=3, height=16, width=16, num_classes=3, latent_dim=4)
    gen = torch.Generator().manual_seed(2)
    x, y = torch.rand(8, 3, 16, 16, generator=gen), torch.randint(0, 3, (8,), generator=gen)
    noise = torch.randn(8, 4, generator=gen)
    loss = SampleLoss(vae, beta=1.0)
    reference = PerExampleGradients(loss).clipped_sum(x, y, noise, clip_norm=math.inf)
    clip = float(reference.norms.median())  # about half the records clipped
    added, factor, norms = record_additions(loss, (x, y, noise), clip, bk.Route.AUTO, at_c=False)
    assert bool((added <= clip).all()) and bool((factor < 1).any())
    # the bounds sit just above the float32 norms: bf16's error plus the certified margin
    torch.testing.assert_close(norms, reference.norms, rtol=0.05, atol=0)
    assert bool((norms >= reference.norms * (1 - 0.05)).all())


def test_float32_computes_as_before_and_bf16_only_with_book_keeping():
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
