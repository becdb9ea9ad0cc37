import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from audit.privacy import (
    GaussianConversion,
    analytic_gaussian_delta,
    gaussian_epsilon_analytic,
    gaussian_epsilon_classic,
    vae_ldp_claim,
    vae_ldp_epsilon,
    vae_ldp_sensitivity,
)

DELTA_LFW20 = 5.2466e-4  # 1 / 1906, the trade-off paper's LFW20 |D|
# The trade-off paper, Table 2, VAE-LDP LFW20 column (d = 100): 2366.15, 236.61, 23.66, 2.37, 0.24;
# the values below are the closed form Delta * sqrt(2 ln(1.25/delta)) / sigma, Delta = 60.
CLASSIC_COLUMN = [
    (0.1, 2366.1468),
    (1, 236.61468),
    (10, 23.661468),
    (100, 2.3661468),
    (1000, 0.23661468),
]


@pytest.mark.parametrize(("sigma", "expected"), CLASSIC_COLUMN)
def test_classic_column_of_table2(sigma, expected):
    eps = vae_ldp_epsilon(sigma=sigma, latent_dim=100, delta=DELTA_LFW20, conversion="classic")
    assert eps == pytest.approx(expected, rel=1e-6)


def test_table2_lfw20_headline_value():
    eps = vae_ldp_epsilon(sigma=0.1, latent_dim=100, delta=DELTA_LFW20)
    assert abs(eps - 2366.15) < 0.1


def test_sensitivity_is_box_diameter():
    assert vae_ldp_sensitivity(latent_dim=100) == pytest.approx(60.0)


@pytest.mark.parametrize("sigma", [0.1, 1, 10, 100, 1000])
def test_analytic_epsilon_is_tight(sigma):
    eps = vae_ldp_epsilon(sigma=sigma, latent_dim=100, delta=DELTA_LFW20, conversion="analytic")
    assert math.isfinite(eps) and eps > 0
    assert analytic_gaussian_delta(epsilon=eps, sigma=sigma, sensitivity=60.0) <= DELTA_LFW20
    below = analytic_gaussian_delta(epsilon=eps * (1 - 1e-6), sigma=sigma, sensitivity=60.0)
    assert below > DELTA_LFW20


@pytest.mark.parametrize("delta", [1e-3, DELTA_LFW20, 1e-5, 1e-8])
def test_analytic_not_above_classic_where_classic_is_valid(delta):
    sigma = 60 * math.sqrt(2 * math.log(1.25 / delta)) / 0.5  # classic eps = 0.5
    classic = gaussian_epsilon_classic(sigma=sigma, sensitivity=60.0, delta=delta)
    assert classic == pytest.approx(0.5)
    assert gaussian_epsilon_analytic(sigma=sigma, sensitivity=60.0, delta=delta) <= classic


def test_analytic_stays_finite_for_huge_epsilon():
    eps = gaussian_epsilon_analytic(sigma=1e-3, sensitivity=60.0, delta=1e-5)
    assert math.isfinite(eps) and eps > 1e8  # mean privacy loss (60/1e-3)^2/2 = 1.8e9
    assert eps == pytest.approx(0.5 * (60 / 1e-3) ** 2, rel=0.01)


def test_analytic_is_zero_when_delta_already_covers_eps_zero():
    # At eps = 0 the profile is the total variation 2 Phi(D/(2 s)) - 1, about 4e-6 here.
    assert gaussian_epsilon_analytic(sigma=1e5, sensitivity=1.0, delta=1e-3) == 0.0


@pytest.mark.parametrize(("eps", "ratio"), [(0.5, 1.0), (2.0, 1.0), (1.0, 3.0), (0.1, 0.2)])
def test_profile_matches_numerical_integration(eps, ratio):
    # delta(eps) = E_{x ~ N(ratio, 1)} [(1 - e^{eps - L(x)})_+], L(x) = ratio x - ratio^2/2.
    def integrand(x):
        loss = ratio * x - ratio**2 / 2
        return max(0.0, 1 - math.exp(eps - loss)) * stats.norm.pdf(x, loc=ratio)

    expected, _ = integrate.quad(
        integrand, -40, 40, points=[(eps + ratio**2 / 2) / ratio], epsabs=1e-14, limit=200
    )
    assert analytic_gaussian_delta(epsilon=eps, sigma=1.0, sensitivity=ratio) == pytest.approx(
        expected, rel=1e-6
    )


@settings(max_examples=60, deadline=None)
@given(
    log_ratio=st.floats(min_value=-4, max_value=4),
    log_delta=st.floats(min_value=-20, max_value=-1),
)
def test_analytic_epsilon_satisfies_profile_property(log_ratio, log_delta):
    ratio, delta = 10**log_ratio, 10**log_delta
    eps = gaussian_epsilon_analytic(sigma=1.0, sensitivity=ratio, delta=delta)
    assert math.isfinite(eps)
    assert analytic_gaussian_delta(epsilon=eps, sigma=1.0, sensitivity=ratio) <= delta
    if eps > 0:
        assert (
            analytic_gaussian_delta(epsilon=eps * (1 - 1e-6), sigma=1.0, sensitivity=ratio) > delta
        )


def test_claim_defaults_to_the_analytic_bound_and_labels_the_classic_value():
    claim = vae_ldp_claim(sigma=0.1, latent_dim=100, delta=DELTA_LFW20)
    assert claim.method == "vae-ldp/analytic-gaussian"
    assert claim.epsilon == claim.extra["epsilon_analytic"]
    assert claim.extra["epsilon_classic"] < claim.epsilon
    assert "NOT a bound" in claim.extra["epsilon_classic_note"]
    classic = vae_ldp_claim(
        sigma=1000, latent_dim=100, delta=DELTA_LFW20, conversion=GaussianConversion.CLASSIC
    )
    assert classic.epsilon == classic.extra["epsilon_classic"]
    assert "epsilon_classic_note" not in classic.extra


@pytest.mark.parametrize(
    ("kwargs", "quoted"),
    [
        ({"sigma": 0.0}, "0.0"),
        ({"sigma": -1.0}, "-1.0"),
        ({"sigma": math.nan}, "nan"),
        ({"delta": 1.0}, "1.0"),
        ({"delta": 0.0}, "0.0"),
        ({"latent_dim": 0}, "0"),
        ({"conversion": "improved"}, "classic, analytic"),
    ],
)
def test_bad_inputs(kwargs, quoted):
    base = {"sigma": 1.0, "latent_dim": 100, "delta": 1e-3}
    with pytest.raises(ValueError, match=quoted.replace(".", r"\.").replace("-", r"\-")):
        vae_ldp_epsilon(**{**base, **kwargs})
