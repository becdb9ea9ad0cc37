"""The ``epsilon`` subcommand: privacy accounting on demand; the last line is a bare number."""

from __future__ import annotations

import argparse
import math
from enum import Enum

from audit.privacy.cdp import cdp_claim, noise_multiplier_for_epsilon
from audit.privacy.claim import Conversion, GaussianConversion, PrivacyClaim
from audit.privacy.pixelization import pixelization_claim
from audit.privacy.termwise import (
    PARTITION_SENSITIVITY_SHARED,
    TermwiseAccounting,
    check_run_accounting,
    termwise_claim,
    termwise_noise_for_epsilon,
)
from audit.privacy.vae_ldp import vae_ldp_claim
from core.validation import check_positive_int, parse_enum


class EpsilonMech(str, Enum):
    """Mechanisms the ``epsilon`` subcommand accounts."""

    CDP = "cdp"
    CDP_TERMWISE = "cdp-termwise"
    VAE_LDP = "vae-ldp"
    LDP = "ldp"


_CDP = {EpsilonMech.CDP, EpsilonMech.CDP_TERMWISE}
#: Which mechanisms each option applies to (argparse dest -> mechanisms).
_OPTION_MECHS: dict[str, set[EpsilonMech]] = {
    "n_train": _CDP,
    "batch_size": _CDP,
    "epochs": _CDP,
    "noise_multiplier": _CDP,
    "target_epsilon": _CDP,
    "delta": _CDP | {EpsilonMech.VAE_LDP},
    "conversion": _CDP | {EpsilonMech.VAE_LDP},
    "termwise_accounting": {EpsilonMech.CDP_TERMWISE},
    "partition_sensitivity": {EpsilonMech.CDP_TERMWISE},
    "sigma": {EpsilonMech.VAE_LDP},
    "latent_dim": {EpsilonMech.VAE_LDP},
    "eps_i": {EpsilonMech.LDP},
    "channels": {EpsilonMech.LDP},
    "height": {EpsilonMech.LDP},
    "width": {EpsilonMech.LDP},
    "pixel_cell": {EpsilonMech.LDP},
    "neighborhood": {EpsilonMech.LDP},
    "n_records": {EpsilonMech.LDP},
}
_REQUIRED: dict[EpsilonMech, tuple[str, ...]] = {
    EpsilonMech.CDP: ("n_train", "batch_size", "epochs"),
    EpsilonMech.CDP_TERMWISE: ("n_train", "batch_size", "epochs"),
    EpsilonMech.VAE_LDP: ("sigma", "latent_dim", "delta"),
    EpsilonMech.LDP: ("eps_i", "height", "width"),
}


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def add_epsilon_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the ``epsilon`` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser(
        "epsilon",
        allow_abbrev=False,
        help="compute a mechanism's epsilon (or the noise multiplier for a target epsilon)",
        description="Privacy accounting on demand. Prints how the number was computed; the last "
        "line is the bare number (epsilon, or the noise multiplier with --target-epsilon).",
    )
    p.add_argument(
        "--mech",
        default=EpsilonMech.CDP.value,
        choices=[m.value for m in EpsilonMech],
        help="cdp: DP-Adam (Poisson-sampled Gaussian, Opacus RDP); cdp-termwise: "
        "term-wise DP-Adam of paper 004; vae-ldp: VAE-LDP Gaussian mechanism; "
        "ldp: Fan's image pixelization (any two records: eps = channels * eps_i * H * W / m). "
        "Default: cdp",
    )
    cdp = p.add_argument_group("cdp and cdp-termwise")
    cdp.add_argument("--n-train", metavar="N", type=int, help="number of training records N_train")
    cdp.add_argument(
        "--batch-size",
        metavar="B",
        type=int,
        help="expected batch size B; sample rate q = B / N_train",
    )
    cdp.add_argument(
        "--epochs",
        metavar="E",
        type=int,
        help="epochs; steps = ceil(epochs * N_train / B) (paper 003's convention)",
    )
    noise = cdp.add_mutually_exclusive_group()
    noise.add_argument(
        "--noise-multiplier",
        metavar="Z",
        type=float,
        help="noise multiplier z (noise std / clip norm); prints epsilon",
    )
    noise.add_argument(
        "--target-epsilon",
        metavar="EPS",
        type=float,
        help="target epsilon; prints the smallest noise multiplier reaching it",
    )
    cdp.add_argument(
        "--delta",
        metavar="D",
        type=float,
        help="delta in (0, 1); cdp default 1/N_train, required for vae-ldp",
    )
    cdp.add_argument(
        "--conversion",
        metavar="NAME",
        help="cdp: RDP-to-DP conversion, improved (Opacus, default) or classic "
        "(min over orders of rdp + log(1/delta)/(order-1), paper 003's Table 2); "
        "vae-ldp: analytic (Balle and Wang 2018, a bound for every epsilon; default) "
        "or classic (paper 003's formula, a bound only below 1)",
    )
    cdp.add_argument(
        "--termwise-accounting",
        choices=[a.value for a in TermwiseAccounting],
        help="cdp-termwise: stacked (the default and the only value accepted): both terms "
        "share one Poisson batch, accounted as one sampled Gaussian on the stacked pair with "
        "noise multiplier s/sqrt(1+K^2), s/sqrt(5) at the default K = 2; composed (two "
        "independently sampled Gaussians) is refused, it is no bound for a shared batch",
    )
    cdp.add_argument(
        "--partition-sensitivity",
        metavar="K",
        type=float,
        help="cdp-termwise: sensitivity of the batch-wise term in units of C2, in "
        "[1, 2]: 2 (default) when a partition can hold several records, 1 when each "
        "holds at most one",
    )
    vae = p.add_argument_group("vae-ldp")
    vae.add_argument(
        "--sigma", metavar="S", type=float, help="noise bound sigma of the perturbation VAE"
    )
    vae.add_argument(
        "--latent-dim",
        metavar="d",
        type=int,
        help="latent dimensions d; sensitivity 2 * 3 * sqrt(d)",
    )
    ldp = p.add_argument_group("ldp")
    ldp.add_argument(
        "--eps-i", metavar="E", type=float, help="epsilon eps_i of one channel's pixelization"
    )
    ldp.add_argument(
        "--channels",
        metavar="C",
        type=int,
        help="channels perturbed independently (default 3, RGB)",
    )
    ldp.add_argument("--height", metavar="H", type=int, help="image height in pixels")
    ldp.add_argument("--width", metavar="W", type=int, help="image width in pixels")
    ldp.add_argument(
        "--pixel-cell",
        metavar="b",
        type=int,
        help="pixelization cell side b, dividing H and W (default 1); epsilon does not depend "
        "on it",
    )
    ldp.add_argument(
        "--neighborhood",
        "--m",
        dest="neighborhood",
        metavar="m",
        type=int,
        help="Fan's neighbourhood m in pixels, 1..H*W (default round(sqrt(H*W)), paper 003's)",
    )
    ldp.add_argument(
        "--n-records",
        metavar="N",
        type=int,
        help="|D|: also show paper 003's dataset-wide sum |D| * epsilon",
    )


def _check_options(ns: argparse.Namespace, mech: EpsilonMech) -> None:
    for dest, mechs in _OPTION_MECHS.items():
        if getattr(ns, dest, None) is not None and mech not in mechs:
            allowed = ", ".join(sorted(m.value for m in mechs))
            raise ValueError(
                f"{_flag(dest)} does not apply to --mech {mech.value} (only {allowed})"
            )
    missing = [_flag(d) for d in _REQUIRED[mech] if getattr(ns, d, None) is None]
    if missing:
        raise ValueError(f"--mech {mech.value} needs {', '.join(missing)}")
    if mech in _CDP and (ns.noise_multiplier is None) == (ns.target_epsilon is None):
        raise ValueError(
            f"--mech {mech.value} needs exactly one of --noise-multiplier, --target-epsilon"
        )


def _describe(claim: PrivacyClaim) -> list[str]:
    lines = [
        f"method: {claim.method} (accountant: {claim.accountant})",
        f"delta: {claim.delta:.6g}",
    ]
    lines += [
        f"{key}: {value:.6g}" if isinstance(value, float) else f"{key}: {value}"
        for key, value in claim.extra.items()
    ]
    lines.append(f"epsilon: {claim.epsilon:.6g}")
    return lines


def _run_cdp(ns: argparse.Namespace, mech: EpsilonMech) -> tuple[list[str], float]:
    check_positive_int("n_train", ns.n_train)
    delta = 1 / ns.n_train if ns.delta is None else ns.delta
    conversion = parse_enum(Conversion, ns.conversion or Conversion.IMPROVED.value, "conversion")
    schedule = {
        "n_train": ns.n_train,
        "batch_size": ns.batch_size,
        "epochs": ns.epochs,
        "delta": delta,
        "conversion": conversion,
    }
    termwise = {}
    if mech is EpsilonMech.CDP_TERMWISE:
        termwise = {
            "batch_clip_norm": 1.0,  # any C2 > 0: the accounting depends only on C2 > 0
            "accounting": check_run_accounting(
                ns.termwise_accounting or TermwiseAccounting.STACKED.value
            ),
            "partition_sensitivity": PARTITION_SENSITIVITY_SHARED
            if ns.partition_sensitivity is None
            else ns.partition_sensitivity,
        }
    z = ns.noise_multiplier
    if ns.target_epsilon is not None:
        solve = termwise_noise_for_epsilon if termwise else noise_multiplier_for_epsilon
        z = solve(target_epsilon=ns.target_epsilon, **schedule, **termwise)
    claim_of = termwise_claim if termwise else cdp_claim
    claim = claim_of(**schedule, **termwise, noise_multiplier=z)
    lines = [f"mechanism: {mech.value}", *_describe(claim)]
    if ns.target_epsilon is not None:
        lines.append(f"noise multiplier for target epsilon {ns.target_epsilon:g}:")
        return lines, z
    return lines, claim.epsilon


def _pixelization(ns: argparse.Namespace) -> PrivacyClaim:
    height = check_positive_int("height", ns.height)
    width = check_positive_int("width", ns.width)
    m = ns.neighborhood
    return pixelization_claim(
        eps_i=ns.eps_i,
        channels=3 if ns.channels is None else ns.channels,
        height=height,
        width=width,
        cell=1 if ns.pixel_cell is None else ns.pixel_cell,
        neighborhood=max(1, round(math.sqrt(height * width))) if m is None else m,
        n_records=ns.n_records,
    )


def run_epsilon(namespace: argparse.Namespace) -> str:
    """The ``epsilon`` subcommand's text; its last line is the bare number.

    Raises:
        ValueError: options that do not fit the mechanism, missing or bad values.
    """
    mech = parse_enum(EpsilonMech, namespace.mech, "mechanism")
    _check_options(namespace, mech)
    if mech in _CDP:
        lines, value = _run_cdp(namespace, mech)
    elif mech is EpsilonMech.VAE_LDP:
        conversion = parse_enum(
            GaussianConversion,
            namespace.conversion or GaussianConversion.ANALYTIC.value,
            "conversion",
        )
        claim = vae_ldp_claim(
            sigma=namespace.sigma,
            latent_dim=namespace.latent_dim,
            delta=namespace.delta,
            conversion=conversion,
        )
        lines, value = [f"mechanism: {mech.value}", *_describe(claim)], claim.epsilon
    else:
        claim = _pixelization(namespace)
        lines, value = [f"mechanism: {mech.value}", *_describe(claim)], claim.epsilon
    return "\n".join([*lines, f"{value:.10g}"])
