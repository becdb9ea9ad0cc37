"""The MLP VAE for 2-D points (PriVAE's pinwheel model): interface, loss, per-example gradients."""

from __future__ import annotations

import pytest
import torch

from models.dp import GradSampleMode, PerExampleGradients, SampleLoss
from models.dp.termwise_loop import encoder_parameters
from models.mlp_vae import MIN_DECODER_STD, MlpVAE
from models.priors import GaussianMixturePrior
from models.training import OwnObjective, vae_per_example_loss


def make(seed: int = 0, **kwargs) -> MlpVAE:
    torch.manual_seed(seed)
    return MlpVAE(**kwargs).double()


def batch(n: int = 5, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = 5 * torch.randn(n, 2, generator=gen, dtype=torch.float64)
    y = torch.randint(4, (n,), generator=gen)
    noise = torch.randn(n, 2, generator=gen, dtype=torch.float64)
    return x, y, noise


def test_interface_shapes():
    model = make()
    x, y, noise = batch()
    mu, logvar = model.encode(x, y)
    assert mu.shape == logvar.shape == (5, 2)
    assert model.decode(mu, y).shape == (5, 2)
    recon, mu2, logvar2, z = model(x, y, noise)
    assert recon.shape == z.shape == (5, 2)
    torch.testing.assert_close(z, mu2 + torch.exp(0.5 * logvar2) * noise)
    assert model.latent_dim == 2 and model.num_classes == 4 and model.record_shape == (2,)
    assert isinstance(model, OwnObjective)
    assert model.per_example_loss(x, y, noise, beta=1.0).shape == (5,)


def test_labels_are_ignored_unless_conditional():
    x, y, noise = batch()
    plain = make()
    torch.testing.assert_close(plain(x, y, noise)[0], plain(x, (y + 1) % 4, noise)[0])
    cond = make(conditional=True)
    assert not torch.allclose(cond(x, y, noise)[0], cond(x, (y + 1) % 4, noise)[0])


def test_loss_is_gaussian_nll_plus_beta_kl():
    model = make()
    x, y, noise = batch()
    mu, logvar = model.encode(x, y)
    z = mu + torch.exp(0.5 * logvar) * noise
    mean, std = model.decode_distribution(z, y)
    assert (std >= MIN_DECODER_STD).all()
    rec = -torch.distributions.Normal(mean, std).log_prob(x).sum(1)
    kl = 0.5 * (mu.pow(2) + logvar.exp() - 1 - logvar).sum(1)
    torch.testing.assert_close(model.per_example_loss(x, y, noise, beta=0.0), rec)
    torch.testing.assert_close(model.per_example_loss(x, y, noise, beta=2.0), rec + 2 * kl)
    torch.testing.assert_close(vae_per_example_loss(model, x, y, noise, beta=2.0), rec + 2 * kl)


def test_mixture_prior_uses_the_monte_carlo_kl_and_l_samples_average():
    prior = GaussianMixturePrior()
    model = make(prior=prior)
    x, y, _ = batch()
    noise = torch.randn(5, 3, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    many = model.per_example_loss(x, y, noise, beta=1.0)
    singles = torch.stack([model.per_example_loss(x, y, noise[:, i], beta=1.0) for i in range(3)])
    torch.testing.assert_close(many, singles.mean(0))
    torch.testing.assert_close(
        model.per_example_loss(x, y, noise[:, :1], beta=1.0),
        model.per_example_loss(x, y, noise[:, 0], beta=1.0),
    )
    assert torch.isfinite(many).all()


def test_loss_of_a_record_does_not_depend_on_the_others():
    model = make(prior=GaussianMixturePrior())
    x, y, noise = batch(6)
    whole = model.per_example_loss(x, y, noise, beta=1.0)
    alone = torch.cat(
        [
            model.per_example_loss(x[i : i + 1], y[i : i + 1], noise[i : i + 1], beta=1.0)
            for i in range(6)
        ]
    )
    torch.testing.assert_close(whole, alone)


def naive_per_example_grads(model: MlpVAE, x, y, noise, beta: float) -> list[torch.Tensor]:
    params = [p for p in model.parameters() if p.requires_grad]
    rows = []
    for i in range(len(x)):
        loss = model.per_example_loss(x[i : i + 1], y[i : i + 1], noise[i : i + 1], beta=beta)
        rows.append(torch.autograd.grad(loss.sum(), params))
    return [torch.stack(g) for g in zip(*rows, strict=True)]


@pytest.mark.parametrize("mode", [GradSampleMode.HOOKS, GradSampleMode.FUNCTORCH])
def test_opacus_per_example_gradients_match_a_loop(mode):
    model = make(prior=GaussianMixturePrior())
    x, y, noise = batch(4)
    engine = PerExampleGradients(SampleLoss(model, beta=1.0), mode)
    try:
        grads, values = engine.gradients(x, y, noise)
    finally:
        engine.close()
    want = naive_per_example_grads(model, x, y, noise, 1.0)
    for g, w in zip(grads, want, strict=True):
        torch.testing.assert_close(g, w)
    torch.testing.assert_close(values, model.per_example_loss(x, y, noise, beta=1.0).detach())


def test_book_keeping_clipped_sum_matches_a_loop():
    model = make(prior=GaussianMixturePrior())
    x, y, noise = batch(4)
    clip = 0.05
    engine = PerExampleGradients(SampleLoss(model, beta=1.0), GradSampleMode.BK)
    try:
        out = engine.clipped_sum(x, y, noise, clip_norm=clip)
    finally:
        engine.close()
    want = naive_per_example_grads(model, x, y, noise, 1.0)
    norms = torch.sqrt(sum(w.flatten(1).pow(2).sum(1) for w in want))
    factor = (clip / (norms + 1e-6)).clamp(max=1.0)
    torch.testing.assert_close(out.norms, norms)
    for g, w in zip(out.grads, want, strict=True):
        torch.testing.assert_close(g, (factor.view(-1, *[1] * (w.ndim - 1)) * w).sum(0))


def test_termwise_reads_the_encoder_layers():
    model = make()
    names = {id(p) for p in encoder_parameters(model)}
    decoder = list(model.decoder.parameters()) + list(model.fc_out_mean.parameters())
    assert all(id(p) not in names for p in decoder)
    assert len(names) == 6  # encoder Linear, fc_mu, fc_logvar: weight and bias each


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        MlpVAE(latent_dim=0)
    with pytest.raises(ValueError, match="latent_dim"):
        MlpVAE(latent_dim=3, prior=GaussianMixturePrior())
