"""Epsilon of VAE-LDP (Weggenmann et al., as used in the trade-off paper): a Gaussian mechanism on
the encoder mean, bounded to [-3, 3]^d, with noise std at least sigma.

Each record's release is one Gaussian mechanism (:func:`vae_ldp_event`), read by the accountant
under two conversions of the same noise: the classic Gaussian-mechanism formula the trade-off paper
reports, and the exact analytic Gaussian mechanism of Balle and Wang (2018, Theorem 8);
see :mod:`audit.privacy.gaussian`.
"""

from __future__ import annotations

import math

from audit.privacy import accountant
from audit.privacy.claim import GaussianConversion, PrivacyClaim
from audit.privacy.events import GaussianEvent
from dpvae_core.validation import check_positive, check_positive_int, parse_enum

#: The encoder mean is bounded by ``MEAN_BOUND * tanh`` (the trade-off paper, Section 2.3).
MEAN_BOUND = 3.0


def vae_ldp_sensitivity(*, latent_dim: int, mean_bound: float = MEAN_BOUND) -> float:
    """L2 sensitivity of a mean in [-mean_bound, mean_bound]^d: the box's diameter 2 b sqrt(d)."""
    check_positive_int("latent_dim", latent_dim)
    return 2 * check_positive("mean_bound", mean_bound) * math.sqrt(latent_dim)


def vae_ldp_event(
    *, sigma: float, latent_dim: int, mean_bound: float = MEAN_BOUND
) -> GaussianEvent:
    """One record's release: noise std ``sigma`` on a mean of sensitivity ``2 b sqrt(d)``."""
    sensitivity = vae_ldp_sensitivity(latent_dim=latent_dim, mean_bound=mean_bound)
    return GaussianEvent(check_positive("sigma", sigma), sensitivity)


def vae_ldp_epsilon(
    *,
    sigma: float,
    latent_dim: int,
    delta: float,
    conversion: GaussianConversion | str = GaussianConversion.CLASSIC,
    mean_bound: float = MEAN_BOUND,
) -> float:
    """Per-record epsilon of VAE-LDP with noise bound ``sigma`` and ``latent_dim`` d.

    Notes:
        Sensitivity 2 * 3 * sqrt(d): any two records' encoder means differ by at most the
        diameter of [-3, 3]^d (local DP: every pair of records is neighbouring). Noise std
        max(sigma, v) >= sigma is counted as sigma, as the trade-off paper does.
    """
    event = vae_ldp_event(sigma=sigma, latent_dim=latent_dim, mean_bound=mean_bound)
    return accountant.gaussian_epsilon(event, delta=delta, conversion=conversion)


def vae_ldp_claim(
    *,
    sigma: float,
    latent_dim: int,
    delta: float,
    conversion: GaussianConversion | str = GaussianConversion.ANALYTIC,
    mean_bound: float = MEAN_BOUND,
) -> PrivacyClaim:
    """The VAE-LDP claim; both conversions' epsilons are kept in ``extra``.

    The default, ANALYTIC, is a guarantee for every epsilon (Balle and Wang 2018); CLASSIC is
    the trade-off paper's number (its Table 2), a bound only where it is below 1.
    """
    conversion = parse_enum(GaussianConversion, conversion, "conversion")
    both = {
        c: vae_ldp_epsilon(
            sigma=sigma, latent_dim=latent_dim, delta=delta, conversion=c, mean_bound=mean_bound
        )
        for c in GaussianConversion
    }
    extra: dict[str, float | str] = {
        "sigma": float(sigma),
        "latent_dim": latent_dim,
        "sensitivity": vae_ldp_sensitivity(latent_dim=latent_dim, mean_bound=mean_bound),
        "epsilon_classic": both[GaussianConversion.CLASSIC],
        "epsilon_analytic": both[GaussianConversion.ANALYTIC],
    }
    if both[GaussianConversion.CLASSIC] >= 1:
        extra["epsilon_classic_note"] = (
            "epsilon_classic is the trade-off paper's formula Delta*sqrt(2 ln(1.25/delta))/sigma "
            "(its Table 2), outside its validity (eps < 1): NOT a bound, epsilon_analytic holds"
        )
    return PrivacyClaim(
        epsilon=both[conversion],
        delta=delta,
        method=f"vae-ldp/{conversion.value}-gaussian",
        accountant="gaussian",
        extra=extra,
        event=vae_ldp_event(sigma=sigma, latent_dim=latent_dim, mean_bound=mean_bound),
    )
