"""Book-keeping clipping (models.dp.book_keeping) against per-record loops, on both routes."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from models.dp import CLIP_EPS, PerExampleGradients, SampleLoss
from models.dp.bk_bound import U64
from models.dp.book_keeping import BookKeepingGradients, Route, unsupported_parameters
from models.lstm_vae import LstmVAE
from models.vae import ConditionalConvVAE


class Toy(nn.Module):
    """Every case the engine handles: strided, dilated and unpadded convs, a bias-free conv, a
    Linear on (n, T, d) inputs, and a Linear called twice (its calls stack as positions)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_a = nn.Conv2d(2, 3, 3, stride=2, padding=1)
        self.conv_b = nn.Conv2d(3, 5, 2, dilation=2, padding=(1, 0), bias=False)
        self.seq = nn.Linear(3, 4)
        self.shared = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.conv_b(torch.tanh(self.conv_a(x))))  # (n, 5, H', W')
        s = torch.tanh(self.seq(h.flatten(2)[:, :3].transpose(1, 2)))  # (n, T, 4)
        s = self.shared(torch.tanh(self.shared(s)))
        return self.head(s).squeeze(-1).pow(2).sum(1)  # one loss per record


def toy_batch(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, 2, 9, 7, generator=torch.Generator().manual_seed(seed)).double()


def loop_grads(module: nn.Module, *inputs: torch.Tensor) -> list[torch.Tensor]:
    """(n, *p.shape) per parameter: one backward pass per record."""
    params = [p for p in module.parameters() if p.requires_grad]
    rows = []
    for i in range(len(inputs[0])):
        one = [t[i : i + 1] for t in inputs]
        rows.append(torch.autograd.grad(module(*one).sum(), params, allow_unused=True))
    return [
        torch.stack([r[k] if r[k] is not None else torch.zeros_like(p) for r in rows])
        for k, p in enumerate(params)
    ]


def clipped(
    grads: list[torch.Tensor], clip: float, bounds: torch.Tensor | None = None
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """(the clipped sum, the norms) of per-unit gradients (float64): clip factors from the
    norms, or as the engine takes them from its certified bounds B where given,
    min(1, C (1 - 4u) / (B + 1e-6)) with u = 2^-53."""
    n = grads[0].shape[0]
    norms = torch.cat([g.reshape(n, -1) for g in grads], 1).pow(2).sum(1).sqrt()
    if bounds is None:
        factor = (clip / (norms + CLIP_EPS)).clamp(max=1.0)
    else:
        factor = (clip * (1 - 4 * U64) / (bounds + CLIP_EPS)).clamp(max=1.0)
    return [torch.einsum("i,i...->...", factor, g) for g in grads], norms


@pytest.mark.parametrize("route", list(Route))
@pytest.mark.parametrize("n", [1, 6])
def test_toy_clipped_sum_matches_the_loop_on_every_route(route, n):
    torch.manual_seed(0)
    toy = Toy().double()
    x = toy_batch(n)
    grads = loop_grads(toy, x)
    clip = float(clipped(grads, math.inf)[1].median())  # about half the records clipped
    expected, norms = clipped(grads, clip)
    engine = BookKeepingGradients(toy, route=route)
    got = engine.clipped_sum(x, clip_norm=clip)
    engine.close()
    torch.testing.assert_close(got.norms, norms, rtol=1e-10, atol=1e-12)
    for g, e in zip(got.grads, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(got.values, toy(x).detach())


def test_routes_are_really_different_and_auto_picks_per_layer():
    """The forced routes build different per-layer objects; AUTO mixes them on the 64x64 VAE:
    ghost norms for the linear layers and some convs, materialised gradients for others."""
    from models.dp import book_keeping as bk_clipping

    vae = ConditionalConvVAE(channels=3, height=64, width=64, num_classes=2, latent_dim=8)
    x, y, noise = torch.rand(2, 3, 64, 64), torch.tensor([0, 1]), torch.randn(2, 8)
    seen: list[tuple[str, str]] = []
    original = bk_clipping._layer_grad

    def spy(m, *args, **kwargs):
        out = original(m, *args, **kwargs)
        seen.append((type(m).__name__, type(out).__name__))
        return out

    bk_clipping._layer_grad = spy
    try:
        BookKeepingGradients(SampleLoss(vae, beta=1.0)).clipped_sum(x, y, noise, clip_norm=1.0)
    finally:
        bk_clipping._layer_grad = original
    expected = {("Conv2d", "GhostLayer"), ("Conv2d", "MaterialisedLayer"), ("Linear", "GhostLayer")}
    assert expected <= set(seen)


@pytest.mark.parametrize("route", [Route.AUTO, Route.GHOST])
def test_grouped_clipping_matches_summed_group_gradients(route):
    torch.manual_seed(1)
    toy = Toy().double()
    x = toy_batch(7, seed=2)
    groups = torch.tensor([0, 2, 2, 0, 1, 2, 0])
    per_record = loop_grads(toy, x)
    units = [torch.stack([g[groups == j].sum(0) for j in range(4)]) for g in per_record]
    expected, norms = clipped(units, 0.7)
    got = BookKeepingGradients(toy, route=route).clipped_sum(
        x, clip_norm=0.7, groups=groups, num_groups=4
    )
    assert got.norms.shape == (4,) and float(got.norms[3]) == 0.0  # an empty group
    torch.testing.assert_close(got.norms, norms, rtol=1e-10, atol=1e-12)
    for g, e in zip(got.grads, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-12)


def test_lstm_vae_clipped_sum_matches_the_loop():
    """Opacus's DPLSTM cells are Linear layers called once per step: T positions per layer."""
    torch.manual_seed(0)
    vae = LstmVAE(length=12, features=3, num_classes=2, latent_dim=4, hidden=6).double()
    gen = torch.Generator().manual_seed(3)
    x = torch.rand(5, 12, 3, generator=gen, dtype=torch.float64) * 2 - 1
    y = torch.tensor([0, 1, 1, 0, 1])
    noise = torch.randn(5, 4, generator=gen, dtype=torch.float64)
    loss = SampleLoss(vae, beta=1.0)
    expected, norms = clipped(loop_grads(loss, x, y, noise), 0.5)
    engine = PerExampleGradients(loss, "bk")
    got = engine.clipped_sum(x, y, noise, clip_norm=0.5)
    engine.close()
    torch.testing.assert_close(got.norms, norms, rtol=1e-9, atol=1e-12)
    for g, e in zip(got.grads, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-9, atol=1e-12)


def test_subset_of_parameters_and_empty_batch():
    torch.manual_seed(0)
    toy = Toy().double()
    params = list(toy.shared.parameters()) + list(toy.conv_a.parameters())  # in the given order
    x = toy_batch(4)
    full = loop_grads(toy, x)
    names = [name for name, _ in toy.named_parameters()]
    keep = [
        names.index(k) for k in ("shared.weight", "shared.bias", "conv_a.weight", "conv_a.bias")
    ]
    expected, _ = clipped([full[k] for k in keep], 0.3)
    got = BookKeepingGradients(toy, params=params).clipped_sum(x, clip_norm=0.3)
    for g, e in zip(got.grads, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-12)
    empty = BookKeepingGradients(toy).clipped_sum(x[:0], clip_norm=1.0)
    assert empty.norms.shape == (0,) and all(float(g.abs().sum()) == 0 for g in empty.grads)


@pytest.mark.parametrize(
    "layer",
    [nn.LSTM(3, 4), nn.ConvTranspose2d(2, 2, 3), nn.Conv2d(2, 4, 3, groups=2), nn.Conv1d(2, 2, 3)],
)
def test_unsupported_layers_are_refused_by_name(layer):
    model = nn.Sequential(nn.Linear(2, 2), layer)
    assert unsupported_parameters(model, list(model.parameters()))
    with pytest.raises(ValueError, match="unsupported parameters: 1\\."):
        BookKeepingGradients(model)


class UpToy(nn.Module):
    """Convs reading nearest 2x upsamples (kernel 3 pad 1 as in the VAE's decoder, kernel 4
    with uneven padding, a bias-free one), and one whose upsampled input is changed in place
    first (it must not take the upsample route)."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.conv_a = nn.Conv2d(2, 3, 3, padding=1)
        self.conv_b = nn.Conv2d(3, 2, 4, padding=(2, 1), bias=False)
        self.conv_c = nn.Conv2d(2, 2, 3, padding=1)
        self.head = nn.Linear(2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.conv_a(self.up(x)))
        h = torch.tanh(self.conv_b(self.up(h)))
        changed = self.up(h)
        h = torch.tanh(self.conv_c(changed.mul_(1.5)))
        return self.head(h.flatten(2).transpose(1, 2)).squeeze(-1).pow(2).sum(1)


@pytest.mark.parametrize("route", list(Route))
@pytest.mark.parametrize("channels_last", [False, True])
def test_upsampled_convs_match_the_loop(route, channels_last):
    from models.dp import book_keeping as bk_clipping

    torch.manual_seed(0)
    toy = UpToy().double()
    x = torch.randn(5, 2, 3, 4, generator=torch.Generator().manual_seed(4)).double()
    if channels_last:
        toy = toy.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    grads = loop_grads(toy, x)
    clip = float(clipped(grads, math.inf)[1].median())
    expected, norms = clipped(grads, clip)
    halves: dict[str, bool] = {}
    names = {m: name for name, m in toy.named_modules()}
    original = bk_clipping._layer_grad

    def spy(m, calls, *args, **kwargs):
        halves[names[m]] = calls.halves[0] is not None
        return original(m, calls, *args, **kwargs)

    bk_clipping._layer_grad = spy
    try:
        got = BookKeepingGradients(toy, route=route).clipped_sum(x, clip_norm=clip)
    finally:
        bk_clipping._layer_grad = original
    assert halves == {"conv_a": True, "conv_b": True, "conv_c": False, "head": False}
    # the certified bounds (models.dp.bk_bound) sit above the norms by the ghost route's error
    # term, about gamma64(X + Y + R^2 + 4) kappa / 2 relative (R up to 192, kappa = S^2 / N^2
    # about R: 5.5e-11 measured), so the sum is compared given the engine's factors
    assert bool((got.norms >= norms).all())
    torch.testing.assert_close(got.norms, norms, rtol=1e-8, atol=0)
    expected, _ = clipped(grads, clip, got.norms)
    for g, e in zip(got.grads, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_per_record_loop_matches_im2col(dtype):
    """The CPU's per-record convolutions give the batched product's per-record gradients, on a
    strided, a dilated and an uneven-padded conv, channels-last inputs included."""
    from models.dp.bk_conv import per_record_loop, rows, unfolded

    gen = torch.Generator().manual_seed(5)
    for conv in (
        nn.Conv2d(3, 4, 4, stride=2, padding=1),
        nn.Conv2d(3, 2, 3, dilation=2, padding=(2, 1)),
    ):
        conv = conv.to(dtype)
        a = torch.randn(3, 3, 9, 8, generator=gen, dtype=dtype)
        for layout in (torch.contiguous_format, torch.channels_last):
            a = a.contiguous(memory_format=layout)
            g = torch.randn_like(conv(a)).contiguous(memory_format=layout)
            expected = rows(g).transpose(1, 2) @ unfolded(conv, a)
            tol = {"rtol": 1e-12, "atol": 1e-12} if dtype == torch.float64 else {}
            torch.testing.assert_close(per_record_loop(conv, a, g), expected, **tol)
