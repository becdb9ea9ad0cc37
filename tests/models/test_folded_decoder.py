"""The conv VAE's evaluation-mode decoder (each nearest upsample and 3x3 conv folded into one
transposed convolution, ``models.vae.folded_decoder``) computes the training-mode modules'
function."""

from __future__ import annotations

import pytest
import torch

from models.vae import ConditionalConvVAE, folded_upsample_conv


def _vae(height: int, width: int, channels: int = 3) -> ConditionalConvVAE:
    torch.manual_seed(0)
    return ConditionalConvVAE(
        channels=channels, height=height, width=width, num_classes=5, latent_dim=6
    ).double()


@pytest.mark.parametrize(("height", "width"), [(8, 8), (28, 28), (64, 64), (62, 47)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_evaluation_mode_decodes_as_the_modules(height, width, channels_last):
    vae = _vae(height, width)
    if channels_last:
        vae = vae.to(memory_format=torch.channels_last)
    z = torch.randn(7, 6, dtype=torch.float64)
    y = torch.arange(7) % 5
    with torch.no_grad():
        modules = vae.train().decode(z, y)
        folded = vae.eval().decode(z, y)
    assert folded.shape == modules.shape == (7, 3, height, width)
    # float64: the two orders of summation agree to a few units of 1e-16 on values in (0, 1)
    assert (folded - modules).abs().max().item() < 1e-13


def test_the_gradient_in_the_latents_is_the_modules():
    vae = _vae(32, 32)
    z = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    y = torch.arange(4)
    grads = []
    for training in (True, False):
        vae.train(training)
        (g,) = torch.autograd.grad(vae.decode(z, y).square().sum(), z)
        grads.append(g)
    assert (grads[0] - grads[1]).abs().max().item() < 1e-11 * grads[0].abs().max().item()


def test_a_wrong_fold_is_caught():
    """The check above can fail: the taps folded the other way round (a flipped kernel, the
    correlation/convolution mix-up) give a different function."""
    vae = _vae(16, 16)
    conv = vae.decoder[1]
    h = torch.randn(3, vae.top_channels, 4, 4, dtype=torch.float64)
    up = torch.nn.functional.interpolate(h, scale_factor=2, mode="nearest")
    expected = conv(up)
    kernel = folded_upsample_conv(conv.weight)
    right = torch.nn.functional.conv_transpose2d(h, kernel, conv.bias, stride=2, padding=1)
    wrong = torch.nn.functional.conv_transpose2d(
        h, kernel.flip(2, 3), conv.bias, stride=2, padding=1
    )
    assert (right - expected).abs().max().item() < 1e-13
    assert (wrong - expected).abs().max().item() > 1e-3


def test_training_mode_calls_the_decoder_modules():
    """DP-Adam's engines read the conv modules' hooks: in training mode the decoder's convs run."""
    vae = _vae(16, 16).train()
    seen = []
    for layer in vae.decoder:
        if isinstance(layer, torch.nn.Conv2d):
            layer.register_forward_hook(lambda m, i, o: seen.append(m))
    vae.decode(torch.randn(2, 6, dtype=torch.float64), torch.tensor([0, 1]))
    assert len(seen) == 2
    seen.clear()
    vae.eval().decode(torch.randn(2, 6, dtype=torch.float64), torch.tensor([0, 1]))
    assert seen == []


def _conv_calls(vae: ConditionalConvVAE) -> list:
    """The decoder convs' forward calls, as a list the hooks append to."""
    seen: list = []
    for layer in vae.decoder:
        if isinstance(layer, torch.nn.Conv2d):
            layer.register_forward_hook(lambda m, i, o: seen.append(m))
    return seen


def test_folded_training_gives_the_modules_gradients_and_ends_with_the_block():
    """Non-private training's gradients in the 3x3 weights, through the fold, are the modules';
    a copy made inside the block, and the model after it, decode by the modules."""
    import copy

    from models.vae import folded_training

    vae = _vae(32, 32).train()
    z = torch.randn(4, 6, dtype=torch.float64)
    y = torch.arange(4)
    grads = []
    for fold in (False, True):
        vae.zero_grad()
        if fold:
            with folded_training(vae):
                twin = copy.deepcopy(vae)
                seen = _conv_calls(vae)
                vae.decode(z, y).square().sum().backward()
                assert seen == []
        else:
            vae.decode(z, y).square().sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in vae.decoder.parameters()]))
    assert (grads[0] - grads[1]).abs().max().item() < 1e-11 * grads[0].abs().max().item()
    for model in (vae, twin):
        seen = _conv_calls(model)
        model.decode(z, y)
        assert len(seen) == vae.depth == 3


def test_a_recorder_sees_each_folded_conv_with_its_upsample_input_within_its_block():
    from models.vae import folded_training

    vae = _vae(16, 16).train()
    calls, outer = [], []
    z = torch.randn(2, 6, dtype=torch.float64)
    with folded_training(vae, lambda conv, h, out: outer.append(conv)):
        with folded_training(vae, lambda conv, h, out: calls.append((conv, h, out))):
            out = vae.decode(z, torch.tensor([0, 1]))
        vae.decode(z, torch.tensor([0, 1]))
    convs = [m for m in vae.decoder if isinstance(m, torch.nn.Conv2d)]
    assert [c for c, _, _ in calls] == convs and outer == convs + convs
    for conv, h, s in calls:
        up = torch.nn.functional.interpolate(h, scale_factor=2, mode="nearest")
        assert (conv(up) - s).abs().max().item() < 1e-13 and s.requires_grad
    assert out.requires_grad
    calls.clear()
    seen = _conv_calls(vae)
    vae.decode(z, torch.tensor([0, 1]))
    assert calls == [] and len(seen) == 2
