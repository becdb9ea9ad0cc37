"""PriVAE's latent metrics (Section 5.1): Hoyer sparsity (Eq. 17) and the Cauchy-kernel MMD."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from models.divergences import mmd
from models.latent_metrics import hoyer, hoyer_sparsity, latent_mmd


def naive_hoyer(row: list[float]) -> float:
    d = len(row)
    l1 = sum(abs(v) for v in row)
    l2 = math.sqrt(sum(v * v for v in row))
    return (math.sqrt(d) - l1 / l2) / (math.sqrt(d) - 1)


def test_known_vectors():
    one_hot = torch.tensor([[0.0, 0.0, 3.0, 0.0], [-1.0, 0.0, 0.0, 0.0]])
    constant = torch.tensor([[2.0, 2.0, 2.0, 2.0], [1.0, -1.0, 1.0, -1.0]])
    torch.testing.assert_close(hoyer(one_hot), torch.ones(2))
    torch.testing.assert_close(hoyer(constant), torch.zeros(2))
    assert torch.isnan(hoyer(torch.zeros(1, 3))).all()
    with pytest.raises(ValueError):
        hoyer(torch.ones(3, 1))


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 5),
    d=st.integers(2, 6),
    seed=st.integers(0, 2**31 - 1),
)
def test_hoyer_matches_naive(n, d, seed):
    y = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    got = hoyer(y)
    want = torch.tensor([naive_hoyer(r) for r in y.tolist()], dtype=torch.float64)
    torch.testing.assert_close(got, want)
    assert ((got >= -1e-12) & (got <= 1 + 1e-12)).all()


def test_sparsity_of_one_hot_codes_and_normalisation():
    eye = torch.eye(4)
    assert hoyer_sparsity(eye) == pytest.approx(1.0)
    # Normalisation removes a per-dimension scale: shrinking a dimension is not sparsity.
    gen = torch.Generator().manual_seed(0)
    codes = torch.randn(100, 3, generator=gen, dtype=torch.float64)
    scaled = codes * torch.tensor([1.0, 1e-3, 1.0], dtype=torch.float64)
    assert hoyer_sparsity(scaled) == pytest.approx(hoyer_sparsity(codes))
    assert hoyer_sparsity(scaled, normalise=False) > hoyer_sparsity(codes, normalise=False)
    # The mean of Hoyer's measure over rows, after z / sigma(z).
    want = sum(naive_hoyer(r) for r in (codes / codes.std(0)).tolist()) / len(codes)
    assert hoyer_sparsity(codes) == pytest.approx(want)


def test_sparsity_refuses_undefined_cases():
    with pytest.raises(ValueError, match="constant"):
        hoyer_sparsity(torch.tensor([[1.0, 0.0], [2.0, 0.0]]))
    assert hoyer_sparsity(torch.tensor([[1.0, 1.0], [2.0, 2.0]]), normalise=False) == 0.0
    with pytest.raises(ValueError, match="zero vector"):
        hoyer_sparsity(torch.tensor([[0.0, 0.0], [1.0, 2.0]]), normalise=False)


@pytest.mark.statistical
def test_mmd_of_same_distribution_is_near_zero_and_of_separated_ones_is_large():
    # Independent draws from one distribution: the unbiased MMD^2 has mean 0; its sd for two
    # batches of 256 standard normal 2-D codes is 0.0124 (measured over 200 other seeds, mean
    # 0.0004). Tolerance: 4 sd = 0.05. Shifting one sample by 3 in each dimension gives about 7.8.
    gen = torch.Generator().manual_seed(4)
    a = torch.randn(512, 2, generator=gen, dtype=torch.float64)
    b = torch.randn(512, 2, generator=gen, dtype=torch.float64)
    same = latent_mmd(a, b)
    apart = latent_mmd(a, b + 3.0)
    assert abs(same) < 0.05
    assert apart > 5.0


def test_mmd_batches_are_averaged_and_a_trailing_single_is_dropped():
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(9, 2, generator=gen, dtype=torch.float64)
    b = torch.randn(9, 2, generator=gen, dtype=torch.float64)
    want = (mmd(a[:4], b[:4]) + mmd(a[4:8], b[4:8])) / 2
    assert latent_mmd(a, b, batch_size=4) == pytest.approx(want.item())
    assert latent_mmd(a, b, batch_size=None) == pytest.approx(mmd(a, b).item())
    with pytest.raises(ValueError):
        latent_mmd(a[:1], b[:1])
    with pytest.raises(ValueError):
        latent_mmd(a, b[:5])


class _Coder(torch.nn.Module):
    """A 'VAE' whose encoder returns fixed codes (the records are their row numbers)."""

    def __init__(self, codes: torch.Tensor, prior=None) -> None:
        super().__init__()
        self.codes, self.latent_dim, self.prior = codes, codes.shape[1], prior
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def encode(self, x, y):
        rows = x[:, 0].long()
        return self.codes[rows], torch.full_like(self.codes[rows], -30.0)  # sigma ~ 3e-7


def _summary(codes, prior=None):
    from models.latent_metrics import latent_summary

    n = len(codes)
    x = torch.arange(n, dtype=torch.float64)[:, None]
    return latent_summary(_Coder(codes, prior), x, torch.zeros(n, dtype=torch.long), seed=3)


def test_latent_summary_tells_codes_from_the_prior_from_shifted_ones():
    """Codes drawn from the model's own prior give an MMD^2 near 0 (the unbiased estimator's
    sd over 20 seeds at n = 512, d = 4: 0.011); the same codes shifted by 2 in every
    coordinate give one far above; one-hot codes are sparser than dense ones."""
    gen = torch.Generator().manual_seed(0)
    codes = torch.randn(512, 4, generator=gen, dtype=torch.float64)
    near, far = _summary(codes), _summary(codes + 2.0)
    assert abs(near["latent_mmd"]) < 0.1 < far["latent_mmd"]
    one_hot = torch.eye(4, dtype=torch.float64).repeat(128, 1) * (1 + torch.rand(512, 1))
    assert _summary(one_hot)["latent_hoyer"] > 0.9 > _summary(codes)["latent_hoyer"]


def test_latent_summary_uses_the_mixture_prior_where_the_model_has_one():
    from models.priors import GaussianMixturePrior

    prior = GaussianMixturePrior()
    codes = prior.sample(512, generator=torch.Generator().manual_seed(1)).double()
    with_prior, against_normal = _summary(codes, prior), _summary(codes)
    assert abs(with_prior["latent_mmd"]) < 0.1 < against_normal["latent_mmd"]


def test_latent_summary_is_nan_where_undefined():
    out = _summary(torch.ones(5, 3, dtype=torch.float64))  # every dimension constant
    assert math.isnan(out["latent_hoyer"]) and math.isfinite(out["latent_mmd"])
    assert all(math.isnan(v) for v in _summary(torch.ones(1, 3, dtype=torch.float64)).values())
