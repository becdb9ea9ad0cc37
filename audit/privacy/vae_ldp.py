"""Epsilon of VAE-LDP (Weggenmann et al., as used in paper 003): a Gaussian mechanism on the
encoder mean, bounded to [-3, 3]^d, with noise std at least sigma.

Two conversions of the same noise: the classic Gaussian-mechanism formula paper 003 reports,
and the exact analytic Gaussian mechanism of Balle and Wang (2018, "Improving the Gaussian
mechanism for differential privacy: analytical calibration and optimal denoising", Theorem 8).
"""

from __future__ import annotations

import math

from scipy import optimize, special

from audit.privacy.claim import GaussianConversion, PrivacyClaim
from core.validation import check_delta, check_positive, check_positive_int, parse_enum

#: The encoder mean is bounded by ``MEAN_BOUND * tanh`` (paper 003, Section 2.3).
MEAN_BOUND = 3.0


def vae_ldp_sensitivity(*, latent_dim: int, mean_bound: float = MEAN_BOUND) -> float:
    """L2 sensitivity of a mean in [-mean_bound, mean_bound]^d: the box's diameter 2 b sqrt(d)."""
    check_positive_int("latent_dim", latent_dim)
    return 2 * check_positive("mean_bound", mean_bound) * math.sqrt(latent_dim)


def gaussian_epsilon_classic(*, sigma: float, sensitivity: float, delta: float) -> float:
    """``eps = sensitivity * sqrt(2 ln(1.25/delta)) / sigma`` (paper 003, Def. 3 and Sec. 2.3).

    Notes:
        The theorem behind it (Dwork and Roth, Thm. A.1) needs eps < 1; above that the number is
        a label, not a guarantee (see :func:`gaussian_epsilon_analytic`).
    """
    check_positive("sigma", sigma)
    check_positive("sensitivity", sensitivity)
    check_delta(delta)
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / sigma


def _log_profile(epsilon: float, ratio: float) -> float:
    """log of Phi(r/2 - eps/r) - e^eps Phi(-r/2 - eps/r), r = sensitivity/sigma; -inf if <= 0."""
    log_a = special.log_ndtr(ratio / 2 - epsilon / ratio)
    log_b = epsilon + special.log_ndtr(-ratio / 2 - epsilon / ratio)
    if log_b >= log_a:
        return -math.inf
    return log_a + math.log1p(-math.exp(log_b - log_a))


def analytic_gaussian_delta(*, epsilon: float, sigma: float, sensitivity: float) -> float:
    """The smallest delta for which the Gaussian mechanism is (epsilon, delta)-DP.

    Balle and Wang 2018, Theorem 8: ``Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D)``
    with D the L2 sensitivity and s the noise std; evaluated in log space, so large epsilon
    neither overflows nor cancels.
    """
    if not epsilon >= 0:
        raise ValueError(f"epsilon must be a number >= 0, got {epsilon!r}")
    ratio = check_positive("sensitivity", sensitivity) / check_positive("sigma", sigma)
    return math.exp(_log_profile(float(epsilon), ratio))


def gaussian_epsilon_analytic(*, sigma: float, sensitivity: float, delta: float) -> float:
    """The smallest epsilon with ``analytic_gaussian_delta(epsilon) <= delta`` (0 if eps = 0 does).

    Found by Brent's method on the log privacy profile; the returned value satisfies the
    condition (it is nudged up by relative 1e-12 steps if the root lands just below).
    """
    ratio = check_positive("sensitivity", sensitivity) / check_positive("sigma", sigma)
    delta = check_delta(delta)
    log_delta = math.log(delta)

    def gap(eps: float) -> float:
        return max(_log_profile(eps, ratio), -1e6) - log_delta

    if gap(0.0) <= 0:
        return 0.0
    high = 1.0
    while gap(high) > 0:
        high *= 2
    eps = optimize.brentq(gap, 0.0, high, xtol=1e-12, rtol=1e-14)
    while math.exp(_log_profile(eps, ratio)) > delta:  # the same test analytic_gaussian_delta makes
        eps = eps * (1 + 1e-12) + 1e-15
    return eps


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
        max(sigma, v) >= sigma is counted as sigma, as paper 003 does.
    """
    sensitivity = vae_ldp_sensitivity(latent_dim=latent_dim, mean_bound=mean_bound)
    conversion = parse_enum(GaussianConversion, conversion, "conversion")
    if conversion is GaussianConversion.CLASSIC:
        return gaussian_epsilon_classic(sigma=sigma, sensitivity=sensitivity, delta=delta)
    return gaussian_epsilon_analytic(sigma=sigma, sensitivity=sensitivity, delta=delta)


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
    paper 003's number (its Table 2), a bound only where it is below 1.
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
            "epsilon_classic is paper 003's formula Delta*sqrt(2 ln(1.25/delta))/sigma (its "
            "Table 2), outside its validity (eps < 1): NOT a bound, epsilon_analytic holds"
        )
    return PrivacyClaim(
        epsilon=both[conversion],
        delta=delta,
        method=f"vae-ldp/{conversion.value}-gaussian",
        accountant="gaussian",
        extra=extra,
    )
