"""Privacy accounting and local-DP mechanisms: what each mechanism claims, and the LDP noise.

Modules: ``claim`` (PrivacyClaim, conversions), ``rdp`` (Opacus RDP and its conversions),
``accountant`` (stateful, for training loops), ``cdp`` (DP-Adam), ``termwise`` (paper 004),
``vae_ldp`` (Gaussian mechanism, classic and analytic), ``pixelization`` (Fan), ``laplace``
(time series), ``noise`` (seeded Laplace sampler), ``command`` (the ``epsilon`` subcommand).
"""

from audit.privacy.accountant import PrivacyAccountant
from audit.privacy.cdp import (
    cdp_claim,
    dp_sgd_epsilon,
    history_claim,
    noise_multiplier_for_epsilon,
)
from audit.privacy.claim import Conversion, GaussianConversion, PrivacyClaim
from audit.privacy.laplace import laplace_claim, laplace_perturb_series
from audit.privacy.noise import sample_laplace
from audit.privacy.pixelization import (
    pixelization_claim,
    pixelization_epsilon,
    pixelization_scale,
    pixelize,
    valid_cell_sizes,
)
from audit.privacy.rdp import RDP_ORDERS, epsilon_from_history
from audit.privacy.termwise import (
    TermwiseAccounting,
    paper_kappa,
    paper_kappa_epsilon,
    release_noise_multipliers,
    termwise_claim,
    termwise_epsilon,
    termwise_noise_for_epsilon,
)
from audit.privacy.vae_ldp import (
    analytic_gaussian_delta,
    gaussian_epsilon_analytic,
    gaussian_epsilon_classic,
    vae_ldp_claim,
    vae_ldp_epsilon,
    vae_ldp_sensitivity,
)

__all__ = [
    "RDP_ORDERS",
    "Conversion",
    "GaussianConversion",
    "PrivacyAccountant",
    "PrivacyClaim",
    "TermwiseAccounting",
    "analytic_gaussian_delta",
    "cdp_claim",
    "dp_sgd_epsilon",
    "epsilon_from_history",
    "gaussian_epsilon_analytic",
    "gaussian_epsilon_classic",
    "history_claim",
    "laplace_claim",
    "laplace_perturb_series",
    "noise_multiplier_for_epsilon",
    "paper_kappa",
    "paper_kappa_epsilon",
    "pixelization_claim",
    "pixelization_epsilon",
    "pixelization_scale",
    "pixelize",
    "release_noise_multipliers",
    "sample_laplace",
    "termwise_claim",
    "termwise_epsilon",
    "termwise_noise_for_epsilon",
    "valid_cell_sizes",
    "vae_ldp_claim",
    "vae_ldp_epsilon",
    "vae_ldp_sensitivity",
]
