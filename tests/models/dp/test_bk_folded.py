"""Book-keeping clipping of the conv VAE whose decoder folds each upsample and conv during the
forward pass (``models.vae.folded_training``): the clipped sum is the per-record loop's, the
decoder's convs are factored from the upsample's input, and no record adds more than C."""

from __future__ import annotations

import math

import pytest
import torch

from models.dp import SampleLoss
from models.dp import book_keeping as bk
from models.dp.book_keeping import BookKeepingGradients, Route
from tests.models.dp.test_book_keeping import clipped, loop_grads


def _vae_batch(n: int = 5):
    from models.vae import ConditionalConvVAE

    torch.manual_seed(0)
    vae = ConditionalConvVAE(channels=3, height=16, width=16, num_classes=4, latent_dim=5)
    vae = vae.double().train()
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(n, 3, 16, 16, generator=gen).double()
    y = torch.arange(n) % 4
    noise = torch.randn(n, 5, generator=gen).double()
    return SampleLoss(vae, beta=1.0), (x, y, noise)


def _run(loss, inputs, clip, route, *, fold: bool):
    """(clipped sum, which decoder convs were read through the upsample's input, how many
    decoder conv modules ran)."""
    engine = BookKeepingGradients(loss, route=route)
    if not fold:
        engine._folding = []
    halves: dict[str, bool] = {}
    names = {m: name for name, m in loss.named_modules()}
    original = bk._layer_grad
    ran: list = []
    hooks = [
        m.register_forward_hook(lambda m, i, o: ran.append(m))
        for m in loss.vae.decoder
        if isinstance(m, torch.nn.Conv2d)
    ]

    def spy(m, calls, *args, **kwargs):
        halves[names[m]] = all(h is not None for h in calls.halves)
        return original(m, calls, *args, **kwargs)

    bk._layer_grad = spy
    try:
        got = engine.clipped_sum(*inputs, clip_norm=clip)
    finally:
        bk._layer_grad = original
        for h in hooks:
            h.remove()
        engine.close()
    decoder = {k: v for k, v in halves.items() if k.startswith("vae.decoder")}
    return got, decoder, len(ran)


@pytest.mark.parametrize("route", list(Route))
def test_the_folded_forward_clips_as_the_per_record_loop(route):
    loss, inputs = _vae_batch()
    grads = loop_grads(loss, *inputs)
    clip = float(clipped(grads, math.inf)[1].median())  # about half the records clipped
    got, decoder, ran = _run(loss, inputs, clip, route, fold=True)
    assert ran == 0  # the decoder's conv modules never ran: the fold did
    assert decoder == {"vae.decoder.1": True, "vae.decoder.4": True}
    _, norms = clipped(grads, clip)
    assert bool((got.norms >= norms).all())
    torch.testing.assert_close(got.norms, norms, rtol=1e-8, atol=0)
    expected, _ = clipped(grads, clip, got.norms)
    for g, e in zip(got.grads, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-12)
    # and the same as the modules' forward (hooks on the upsample and the conv)
    plain, plain_decoder, plain_ran = _run(loss, inputs, clip, route, fold=False)
    assert plain_ran == 2 and plain_decoder == decoder
    for g, e in zip(got.grads, plain.grads, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-12)


def test_no_record_adds_more_than_c_in_bf16():
    """bf16 passes (the cell's default on a CPU with native bf16): each record's clipped
    gradient, recomputed in float64 from the factors the engine summed, is at most C."""
    loss, inputs = _vae_batch(6)
    loss = loss.float()
    inputs = (inputs[0].float(), inputs[1], inputs[2].float())
    clip = 1.0
    sums = []
    for i in range(6):
        one = tuple(t[i : i + 1] for t in inputs)
        engine = BookKeepingGradients(loss, precision="bf16")
        got = engine.clipped_sum(*one, clip_norm=clip)
        engine.close()
        sums.append(math.sqrt(sum(float(g.double().pow(2).sum()) for g in got.grads)))
    assert max(sums) <= clip
    assert min(sums) > 0.9 * clip  # every record was clipped, so the check could fail
