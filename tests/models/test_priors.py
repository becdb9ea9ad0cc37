"""The mixture-of-Gaussians prior of PriVAE (Section 5.2) and the sample-wise Monte-Carlo KL."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from models.priors import (
    PAPER_STD,
    GaussianMixturePrior,
    monte_carlo_kl,
    unit_square_corners,
)


def naive_log_prob(z: np.ndarray, means: np.ndarray, std: float) -> float:
    """log sum_k (1/K) prod_d N(z_d; mu_kd, std^2), a loop over components and dimensions."""
    total = 0.0
    for mean in means:
        density = 1.0 / len(means)
        for zd, md in zip(z, mean, strict=True):
            density *= math.exp(-0.5 * ((zd - md) / std) ** 2) / (std * math.sqrt(2 * math.pi))
        total += density
    return math.log(total)


def test_paper_prior_parameters():
    prior = GaussianMixturePrior()
    assert prior.num_components == 4 and prior.dim == 2 and prior.std == PAPER_STD == 0.03
    assert sorted(map(tuple, prior.means.tolist())) == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_log_prob_matches_naive_loop():
    # std 0.3 keeps every density far from underflow, so the naive loop is exact enough.
    prior = GaussianMixturePrior(std=0.3)
    z = torch.randn(50, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    got = prior.log_prob(z)
    want = [naive_log_prob(row, unit_square_corners().double().numpy(), 0.3) for row in z.numpy()]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


def test_log_prob_at_a_corner_and_far_away_is_finite():
    prior = GaussianMixturePrior()
    at = prior.log_prob(torch.tensor([[1.0, 1.0]], dtype=torch.float64))
    # Other components are 1/0.03 = 33 standard deviations away: negligible.
    expected = math.log(0.25) - math.log(2 * math.pi * PAPER_STD**2)
    assert at.item() == pytest.approx(expected, rel=1e-12)
    far = prior.log_prob(torch.tensor([[40.0, -30.0]]))
    assert torch.isfinite(far).all()


def test_log_prob_keeps_batch_shape():
    prior = GaussianMixturePrior()
    assert prior.log_prob(torch.zeros(3, 5, 2)).shape == (3, 5)
    with pytest.raises(ValueError, match="last dimension 2"):
        prior.log_prob(torch.zeros(4, 3))


def test_sample_is_seeded_and_shaped():
    prior = GaussianMixturePrior()
    a = prior.sample(10, generator=torch.Generator().manual_seed(1))
    b = prior.sample(10, generator=torch.Generator().manual_seed(1))
    assert a.shape == (10, 2) and a.dtype == torch.get_default_dtype()
    assert torch.equal(a, b)
    assert prior.sample(0, generator=torch.Generator()).shape == (0, 2)
    c = prior.sample(3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert c.dtype == torch.float64
    with pytest.raises(ValueError):
        prior.sample(-1, generator=torch.Generator())


@pytest.mark.statistical
def test_sample_moments():
    # n = 40000: each component's count is Binomial(n, 1/4), sd sqrt(n 3/16) = 86.6; a component's
    # sample std has sd about std / sqrt(2 n_k) = 0.03 / 141 = 2.1e-4. Tolerances: 5 sd.
    prior = GaussianMixturePrior()
    n = 40000
    z = prior.sample(n, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    nearest = torch.cdist(z, prior.means.double()).argmin(1)
    counts = torch.bincount(nearest, minlength=4).double()
    assert (counts - n / 4).abs().max() < 5 * math.sqrt(n * 3 / 16)
    for k in range(4):
        zk = z[nearest == k]
        assert (zk.mean(0) - prior.means[k]).abs().max() < 5 * PAPER_STD / math.sqrt(len(zk))
        assert (zk.std(0) - PAPER_STD).abs().max() < 5 * PAPER_STD / math.sqrt(2 * len(zk))


def test_bad_prior_arguments():
    with pytest.raises(ValueError):
        GaussianMixturePrior(std=0.0)
    with pytest.raises(ValueError):
        GaussianMixturePrior(torch.zeros(4))


def gaussian_kl(mu: torch.Tensor, var: torch.Tensor, mean: torch.Tensor, std: float) -> float:
    """KL(N(mu, diag var) || N(mean, std^2 I)), closed form."""
    return float(0.5 * ((var + (mu - mean) ** 2) / std**2 - 1 - torch.log(var / std**2)).sum())


def test_monte_carlo_kl_is_exactly_zero_when_q_is_the_prior():
    prior = GaussianMixturePrior(torch.tensor([[0.5, -0.5]]), std=0.7)
    mu = torch.tensor([[0.5, -0.5]], dtype=torch.float64)
    logvar = torch.full_like(mu, 2 * math.log(0.7))
    z = torch.randn(1, 50, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    kl = monte_carlo_kl(mu.unsqueeze(1) + 0.7 * z, mu, logvar, prior)
    assert kl.shape == (1,) and abs(kl.item()) < 1e-12


@pytest.mark.statistical
def test_monte_carlo_kl_against_closed_form_and_able_to_fail():
    # With a one-component prior the KL has a closed form; the estimate over L samples has
    # standard error sd(kld) / sqrt(L), measured from the same samples. Tolerance: 4 SE.
    prior = GaussianMixturePrior(torch.tensor([[0.0, 1.0]]), std=0.5)
    mu = torch.tensor([[0.3, 0.2]], dtype=torch.float64)
    logvar = torch.tensor([[-1.0, 0.4]], dtype=torch.float64)
    gen = torch.Generator().manual_seed(11)
    L = 20000
    eps = torch.randn(1, L, 2, generator=gen, dtype=torch.float64)
    z = mu.unsqueeze(1) + torch.exp(0.5 * logvar).unsqueeze(1) * eps
    per_sample = torch.stack([monte_carlo_kl(z[:, i], mu, logvar, prior) for i in range(0, L, 40)])
    estimate = monte_carlo_kl(z, mu, logvar, prior).item()
    se = per_sample.std().item() / math.sqrt(L)
    truth = gaussian_kl(mu[0], logvar[0].exp(), prior.means[0].double(), 0.5)
    assert abs(estimate - truth) < 4 * se
    # Shown able to fail: the closed form for a mean moved by 0.3 lies outside the band.
    shift = torch.tensor([0.3, 0.0], dtype=torch.float64)
    moved = gaussian_kl(mu[0] + shift, logvar[0].exp(), prior.means[0].double(), 0.5)
    assert abs(estimate - moved) > 4 * se


def test_monte_carlo_kl_shapes_and_single_sample_form():
    prior = GaussianMixturePrior()
    mu, logvar = torch.zeros(3, 2), torch.zeros(3, 2)
    z = torch.randn(3, 5, 2, generator=torch.Generator().manual_seed(0))
    many = monte_carlo_kl(z, mu, logvar, prior)
    one = torch.stack([monte_carlo_kl(z[:, i], mu, logvar, prior) for i in range(5)], 1)
    assert many.shape == (3,)
    torch.testing.assert_close(many, one.mean(1))
    with pytest.raises(ValueError):
        monte_carlo_kl(torch.zeros(4, 2), mu, logvar, prior)
