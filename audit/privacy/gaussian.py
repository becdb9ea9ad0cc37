"""The (non-sampled) Gaussian mechanism's epsilon at delta: the classic formula and the exact
analytic one of Balle and Wang (2018, "Improving the Gaussian mechanism for differential privacy:
analytical calibration and optimal denoising", Theorem 8).

Pure maths on (sigma, sensitivity, delta); :mod:`audit.privacy.accountant` applies it to a
:class:`audit.privacy.events.GaussianEvent`.
"""

from __future__ import annotations

import math

from scipy import optimize, special

from dpvae_core.validation import check_delta, check_positive


def gaussian_epsilon_classic(*, sigma: float, sensitivity: float, delta: float) -> float:
    """``eps = sensitivity * sqrt(2 ln(1.25/delta)) / sigma`` (the trade-off paper, Def. 3 and Sec.
    2.3).

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


def analytic_gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest noise std for which the Gaussian mechanism is (epsilon, delta)-DP.

    Balle and Wang 2018 (the inverse of :func:`analytic_gaussian_delta` in sigma): the bracket
    and Brent's method (``xtol`` 1e-12) of dp_accounting's ``get_sigma_gaussian``, so the two
    agree to far below the empirical audits' 1e-6 (:mod:`audit.empirical.estimators`).
    """
    if not epsilon >= 0:
        raise ValueError(f"epsilon must be a number >= 0, got {epsilon!r}")
    delta = check_delta(delta)
    check_positive("sensitivity", sensitivity)
    if math.isinf(epsilon):
        return 0.0
    log_delta = math.log(delta)

    def gap(sigma: float) -> float:
        return _log_profile(float(epsilon), 1.0 / sigma) - log_delta

    low, high = 0.1, 1.0
    while gap(low) < 0:
        low, high = low / 10, low
    while gap(high) > 0:
        low, high = high, high * 10
    return sensitivity * float(optimize.brentq(gap, low, high, xtol=1e-12))
