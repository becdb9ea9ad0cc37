"""PriVAE's batch-wise KL(p(z) || q(z)) (Section 5.2), on cases with known answers."""

from __future__ import annotations

import math

import pytest
import torch

from models.divergences import (
    aggregate_posterior_log_prob,
    kl_prior_aggregate,
    kl_prior_aggregate_at,
)
from models.priors import GaussianMixturePrior, diagonal_gaussian_log_prob


def naive_aggregate_log_prob(z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> list:
    out = []
    for zj in z:
        total = 0.0
        for mi, li in zip(mu, logvar, strict=True):
            density = 1.0
            for zd, md, ld in zip(zj.tolist(), mi.tolist(), li.tolist(), strict=True):
                var = math.exp(ld)
                density *= math.exp(-0.5 * (zd - md) ** 2 / var) / math.sqrt(2 * math.pi * var)
            total += density / len(mu)
        out.append(math.log(total))
    return out


def test_aggregate_log_prob_matches_naive_loop():
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(7, 3, generator=gen, dtype=torch.float64)
    mu = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    logvar = 0.3 * torch.randn(5, 3, generator=gen, dtype=torch.float64)
    got = aggregate_posterior_log_prob(z, mu, logvar)
    torch.testing.assert_close(got, torch.tensor(naive_aggregate_log_prob(z, mu, logvar)).double())


def test_zero_when_the_aggregate_posterior_is_the_mixture_prior():
    # Four records whose posteriors are the prior's components: q_s = p, every term is 0.
    prior = GaussianMixturePrior()
    mu = prior.means.double()
    logvar = torch.full_like(mu, 2 * math.log(prior.std))
    z = prior.sample(200, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert abs(kl_prior_aggregate_at(z, mu, logvar, prior=prior).item()) < 1e-10


@pytest.mark.statistical
def test_single_gaussian_against_closed_form_and_able_to_fail():
    # p = N(0, 0.5^2 I) (one component), q_s = N(m, diag v) (one record): KL(p || q) =
    # sum_d [log(sqrt(v_d) / 0.5) + (0.25 + m_d^2) / (2 v_d) - 1/2]. The estimate's standard error
    # is sd(log p - log q) / sqrt(M), measured on the same samples. Tolerance: 4 SE.
    prior = GaussianMixturePrior(torch.zeros(1, 2), std=0.5)
    m = torch.tensor([[0.4, -0.2]], dtype=torch.float64)
    logvar = torch.tensor([[0.2, -0.5]], dtype=torch.float64)
    M = 20000
    z = prior.sample(M, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    estimate = kl_prior_aggregate_at(z, m, logvar, prior=prior).item()
    terms = prior.log_prob(z) - diagonal_gaussian_log_prob(z, m, logvar)
    se = terms.std().item() / math.sqrt(M)

    def closed(mean: torch.Tensor) -> float:
        v = logvar.exp()[0]
        return float((0.5 * torch.log(v / 0.25) + (0.25 + mean[0] ** 2) / (2 * v) - 0.5).sum())

    assert abs(estimate - closed(m)) < 4 * se
    shift = torch.tensor([[0.3, 0.0]], dtype=torch.float64)
    assert abs(estimate - closed(m + shift)) > 4 * se  # a perturbed input is caught


def test_printed_form_is_a_rescaled_shift():
    # PriVAE prints sum_j (log p(z_j) - log sum_i q(z_j | x_i)) with m = |s| samples.
    prior = GaussianMixturePrior()
    gen = torch.Generator().manual_seed(3)
    mu = torch.rand(6, 2, generator=gen, dtype=torch.float64)
    logvar = torch.full_like(mu, -3.0)
    z = prior.sample(6, generator=gen, dtype=torch.float64)
    log_q_sum = torch.logsumexp(diagonal_gaussian_log_prob(z[:, None], mu[None], logvar[None]), 1)
    printed = (prior.log_prob(z) - log_q_sum).sum()
    ours = kl_prior_aggregate_at(z, mu, logvar, prior=prior)
    torch.testing.assert_close(printed, 6 * ours - 6 * math.log(6))


def test_sampled_form_is_seeded_and_differentiable():
    prior = GaussianMixturePrior()
    mu = torch.rand(5, 2, generator=torch.Generator().manual_seed(0)).requires_grad_()
    logvar = torch.full((5, 2), -2.0, requires_grad=True)
    a = kl_prior_aggregate(mu, logvar, prior=prior, generator=torch.Generator().manual_seed(1))
    b = kl_prior_aggregate(mu, logvar, prior=prior, generator=torch.Generator().manual_seed(1))
    assert a.ndim == 0 and a.item() == b.item()
    # The default draws |s| = 5 samples: the same as drawing them explicitly.
    z = prior.sample(5, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(a, kl_prior_aggregate_at(z, mu, logvar, prior=prior))
    a.backward()
    assert mu.grad is not None and logvar.grad is not None
    assert torch.isfinite(mu.grad).all() and mu.grad.abs().sum() > 0


@pytest.mark.statistical
def test_moving_codes_onto_the_prior_lowers_the_estimate():
    prior = GaussianMixturePrior()
    logvar = torch.full((4, 2), 2 * math.log(0.05))
    on = prior.means.clone()
    off = on + 0.3
    gen_args = {"prior": prior, "num_samples": 2000}
    near = kl_prior_aggregate(on, logvar, generator=torch.Generator().manual_seed(0), **gen_args)
    far = kl_prior_aggregate(off, logvar, generator=torch.Generator().manual_seed(0), **gen_args)
    assert near.item() < 1.0 < far.item()


def test_bad_inputs_raise():
    prior = GaussianMixturePrior()
    mu = torch.zeros(3, 2)
    with pytest.raises(ValueError):
        kl_prior_aggregate(mu, mu, prior=prior, generator=torch.Generator(), num_samples=0)
    with pytest.raises(ValueError):
        aggregate_posterior_log_prob(torch.zeros(4, 3), mu, mu)
    with pytest.raises(ValueError):
        aggregate_posterior_log_prob(torch.zeros(4, 2), mu, torch.zeros(2, 2))
