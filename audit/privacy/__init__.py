"""Privacy accounting, torch-free: what each mechanism releases (events), how much that costs
(the accountant) and what each mechanism claims.

Modules: ``events`` (frozen release descriptions), ``accountant`` (the one reader of events),
``rdp`` (Opacus's RDP analysis and its conversions), ``gaussian`` (the Gaussian mechanism at
delta, classic and analytic), ``calibration`` (noise for a target epsilon), ``claim``
(PrivacyClaim, conversions), ``cdp`` (DP-Adam), ``termwise`` (PriVAE), ``vae_ldp``,
``pixelization`` (Fan), ``laplace`` (time series), ``command`` (the ``epsilon`` subcommand).
The noise itself (torch) is added in ``audit.mechanisms``.
"""

from audit.privacy.accountant import epsilon, gaussian_epsilon, pure_epsilon, rdp, rdp_epsilon
from audit.privacy.claim import Conversion, GaussianConversion, PrivacyClaim
from audit.privacy.dp_sgd_accounting import (
    cdp_claim,
    dp_sgd_epsilon,
    dp_sgd_event,
    noise_multiplier_for_epsilon,
)
from audit.privacy.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    repeated,
)
from audit.privacy.gaussian import (
    analytic_gaussian_delta,
    gaussian_epsilon_analytic,
    gaussian_epsilon_classic,
)
from audit.privacy.laplace import laplace_claim, laplace_event
from audit.privacy.pixelization import (
    pixelization_claim,
    pixelization_epsilon,
    pixelization_event,
    pixelization_scale,
    valid_block_sizes,
)
from audit.privacy.rdp import RDP_ORDERS
from audit.privacy.termwise_accounting import (
    TermwiseAccounting,
    paper_kappa,
    paper_kappa_epsilon,
    release_noise_multipliers,
    termwise_claim,
    termwise_epsilon,
    termwise_event,
    termwise_noise_for_epsilon,
)
from audit.privacy.vae_ldp_accounting import (
    vae_ldp_claim,
    vae_ldp_epsilon,
    vae_ldp_event,
    vae_ldp_sensitivity,
)

__all__ = [
    "RDP_ORDERS",
    "ComposedEvent",
    "Conversion",
    "Event",
    "GaussianConversion",
    "GaussianEvent",
    "LaplaceEvent",
    "PoissonSampledEvent",
    "PrivacyClaim",
    "TermwiseAccounting",
    "analytic_gaussian_delta",
    "cdp_claim",
    "dp_sgd_epsilon",
    "dp_sgd_event",
    "epsilon",
    "gaussian_epsilon",
    "gaussian_epsilon_analytic",
    "gaussian_epsilon_classic",
    "laplace_claim",
    "laplace_event",
    "noise_multiplier_for_epsilon",
    "paper_kappa",
    "paper_kappa_epsilon",
    "pixelization_claim",
    "pixelization_epsilon",
    "pixelization_event",
    "pixelization_scale",
    "pure_epsilon",
    "rdp",
    "rdp_epsilon",
    "release_noise_multipliers",
    "repeated",
    "termwise_claim",
    "termwise_epsilon",
    "termwise_event",
    "termwise_noise_for_epsilon",
    "valid_block_sizes",
    "vae_ldp_claim",
    "vae_ldp_epsilon",
    "vae_ldp_event",
    "vae_ldp_sensitivity",
]
