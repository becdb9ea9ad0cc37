"""Paper 003's multitask LSTM VAE: interface, loss, exact per-example gradients under Opacus,
its VAE-LDP variant and class-specific latent generation."""

from __future__ import annotations

import math

import pytest
import torch
from opacus import GradSampleModule
from torch import nn

from audit.pipeline import generate
from models.factory import Generation
from models.lstm_vae import PAPER_HIDDEN, LossWeights, LstmVAE
from models.perturbation import PerturbationLstmVAE
from models.training import vae_per_example_loss
from models.vae import ConditionalConvVAE, vae_loss_terms

T, F, CLASSES, LATENT = 7, 3, 2, 4


def tiny(seed: int = 0, **kw) -> LstmVAE:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LstmVAE(length=T, features=F, num_classes=CLASSES, latent_dim=LATENT, hidden=5, **kw)


def batch(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, T, F, generator=gen) * 2 - 1
    y = torch.arange(n) % CLASSES
    return x, y, torch.randn(n, LATENT, generator=gen)


def test_paper_architecture():
    model = LstmVAE(length=500, features=12, num_classes=6)
    assert model.encoder.hidden_size == PAPER_HIDDEN == 164
    assert model.decoder.hidden_size == 164 and model.output.hidden_size == 12
    assert model.latent_dim == 100 and model.record_shape == (500, 12)
    assert model.weights == LossWeights(kl=0.01, reconstruction=50.0, classifier=0.5)


def test_interface_shapes_and_range():
    model = tiny()
    x, y, noise = batch(5)
    mu, logvar = model.encode(x, y)
    assert mu.shape == logvar.shape == (5, LATENT)
    recon, mu2, logvar2, z = model(x, y, noise)
    assert recon.shape == x.shape and recon.is_contiguous()
    assert recon.abs().max() < 1  # an LSTM's output o * tanh(c)
    torch.testing.assert_close(z, mu2 + torch.exp(0.5 * logvar2) * noise)
    torch.testing.assert_close(model.decode(z, y), recon)
    torch.testing.assert_close(model.decode(z, 1 - y), recon)  # not conditional on y


def test_loss_is_the_weighted_multitask_sum():
    model = tiny()
    x, y, noise = batch(4)
    recon, mu, logvar, _ = model(x, y, noise)
    mse = ((recon - x) ** 2).mean(dim=(1, 2))
    kl = 0.5 * (mu**2 + logvar.exp() - 1 - logvar).sum(1)
    ce = nn.functional.cross_entropy(model.classify(mu), y, reduction="none")
    for beta in (1.0, 3.0):
        expected = 50 * mse + 0.01 * beta * kl + 0.5 * ce
        torch.testing.assert_close(model.per_example_loss(x, y, noise, beta=beta), expected)
        torch.testing.assert_close(vae_per_example_loss(model, x, y, noise, beta=beta), expected)


def test_conv_vae_loss_is_unchanged_by_the_dispatch():
    torch.manual_seed(0)
    model = ConditionalConvVAE(channels=1, height=8, width=8, num_classes=2, latent_dim=3)
    x, y, noise = torch.rand(3, 1, 8, 8), torch.tensor([0, 1, 0]), torch.randn(3, 3)
    recon, mu, logvar, _ = model(x, y, noise)
    rec, kl = vae_loss_terms(x, recon, mu, logvar)
    torch.testing.assert_close(vae_per_example_loss(model, x, y, noise, beta=2.0), rec + 2 * kl)


class _Loss(nn.Module):
    def __init__(self, vae: LstmVAE) -> None:
        super().__init__()
        self.vae = vae

    def forward(self, x, y, noise):
        return self.vae.per_example_loss(x, y, noise, beta=1.0)


def _naive_per_example(model: LstmVAE, x, y, noise) -> list[torch.Tensor]:
    """One backward pass per example: obviously correct, slow."""
    params = list(model.parameters())
    rows = [
        torch.autograd.grad(model.per_example_loss(x[i : i + 1], y[i : i + 1], noise[i : i + 1],
                                                   beta=1.0).sum(), params)
        for i in range(len(x))
    ]  # fmt: skip
    return [torch.stack([row[k] for row in rows]) for k in range(len(params))]


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
@pytest.mark.parametrize("functorch", [False, True])
@pytest.mark.parametrize("n", [1, 5])
def test_opacus_per_example_gradients_equal_a_naive_loop(functorch, n):
    model = tiny().double()
    x, y, noise = (t.double() if t.is_floating_point() else t for t in batch(n))
    expected = _naive_per_example(model, x, y, noise)
    gsm = GradSampleModule(_Loss(model), loss_reduction="sum", force_functorch=functorch)
    gsm(x, y, noise).sum().backward()
    got = [p.grad_sample for p in model.parameters()]
    assert len(got) == len(expected) == 18  # 3 DPLSTMs x 4, then mu, logvar, classifier x 2
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-10)
    gsm.cleanup()


def test_perturbation_lstm_vae_bounds_mean_and_floors_std():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = PerturbationLstmVAE(
            length=T, features=F, num_classes=CLASSES, latent_dim=LATENT, hidden=5, sigma=2.0
        )
    x, y, _ = batch(6)
    mu, std = model.encode_std(x * 1e6, y)
    assert mu.abs().max() <= 3 and std.min() >= 2.0
    out = model.perturb(x, y, generator=torch.Generator().manual_seed(0))
    assert out.shape == x.shape and out.abs().max() < 1
    again = model.perturb(x, y, generator=torch.Generator().manual_seed(0), batch_size=2)
    torch.testing.assert_close(out, again)
    with pytest.raises(ValueError, match=r"perturb expects x of shape \(B, 7, 3\)"):
        model.perturb(x[:, :4], y, generator=torch.Generator())


class _LatentProbe(nn.Module):
    """encode gives mu = x[:, 0, :1] (one latent), tiny std; decode returns z as the record."""

    latent_dim = 1

    def __init__(self) -> None:
        super().__init__()
        self.dummy = nn.Parameter(torch.zeros(()))

    def encode(self, x, y):
        return x[:, 0, :1], torch.full((len(x), 1), math.log(1e-6))

    def decode(self, z, y):
        return z[:, None, :]


def test_class_latent_generation_samples_each_class_from_its_records():
    source_x = torch.tensor([10.0, 11.0, 12.0, -10.0, -11.0]).reshape(5, 1, 1)
    source_y = torch.tensor([0, 0, 0, 1, 1])
    labels = torch.tensor([0, 1] * 50)
    gen_x, gen_y = generate(
        _LatentProbe(), labels, seed=0, method=Generation.CLASS_LATENT, source=(source_x, source_y)
    )
    values = gen_x.flatten()
    assert torch.equal(gen_y, labels)
    assert set(values[labels == 0].round().tolist()) == {10.0, 11.0, 12.0}
    assert set(values[labels == 1].round().tolist()) == {-10.0, -11.0}
    again, _ = generate(
        _LatentProbe(), labels, seed=0, method=Generation.CLASS_LATENT, source=(source_x, source_y)
    )
    torch.testing.assert_close(gen_x, again)
    with pytest.raises(ValueError, match=r"no training record of class\(es\) \[1\]"):
        generate(_LatentProbe(), labels, seed=0, method=Generation.CLASS_LATENT,
                 source=(source_x[:3], source_y[:3]))  # fmt: skip


def test_sizes_and_weights_are_validated():
    with pytest.raises(ValueError, match="sizes must be positive"):
        LstmVAE(length=0, features=3, num_classes=2)
    with pytest.raises(ValueError, match="loss weight kl must be a finite number >= 0"):
        LossWeights(kl=-1.0)
