"""The trade-off paper's multitask LSTM VAE: interface, loss, exact per-example gradients under
Opacus, the fused nn.LSTM implementation of the same function, its VAE-LDP variant and
class-specific latent generation."""

from __future__ import annotations

import math

import pytest
import torch
from opacus import GradSampleModule
from opacus.layers import DPLSTM
from torch import nn

from models.factory import SeriesModels
from models.generation import Generation, generate
from models.lstm_vae import (
    LSTM_HIDDEN,
    LossWeights,
    LstmVAE,
    fuse_lstms,
    without_dp_lstm_aliases,
)
from models.perturbation import PerturbationLstmVAE
from models.training import VAETrainSettings, train_vae, vae_per_example_loss
from models.vae import ConditionalConvVAE, vae_loss_terms

T, F, CLASSES, LATENT = 7, 3, 2, 4


def has_dp_lstm(module: nn.Module) -> bool:
    """Whether ``module`` holds an Opacus ``DPLSTM`` (not yet fused)."""
    return any(isinstance(m, DPLSTM) for m in module.modules())


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
    assert model.encoder.hidden_size == LSTM_HIDDEN == 164
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
            length=T,
            features=F,
            num_classes=CLASSES,
            latent_dim=LATENT,
            hidden=5,
            sigma=2.0,
            mean_bound=3.0,
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


def test_fused_lstms_compute_the_same_function_from_the_same_draws():
    """per_example_gradients=False: nn.LSTM instead of DPLSTM, same initial weights, same
    outputs, loss and gradients (rtol 1e-5), and the same global random state afterwards."""
    torch.manual_seed(3)
    dp = LstmVAE(length=T, features=F, num_classes=CLASSES, latent_dim=LATENT, hidden=5)
    after_dp = torch.rand(1)
    torch.manual_seed(3)
    fused = LstmVAE(length=T, features=F, num_classes=CLASSES, latent_dim=LATENT, hidden=5,
                    per_example_gradients=False)  # fmt: skip
    assert torch.equal(torch.rand(1), after_dp)
    assert all(isinstance(m, nn.LSTM) for m in (fused.encoder, fused.decoder, fused.output))
    assert isinstance(dp.encoder, DPLSTM) and not has_dp_lstm(fused)
    dp_state = without_dp_lstm_aliases(dp.state_dict())  # DPLSTM also lists l0.ih.weight, ...
    assert dp_state.keys() == fused.state_dict().keys() < dp.state_dict().keys()
    for key, value in fused.state_dict().items():
        assert torch.equal(value, dp_state[key]), key
    x, y, noise = batch(6)
    for a, b in zip(dp(x, y, noise), fused(x, y, noise), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    loss_dp = dp.per_example_loss(x, y, noise, beta=1.0)
    loss_fused = fused.per_example_loss(x, y, noise, beta=1.0)
    torch.testing.assert_close(loss_fused, loss_dp, rtol=1e-5, atol=1e-6)
    grads_dp, grads_fused = _named_grads(dp, loss_dp), _named_grads(fused, loss_fused)
    assert grads_dp.keys() == grads_fused.keys() == fused.state_dict().keys()
    for name, grad in grads_dp.items():
        torch.testing.assert_close(grads_fused[name], grad, rtol=1e-5, atol=1e-6)


def _named_grads(model: nn.Module, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    """Gradients of ``loss.sum()`` by parameter name (DPLSTM's carry nn.LSTM's names)."""
    params = dict(model.named_parameters())
    grads = torch.autograd.grad(loss.sum(), list(params.values()))
    return dict(zip(params, grads, strict=True))


def test_fuse_lstms_in_place_keeps_weights_mode_and_random_state():
    model = tiny().train()
    x, y, noise = batch(4)
    before = model(x, y, noise)[0].detach()
    state = {k: v.clone() for k, v in without_dp_lstm_aliases(model.state_dict()).items()}
    torch.manual_seed(11)
    assert fuse_lstms(model) is model
    drawn = torch.rand(1)
    torch.manual_seed(11)
    assert torch.equal(drawn, torch.rand(1))  # fusing drew nothing from the global generator
    assert not has_dp_lstm(model) and model.encoder.training
    assert model.state_dict().keys() == state.keys()
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key
    torch.testing.assert_close(model(x, y, noise)[0], before, rtol=1e-5, atol=1e-6)
    conv = ConditionalConvVAE(channels=1, height=8, width=8, num_classes=2, latent_dim=3)
    keys = conv.state_dict().keys()
    assert fuse_lstms(conv) is conv and conv.state_dict().keys() == keys  # nothing to fuse


def test_training_fused_follows_the_dp_lstm_trajectory():
    """Non-private training on the fused model ends where training on the DPLSTM model does."""
    x, y, _ = batch(12)
    settings = VAETrainSettings(epochs=3, batch_size=4, lr=1e-2, beta=1.0, seed=0)
    ends = []
    for per_example in (True, False):
        torch.manual_seed(5)
        model = LstmVAE(length=T, features=F, num_classes=CLASSES, latent_dim=LATENT, hidden=5,
                        per_example_gradients=per_example)  # fmt: skip
        history = train_vae(model, (x, y), (x[:4], y[:4]), settings)
        ends.append((model.state_dict(), history.train_loss))
    (dp_state, dp_loss), (fused_state, fused_loss) = ends
    torch.testing.assert_close(fused_loss, dp_loss, rtol=1e-5, atol=1e-6)
    for key, value in without_dp_lstm_aliases(dp_state).items():
        torch.testing.assert_close(fused_state[key], value, rtol=1e-4, atol=1e-5)


def test_saved_states_of_either_implementation_load_into_the_fused_model():
    dp = tiny()
    fused = LstmVAE(length=T, features=F, num_classes=CLASSES, latent_dim=LATENT, hidden=5,
                    per_example_gradients=False)  # fmt: skip
    fused.load_state_dict(without_dp_lstm_aliases(dp.state_dict()))  # strict
    x, y, noise = batch(3)
    torch.testing.assert_close(fused(x, y, noise)[0], dp(x, y, noise)[0], rtol=1e-5, atol=1e-6)
    assert without_dp_lstm_aliases(fused.state_dict()).keys() == fused.state_dict().keys()


def test_only_dp_adam_builds_dp_lstms():
    from audit.mechanisms import available_mechanisms, get_mechanism

    needs = {m for m in available_mechanisms() if get_mechanism(m).per_example_gradients}
    assert needs == {"cdp", "cdp-termwise", "dp2vae"}  # dp2vae: DP-Adam on the decoder
    family = SeriesModels(record_shape=(T, F), num_classes=CLASSES)
    assert has_dp_lstm(family.target_vae(latent_dim=LATENT))
    assert not has_dp_lstm(family.target_vae(latent_dim=LATENT, per_example_gradients=False))
    assert not has_dp_lstm(family.perturbation_vae(latent_dim=LATENT, sigma=1.0, mean_bound=3.0))
    assert not has_dp_lstm(family.for_inference(family.target_vae(latent_dim=LATENT)))
