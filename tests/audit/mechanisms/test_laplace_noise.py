"""The Laplace sampler and the series mechanism (torch); their claim is in tests/audit/privacy."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.mechanisms.laplace_noise import laplace_perturb_series, sample_laplace

from .stats import Z_THRESHOLD, laplace_variance_z


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _series_noise(eps_i=200.0, n=4000, seed=0):
    """Noise on a series at mid-range with public bounds [-1, 1] (range 2, scale 2/eps_i)."""
    x = torch.zeros((n, 25, 2))
    out = laplace_perturb_series(x, eps_i=eps_i, generator=_gen(seed), bounds=(-1.0, 1.0))
    assert out.abs().max() < 1  # scale 0.01: P(|noise| >= 1) = e^-100 per value
    return out - x


@pytest.mark.statistical
def test_series_noise_variance_matches_laplace():
    assert abs(laplace_variance_z(_series_noise(), scale=2 / 200.0)) < Z_THRESHOLD


@pytest.mark.statistical
@pytest.mark.parametrize("wrong_factor", [0.9, 1.1])
def test_variance_check_rejects_a_wrong_scale(wrong_factor):
    z = laplace_variance_z(_series_noise(), scale=wrong_factor * 2 / 200.0)
    assert abs(z) > Z_THRESHOLD


@pytest.mark.statistical
def test_sampler_variance_and_per_feature_scales():
    scales = torch.tensor([0.5, 2.0])
    noise = sample_laplace((100_000, 2), scale=scales, generator=_gen(3))
    for f in range(2):
        assert abs(laplace_variance_z(noise[:, f], scale=float(scales[f]))) < Z_THRESHOLD


def test_sensitivity_is_each_feature_fixed_range():
    x = torch.stack([torch.linspace(0, 1, 50), torch.linspace(-10, 10, 50)], dim=-1)[None]
    bounds = (torch.tensor([0.0, -10.0]), torch.tensor([1.0, 10.0]))
    out = laplace_perturb_series(x, eps_i=0.5, generator=_gen(), bounds=bounds)
    assert (out[..., 0] >= 0).all() and (out[..., 0] <= 1).all()
    assert (out[..., 1] >= -10).all() and (out[..., 1] <= 10).all()


def test_bounds_are_required_never_taken_from_the_data():
    with pytest.raises(TypeError, match="bounds"):
        laplace_perturb_series(torch.zeros((1, 2, 1)), eps_i=1.0, generator=_gen())


@settings(max_examples=50, deadline=None)
@given(eps_i=st.floats(min_value=1e-6, max_value=1e6), seed=st.integers(0, 2**31 - 1))
def test_output_stays_within_bounds(eps_i, seed):
    x = torch.rand((2, 16, 3), generator=_gen(seed)) * 4 - 2
    out = laplace_perturb_series(x, eps_i=eps_i, generator=_gen(seed + 1), bounds=(-2.0, 2.0))
    assert (out >= -2).all() and (out <= 2).all() and out.shape == x.shape


def test_seeded_and_reproducible():
    x = torch.rand((2, 16, 3), generator=_gen())
    a = laplace_perturb_series(x, eps_i=1.0, generator=_gen(7), bounds=(0.0, 1.0))
    b = laplace_perturb_series(x, eps_i=1.0, generator=_gen(7), bounds=(0.0, 1.0))
    assert torch.equal(a, b)


def test_values_outside_given_bounds_are_refused():
    with pytest.raises(ValueError, match="outside the given bounds"):
        laplace_perturb_series(
            torch.full((1, 2, 1), 3.0), eps_i=1.0, generator=_gen(), bounds=(-1.0, 1.0)
        )


@pytest.mark.parametrize("eps_i", [0.0, -2.0, math.nan])
def test_bad_epsilon(eps_i):
    with pytest.raises(ValueError, match=f"got {eps_i!r}"):
        laplace_perturb_series(
            torch.zeros((1, 2, 1)), eps_i=eps_i, generator=_gen(), bounds=(-1.0, 1.0)
        )


def test_bad_shape():
    with pytest.raises(ValueError, match=r"\(B, T, F\)"):
        laplace_perturb_series(torch.zeros((2, 3)), eps_i=1.0, generator=_gen(), bounds=(0, 1))
