"""The Cauchy-kernel MMD of PriVAE (Section 5.1) and its priors, on known inputs."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from models.divergences import (
    CAUCHY_SCALES,
    SPARSE_GAMMA,
    SPARSE_SPIKE_VARIANCE,
    Divergence,
    cauchy_kernel,
    mmd,
    sample_prior,
)


def naive_kernel(a: torch.Tensor, b: torch.Tensor) -> float:
    return sum(s / (s + float(a[d] - b[d]) ** 2) for d in range(len(a)) for s in CAUCHY_SCALES)


def naive_mmd(a: torch.Tensor, b: torch.Tensor) -> float:
    n, m = len(a), len(b)
    aa = sum(naive_kernel(a[i], a[j]) for i in range(n) for j in range(n) if i != j)
    bb = sum(naive_kernel(b[i], b[j]) for i in range(m) for j in range(m) if i != j)
    ab = sum(naive_kernel(a[i], b[j]) for i in range(n) for j in range(m))
    return aa / (n * (n - 1)) + bb / (m * (m - 1)) - 2 * ab / (n * m)


def test_kernel_known_values():
    # one dimension, distance 1: sum_l s_l / (s_l + 1)
    expected = sum(s / (s + 1) for s in CAUCHY_SCALES)
    got = cauchy_kernel(
        torch.tensor([[0.0]], dtype=torch.float64), torch.tensor([[1.0]], dtype=torch.float64)
    )
    assert float(got) == pytest.approx(expected, rel=1e-12)
    # k(x, x) = d * number of scales
    x = torch.randn(3, 5, dtype=torch.float64)
    torch.testing.assert_close(
        torch.diagonal(cauchy_kernel(x, x)),
        torch.full((3,), 5.0 * len(CAUCHY_SCALES), dtype=torch.float64),
    )


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 5), m=st.integers(2, 5), d=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_mmd_matches_a_naive_loop(n, m, d, seed):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(n, d, generator=gen, dtype=torch.float64)
    b = 2 * torch.randn(m, d, generator=gen, dtype=torch.float64) + 0.5
    assert float(mmd(a, b)) == pytest.approx(naive_mmd(a, b), rel=1e-10, abs=1e-12)


def test_mmd_of_identical_samples_is_near_zero():
    """mmd(X, X) = 2 (mean off-diagonal k - k(x, x)) / n exactly (the unbiased estimator drops
    the diagonal within X but not across), which vanishes as n grows."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(400, 4, generator=gen, dtype=torch.float64)
    k = cauchy_kernel(x, x)
    off = (k.sum() - k.diagonal().sum()) / (400 * 399)
    assert float(mmd(x, x)) == pytest.approx(float(2 * (off - k[0, 0]) / 400), rel=1e-9)
    assert abs(float(mmd(x, x))) < 2 * 4 * len(CAUCHY_SCALES) / 400


def test_mmd_is_near_zero_for_the_same_distribution_and_grows_with_a_shift():
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(300, 3, generator=gen, dtype=torch.float64)
    shifts = [0.0, 0.25, 0.5, 1.0, 2.0]
    values = [
        float(mmd(a, torch.randn(300, 3, generator=gen, dtype=torch.float64) + s)) for s in shifts
    ]
    assert abs(values[0]) < 0.05
    assert all(lo < hi for lo, hi in zip(values, values[1:], strict=False))
    assert values[-1] > 1.0


def test_mmd_needs_two_samples_each():
    with pytest.raises(ValueError, match="at least 2 samples on each side, got 1 and 3"):
        mmd(torch.zeros(1, 2), torch.zeros(3, 2))


def test_mmd_is_differentiable():
    a = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    mmd(a, torch.randn(6, 3, dtype=torch.float64)).backward()
    assert torch.isfinite(a.grad).all() and a.grad.abs().sum() > 0


def test_normal_prior_moments():
    z = sample_prior(Divergence.MMD, 20_000, 3, generator=torch.Generator().manual_seed(0))
    assert z.shape == (20_000, 3)
    assert abs(float(z.mean())) < 0.02 and abs(float(z.var()) - 1) < 0.03


@pytest.mark.statistical
def test_sparse_prior_is_the_spike_and_slab_of_paper_004():
    """Var = gamma * sigma0^2 + (1 - gamma) = 0.24; P(|z| < 0.1) from the mixture's CDF."""
    n = 200_000
    z = sample_prior(Divergence.SPARSE, n, 1, generator=torch.Generator().manual_seed(0))
    z = z.double().flatten()
    var = SPARSE_GAMMA * SPARSE_SPIKE_VARIANCE + (1 - SPARSE_GAMMA)
    # sample variance: sd ~ sqrt((mu4 - var^2) / n); mu4 = 3 (gamma s0^4 + (1 - gamma))
    mu4 = 3 * (SPARSE_GAMMA * SPARSE_SPIKE_VARIANCE**2 + (1 - SPARSE_GAMMA))
    assert abs(float(z.var()) - var) < 5 * math.sqrt((mu4 - var**2) / n)

    def phi(t: float) -> float:
        return 0.5 * (1 + math.erf(t / math.sqrt(2)))

    p = SPARSE_GAMMA * (2 * phi(0.1 / math.sqrt(SPARSE_SPIKE_VARIANCE)) - 1) + (
        1 - SPARSE_GAMMA
    ) * (2 * phi(0.1) - 1)
    share = float((z.abs() < 0.1).double().mean())
    assert abs(share - p) < 5 * math.sqrt(p * (1 - p) / n)
