"""DP2-VAE accounting (the DP2-VAE paper): known values, the paper's Theorem 3.1 value, why the
Poisson-subsampled bound does not hold for a choice among K fixed subsets, calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from audit.privacy.claim import Conversion
from audit.privacy.dp2vae_accounting import (
    dp2vae_claim,
    dp2vae_epsilon,
    dp2vae_noise_for_epsilon,
    paper_theorem_3_1_epsilon,
    selection_amplified_gaussian_rdp,
    step_sensitivity,
)
from audit.privacy.rdp import RDP_ORDERS, rdp_to_epsilon, sampled_gaussian_rdp

ORDERS = np.asarray(RDP_ORDERS)
ORDER_2 = RDP_ORDERS.index(2.0)
RUN = {"n_train": 50, "subsets": 5, "steps": 125, "max_batch_size": 16, "delta": 1 / 50}


def test_one_subset_is_plain_gaussian_composition():
    # q = 1: T Gaussians of sensitivity 2 B_max C, std sigma C (Mironov 2017, Prop. 7:
    # RDP a / (2 z^2)), classic conversion by hand (Mironov 2017, Prop. 3).
    sigma, b_max, steps, delta = 3.0, 2, 40, 1e-3
    z = sigma / (2 * b_max)
    by_hand = float(np.min(steps * ORDERS / (2 * z * z) + math.log(1 / delta) / (ORDERS - 1)))
    got = dp2vae_epsilon(
        n_train=10,
        subsets=1,
        steps=steps,
        noise_multiplier=sigma,
        max_batch_size=b_max,
        delta=delta,
        conversion="classic",
    )
    assert got == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize(("q", "z", "steps"), [(0.1, 1.0, 1), (0.2, 0.5, 7), (0.5, 3.0, 100)])
def test_order_two_closed_form(q, z, steps):
    # At a = 2: T log(1 - q + q e^{1/z^2}) (joint convexity, E over Binomial(T, q) hits of
    # e^{(a-1) a / (2 z^2)}), written out with math rather than numpy.
    rdp = selection_amplified_gaussian_rdp(selection_probability=q, noise_multiplier=z, steps=steps)
    assert rdp[ORDER_2] == pytest.approx(steps * math.log(1 - q + q * math.exp(1 / z**2)))


def test_paper_value_is_the_subsampled_gaussian_at_half_sigma_composed_by_hand():
    # Theorem 3.1: (a, 2a/sigma^2)-RDP per step = noise multiplier sigma/2; Algorithm 2's
    # Eps(K, sigma, T, delta): rate 1/K. One step's RDP from the repo, times T by hand.
    sigma, k, steps, delta = 1.5, 8, 300, 1e-4
    one = sampled_gaussian_rdp(sample_rate=1 / k, noise_multiplier=sigma / 2, steps=1)
    # Mironov, Talwar and Zhang 2019, integer order 2: log(1 + q^2 (e^{1/z^2} - 1)).
    assert one[ORDER_2] == pytest.approx(math.log1p((1 / k) ** 2 * math.expm1(4 / sigma**2)))
    for conversion in Conversion:
        expected = rdp_to_epsilon(rdp=steps * one, delta=delta, conversion=conversion)[0]
        got = paper_theorem_3_1_epsilon(
            subsets=k, steps=steps, noise_multiplier=sigma, delta=delta, conversion=conversion
        )
        assert got == pytest.approx(expected, rel=1e-9)


def renyi_divergence(log_p, log_q, alpha: float, points) -> float:
    """D_alpha(P || Q) of two 1-D densities, given as log-densities, by quadrature."""
    value, _ = integrate.quad(
        lambda x: math.exp(alpha * log_p(x) + (1 - alpha) * log_q(x)),
        -40,
        70,
        points=points,
        limit=400,
    )
    return math.log(value) / (alpha - 1)


def mixture(q: float, mean: float, rest: float, z: float):
    """log density of (1 - q) N(rest, z^2) + q N(mean, z^2)."""

    def log_density(x: float) -> float:
        return float(
            np.logaddexp(
                math.log1p(-q) + stats.norm.logpdf(x, rest, z),
                math.log(q) + stats.norm.logpdf(x, mean, z),
            )
        )

    return log_density


def test_choosing_one_of_k_fixed_subsets_is_not_poisson_subsampling():
    # Both neighbours are (1-q) R + q N(mu(D), z^2): with R, the other subsets' release, far
    # from mu, the divergence reaches the joint-convexity value and exceeds the
    # Poisson-subsampled Gaussian RDP at the same q and z.
    q, z, far, alpha = 0.1, 1.0, 30.0, 2.0
    exact = renyi_divergence(
        mixture(q, 0.0, far, z), mixture(q, 1.0, far, z), alpha, points=[0.0, 1.0, far]
    )
    poisson = sampled_gaussian_rdp(sample_rate=q, noise_multiplier=z, steps=1)[ORDER_2]
    ours = selection_amplified_gaussian_rdp(selection_probability=q, noise_multiplier=z, steps=1)[
        ORDER_2
    ]
    assert exact > 5 * poisson
    assert exact <= ours + 1e-9
    assert exact == pytest.approx(ours, rel=1e-3)  # the bound is attained as R moves away
    # and with R at mu (the add/remove structure) it falls back to the Poisson value
    near = renyi_divergence(
        mixture(q, 1.0, 0.0, z), lambda x: float(stats.norm.logpdf(x, 0.0, z)), alpha, [0.0, 1.0]
    )
    assert near == pytest.approx(poisson, rel=1e-6)


@pytest.mark.parametrize("q", [0.001, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("z", [0.3, 1.0, 4.0])
def test_joint_convexity_never_below_poisson_subsampling(q, z):
    ours = selection_amplified_gaussian_rdp(selection_probability=q, noise_multiplier=z, steps=3)
    poisson = sampled_gaussian_rdp(sample_rate=q, noise_multiplier=z, steps=3)
    assert np.all(ours >= poisson * (1 - 1e-9))


@pytest.mark.parametrize("subsets", [1, 5, 10, 50])
@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0, 4.0, 50.0])
@pytest.mark.parametrize("b_max", [1, 16])
@pytest.mark.parametrize("conversion", list(Conversion))
def test_valid_bound_is_never_below_the_paper_value(subsets, sigma, b_max, conversion):
    # z = sigma / (2 B_max) <= sigma / 2 and joint convexity >= Poisson subsampling: the valid
    # bound can only be larger, for every B_max >= 1 (equal RDP only for q = 1, B_max = 1).
    schedule = {"subsets": subsets, "steps": 60, "noise_multiplier": sigma, "delta": 1e-3}
    valid = dp2vae_epsilon(n_train=100, max_batch_size=b_max, conversion=conversion, **schedule)
    paper = paper_theorem_3_1_epsilon(conversion=conversion, **schedule)
    assert valid >= paper * (1 - 1e-9)


def test_monotonic():
    sigmas = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
    eps = [dp2vae_epsilon(**RUN, noise_multiplier=s) for s in sigmas]
    assert all(a > b for a, b in zip(eps, eps[1:], strict=False))
    by_k = [dp2vae_epsilon(**{**RUN, "subsets": k}, noise_multiplier=4.0) for k in (1, 5, 10)]
    assert by_k[0] > by_k[1] > by_k[2]
    by_b = [dp2vae_epsilon(**{**RUN, "max_batch_size": b}, noise_multiplier=4.0) for b in (1, 4)]
    assert by_b[0] < by_b[1]
    paper = [
        paper_theorem_3_1_epsilon(subsets=5, steps=125, noise_multiplier=s, delta=0.02)
        for s in sigmas
    ]
    assert all(a > b for a, b in zip(paper, paper[1:], strict=False))


def test_zero_noise_is_no_privacy():
    assert dp2vae_epsilon(**RUN, noise_multiplier=0.0) == math.inf
    assert step_sensitivity(max_batch_size=16) == 32.0


@pytest.mark.parametrize("target", [2.0, 10.0, 100.0])
def test_calibration_round_trips(target):
    run = {**RUN, "steps": 40, "max_batch_size": 4}
    sigma = dp2vae_noise_for_epsilon(target_epsilon=target, **run)
    assert dp2vae_epsilon(**run, noise_multiplier=sigma) <= target
    assert dp2vae_epsilon(**run, noise_multiplier=sigma * (1 - 1e-4)) > target


def test_claim():
    claim = dp2vae_claim(n_train=50, subsets=5, steps=125, noise_multiplier=4.0, max_batch_size=16)
    assert claim.delta == 1 / 50
    assert claim.epsilon == dp2vae_epsilon(**RUN, noise_multiplier=4.0)
    assert claim.extra["epsilon_classic"] >= claim.extra["epsilon_improved"] == claim.epsilon
    assert claim.extra["epsilon_paper_theorem_3_1"] == paper_theorem_3_1_epsilon(
        subsets=5, steps=125, noise_multiplier=4.0, delta=1 / 50
    )
    assert claim.extra["epsilon_paper_theorem_3_1"] < claim.epsilon
    assert "the DP2-VAE paper's Theorem 3.1: NOT a bound for this code" in claim.extra["paper_note"]
    assert claim.extra["effective_noise_multiplier"] == 4.0 / 32
    assert claim.method == "dp2vae-joint-convexity-rdp/improved"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"noise_multiplier": -1.0}, "noise_multiplier must be a finite number >= 0, got -1.0"),
        ({"noise_multiplier": math.nan}, "noise_multiplier must be a finite number >= 0, got nan"),
        ({"subsets": 51}, "got subsets=51 with n_train=50"),
        ({"subsets": 0}, "subsets must be an integer >= 1, got 0"),
        ({"steps": 0}, "steps must be an integer >= 1, got 0"),
        ({"max_batch_size": 0}, "max_batch_size must be an integer >= 1, got 0"),
        ({"delta": math.nan}, "delta must lie in the open interval"),
        ({"conversion": "exact"}, "unknown conversion 'exact'"),
    ],
)
def test_bad_input_is_refused(change, message):
    kwargs = {**RUN, "noise_multiplier": 1.0, **change}
    with pytest.raises(ValueError, match=message):
        dp2vae_epsilon(**kwargs)
    with pytest.raises(ValueError, match=message):
        dp2vae_claim(**kwargs)


def test_bad_calibration_target_is_refused():
    with pytest.raises(ValueError, match="target_epsilon must be a finite number > 0, got nan"):
        dp2vae_noise_for_epsilon(target_epsilon=math.nan, **RUN)
    with pytest.raises(ValueError, match="got subsets=60"):
        dp2vae_noise_for_epsilon(target_epsilon=1.0, **{**RUN, "subsets": 60})


def test_bad_selection_probability_is_refused():
    with pytest.raises(ValueError, match="selection_probability must lie in \\(0, 1\\], got 0"):
        selection_amplified_gaussian_rdp(selection_probability=0, noise_multiplier=1.0, steps=1)
