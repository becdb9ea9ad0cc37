"""The VAE-LDP perturbation model: bounded mean, floored std, one seeded reconstruction per record.

The privacy claim of VAE-LDP rests on two structural facts checked here for arbitrary inputs:
|mu| <= 3 (so the L2 sensitivity is 2 * 3 * sqrt(d)) and std >= sigma (the noise floor).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from models.perturbation import RAW_LOGVAR_RANGE, PerturbationVAE, float_at_least
from models.training import VAETrainSettings, train_vae, vae_per_example_loss
from models.vae import ConditionalConvVAE

SHAPE = (1, 8, 8)
CLASSES = 3
LATENT = 4


def small_model(sigma: float, *, seed: int = 0, channels: int = 1) -> PerturbationVAE:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return PerturbationVAE(
            channels=channels,
            height=8,
            width=8,
            num_classes=CLASSES,
            latent_dim=LATENT,
            sigma=sigma,
            # the trade-off paper's bound (audit.privacy.vae_ldp_accounting.MEAN_BOUND)
            mean_bound=3.0,
        )


def records(n: int, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, *SHAPE, generator=gen), torch.randint(0, CLASSES, (n,), generator=gen)


finite_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)  # up to +-3.4e38
positive_sigma = st.floats(1e-30, 1e30, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    x=hnp.arrays(
        np.float32, st.tuples(st.integers(1, 3), *map(st.just, SHAPE)), elements=finite_f32
    ),
    sigma=positive_sigma,
    seed=st.integers(0, 3),
)
def test_mean_bounded_and_std_floored_for_arbitrary_finite_inputs(x, sigma, seed):
    model = small_model(sigma, seed=seed)
    y = torch.arange(len(x)) % CLASSES
    with torch.inference_mode():
        mu, std = model.encode_std(torch.from_numpy(x), y)
    assert mu.shape == std.shape == (len(x), LATENT)
    assert bool(mu.abs().le(3.0).all())
    assert bool(torch.isfinite(std).all())
    assert bool((std.double() >= sigma).all())  # exact: the floor is rounded up, never down


def test_huge_weights_still_respect_the_bound_and_floor():
    model = small_model(0.5)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1e30)
    x, y = records(4)
    mu, std = model.encode_std(x * 1e30, y)
    assert bool(mu.abs().le(3.0).all()) and bool((std >= 0.5).all())


@pytest.mark.parametrize("value", [0.1, 1 / 3, 1e-30, 1000.0, 2.0**-149 * 3])
def test_float_at_least_never_rounds_below(value):
    t = float_at_least(value, torch.float32)
    assert t.dtype == torch.float32 and float(t) >= value
    assert float(torch.nextafter(t, torch.tensor(0.0))) < value  # and is the closest such float


def test_encode_matches_encode_std_and_reuses_target_layers():
    model = small_model(0.3)
    x, y = records(5)
    mu, std = model.encode_std(x, y)
    mu2, logvar = model.encode(x, y)
    torch.testing.assert_close(mu2, mu)
    torch.testing.assert_close(torch.exp(0.5 * logvar), std)
    target = ConditionalConvVAE(
        channels=1, height=8, width=8, num_classes=CLASSES, latent_dim=LATENT
    )
    assert isinstance(model, ConditionalConvVAE)
    assert model.state_dict().keys() == target.state_dict().keys()


@pytest.mark.parametrize("n", [0, 1, 7])
def test_one_reconstruction_per_record_in_unit_range(n):
    model = small_model(1.0)
    x, y = records(n)
    out = model.perturb(x, y, generator=torch.Generator().manual_seed(1), batch_size=3)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert bool(((out >= 0) & (out <= 1)).all())


def test_perturb_is_seeded_and_independent_of_batching():
    model = small_model(1.0)
    x, y = records(10)
    a = model.perturb(x, y, generator=torch.Generator().manual_seed(5), batch_size=10)
    b = model.perturb(x, y, generator=torch.Generator().manual_seed(5), batch_size=10)
    c = model.perturb(x, y, generator=torch.Generator().manual_seed(6), batch_size=10)
    d = model.perturb(x, y, generator=torch.Generator().manual_seed(5), batch_size=3)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    torch.testing.assert_close(a, d)
    assert not torch.equal(a, c)


def test_perturb_rejects_wrong_shapes():
    model = small_model(1.0)
    x, y = records(2)
    with pytest.raises(ValueError, match="perturb expects"):
        model.perturb(x[:, :, :4], y, generator=torch.Generator())
    with pytest.raises(ValueError, match="perturb expects"):
        model.perturb(x, y[:1], generator=torch.Generator())


@pytest.mark.parametrize("sigma", [0.0, -1.0, math.inf, math.nan])
def test_sigma_must_be_positive_finite(sigma):
    with pytest.raises(ValueError, match="sigma must be a finite number > 0"):
        small_model(sigma)


@pytest.mark.statistical
@pytest.mark.parametrize("sigma", [0.1, 2.0])
def test_released_latent_noise_has_std_sigma(sigma, monkeypatch):
    """z - mu over 2000 records x 4 dims: the sample variance's z-score against sigma^2.

    For Gaussian noise Var(S^2) = 2 sigma^4 / n; |z| < 4 fails by chance with prob ~6e-5.
    """
    model = small_model(sigma)
    x, y = records(2000, seed=3)
    captured = []
    monkeypatch.setattr(model, "decode", lambda z, yb: captured.append(z) or x[: len(z)])
    model.perturb(x, y, generator=torch.Generator().manual_seed(11), batch_size=2000)
    mu, _ = model.encode_std(x, y)
    diff = (captured[0] - mu).detach().double().flatten()
    n = diff.numel()
    z_score = (float(diff.pow(2).mean()) - sigma**2) / (sigma**2 * math.sqrt(2 / n))
    assert abs(z_score) < 4.0
    assert abs(float(diff.mean())) < 4.0 * sigma / math.sqrt(n)


def test_train_vae_trains_the_perturbation_model():
    model = small_model(0.5)
    x, y = records(16)
    settings_ = VAETrainSettings(epochs=2, batch_size=8, lr=1e-3, beta=1.0, seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    history = train_vae(model, (x, y), (x[:4], y[:4]), settings_)
    assert len(history.train_loss) == 2 and all(math.isfinite(v) for v in history.train_loss)
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_a_log_variance_past_the_clip_is_pulled_back_not_trapped():
    """LFW20, sigma = 10: a raw log-variance that overshot the clip (30) sat there for the rest
    of training under a plain clamp (zero gradient), and the perturbation model decoded every
    record to one image. The clip keeps its value but passes the KL term's gradient."""
    model = small_model(0.5)
    x, y = records(8)
    with torch.no_grad():
        model.fc_logvar.bias.fill_(100.0)  # far past the clip's 30
    _, std = model.encode_std(x, y)
    # The value: exp(30 / 2) in float32, to one ulp. torch's float32 exp is vectorised code
    # picked by build and CPU (SLEEF, MKL's VML), within one ulp of e^15 = 3269017.37... but not
    # correctly rounded (3269017.5 on an AVX-512/AMX CPU), and math.exp rounded to float32
    # (3269017.25) is within half an ulp: two float32s of one binade under 1.5 ulp apart differ
    # by one ulp (0.25 here) at most. A clip anywhere else moves it by many (1e-5 lower: 62 ulps).
    top = np.float32(math.exp(RAW_LOGVAR_RANGE[1] / 2))
    gap = float((std.detach() - float(top)).abs().max())
    assert std.dtype == torch.float32 and gap <= np.spacing(top)
    noise = torch.randn(8, LATENT, generator=torch.Generator().manual_seed(0))
    vae_per_example_loss(model, x, y, noise, beta=1.0).mean().backward()
    grad = model.fc_logvar.bias.grad
    assert grad is not None and bool((grad > 0).all())  # a descent step lowers the variance
    opt = torch.optim.Adam([model.fc_logvar.bias], lr=1.0)  # ~1 per step: 100 steps suffice
    for _ in range(100):
        opt.zero_grad()
        vae_per_example_loss(model, x, y, noise, beta=1.0).mean().backward()
        opt.step()
    assert float(model.fc_logvar.bias.detach().max()) < RAW_LOGVAR_RANGE[1]  # back inside the clip
