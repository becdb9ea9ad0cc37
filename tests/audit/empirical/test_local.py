"""Black-box audits of the local randomizers (real mechanism code, seeded draws)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import audit.empirical.local as local
from audit.empirical.local import (
    Pattern,
    _counts,
    audit_laplace_series,
    audit_pixelization,
    audit_vae_ldp,
    laplace_achievable,
    pixelization_claims,
    pixelization_pair,
)
from audit.mechanisms.laplace_noise import laplace_perturb_series


def test_counts_match_a_loop() -> None:
    rng = np.random.default_rng(0)
    s0, s1 = rng.normal(size=50).round(1), rng.normal(1, size=40).round(1)
    ts = np.array([-1.0, 0.0, 0.3, 0.5, 2.0])
    fp, fn = _counts(s0, s1, ts)
    assert list(fp) == [int((s0 >= t).sum()) for t in ts]
    assert list(fn) == [int((s1 < t).sum()) for t in ts]


def test_pixelization_claims_any_two_is_192_eps_i_on_64x64x3() -> None:
    claims = pixelization_claims(eps_i=2.0, shape=(3, 64, 64), neighborhood=64)
    assert claims == {"any-two": 192 * 2.0, "m-neighbourhood": 3 * 2.0}


@pytest.mark.parametrize(("block", "m"), [(1, 5), (2, 8), (2, 9)])
def test_neighbourhood_pair_differs_in_at_most_m_pixels_per_channel(block: int, m: int) -> None:
    x0, x1, mask = pixelization_pair(
        (3, 4, 4), block=block, neighborhood=m, pattern=Pattern.NEIGHBOURHOOD
    )
    per_channel = (x0 != x1)[0].sum(dim=(1, 2))
    assert per_channel.tolist() == [(m // block**2) * block**2] * 3
    assert bool(((x0 != x1)[0] == mask).all())


def test_neighbourhood_pair_refuses_m_below_one_block() -> None:
    with pytest.raises(ValueError, match="m-neighbourhood"):
        pixelization_pair((1, 4, 4), block=2, neighborhood=3, pattern=Pattern.NEIGHBOURHOOD)


@pytest.mark.statistical
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_laplace_bound_is_tight_and_below_claim(seed: int) -> None:
    # M = 10^5: laplace_achievable gives 0.973; 0.9 leaves ~4 CP standard errors of slack
    audit = audit_laplace_series(eps_i=1.0, draws=10**5, seed=seed)
    assert 0.9 <= audit.epsilon <= audit.claim
    assert laplace_achievable(eps_i=1.0, draws=10**5) == pytest.approx(0.973, abs=2e-3)


@pytest.mark.statistical
def test_laplace_audit_catches_too_little_noise(monkeypatch) -> None:
    # a broken mechanism that adds the noise of eps_i = 2 while claiming 1: bound above claim
    def broken(x, *, eps_i, generator, bounds):
        return laplace_perturb_series(x, eps_i=2 * eps_i, generator=generator, bounds=bounds)

    monkeypatch.setattr(local, "laplace_perturb_series", broken)
    audit = audit_laplace_series(eps_i=1.0, draws=10**5, seed=0)
    assert audit.epsilon > 1.5 > audit.claim


@pytest.mark.statistical
@pytest.mark.parametrize("pattern", list(Pattern))
@pytest.mark.parametrize("eps_i", [0.5, 20.0])
def test_pixelization_bound_below_both_claims(pattern: Pattern, eps_i: float) -> None:
    audit = audit_pixelization(eps_i=eps_i, shape=(2, 4, 4), pattern=pattern, draws=4000, seed=3)
    assert 0 <= audit.epsilon <= min(audit.claim, audit.ceiling)
    assert audit.claims["any-two"] == 2 * eps_i * 16 / 4


@pytest.mark.statistical
def test_pixelization_neighbourhood_bound_near_claim_when_noise_small() -> None:
    # m = 4 of 16 pixels, eps_i = 3: each channel's LR is at most 3 and the test is nearly exact;
    # 2 channels, so claim 6; the bound must come within the CP slack at M = 2 * 10^4
    audit = audit_pixelization(
        eps_i=3.0, shape=(2, 4, 4), pattern=Pattern.NEIGHBOURHOOD, draws=20_000, seed=0
    )
    assert 3.0 < audit.epsilon <= audit.claim == 6.0


@pytest.mark.statistical
@pytest.mark.parametrize("sigma", [30.0, 100.0])
def test_vae_ldp_bound_below_analytic_gaussian(sigma: float) -> None:
    audit = audit_vae_ldp(
        mechanism="vae-ldp", sigma=sigma, latent_dim=16, delta=0.01, draws=10**4, seed=0
    )
    assert 0 < audit.epsilon <= audit.claim
    assert audit.claims["classic-formula"] > 0


def test_vae_ldp_separable_release_reaches_the_ceiling() -> None:
    audit = audit_vae_ldp(
        mechanism="vae-ldp", sigma=0.1, latent_dim=4, delta=0.01, draws=2000, seed=0
    )
    assert audit.epsilon == pytest.approx(audit.ceiling)
    assert audit.ceiling < math.log(1000)
