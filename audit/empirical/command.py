"""The ``audit`` subcommand: claimed epsilon against what an auditor can prove, for one mechanism
and one parameter value; the last line printed is the bare lower bound.

  benchmark.py audit --dataset NAME --mech MECH --grid VALUE [--profile P] [--canaries m]
                     [--draws M] [--seed S] [--canary-kind gradient|input]

A usage error raises ValueError, which ``benchmark.main`` prints as one 'error:' line (status 2).
"""

from __future__ import annotations

import argparse
import logging
import math
import warnings
from collections.abc import Sequence
from pathlib import Path

from audit.empirical.local import DRAWS, LocalAudit, Pattern

AUDITED = ("cdp", "ldp", "vae-ldp")


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors become ValueError (one line, status 2, in benchmark.main)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(f"{message} (see {self.prog} --help)")


def build_audit_parser() -> argparse.ArgumentParser:
    from audit.config import ProfileName
    from audit.datasets import dataset_names

    p = _Parser(
        prog="benchmark.py audit",
        description="Empirical epsilon lower bound for one mechanism and parameter value. "
        "ldp and vae-ldp: black-box threshold tests on worst-case inputs (M draws each, "
        "Clopper-Pearson at 95 %%); cdp: the one-run audit of Steinke, Nasr and Jagielski "
        "(2023) with m canaries in one extra DP-Adam run. The last line is the bare bound.",
    )
    p.add_argument("--dataset", default="lfw-subset", help=f"dataset: {', '.join(dataset_names())}")
    p.add_argument("--mech", required=True, choices=AUDITED, help="the mechanism to audit")
    p.add_argument(
        "--grid",
        required=True,
        type=float,
        metavar="VALUE",
        help="the parameter: noise multiplier z (cdp), eps_i (ldp), sigma (vae-ldp)",
    )
    p.add_argument(
        "--profile",
        default=ProfileName.QUICK.value,
        choices=[x.value for x in ProfileName],
        help="sets the cell's training settings and the default M "
        + ", ".join(f"{k} {v:.0e}" for k, v in DRAWS.items()),
    )
    p.add_argument("--canaries", type=int, default=None, metavar="m", help="cdp: canaries m")
    p.add_argument(
        "--canary-kind",
        default="gradient",
        choices=("gradient", "input"),
        help="cdp: gradient canaries (the implementation) or input canaries scored by the "
        "reconstruction attack (default gradient)",
    )
    p.add_argument("--k-plus", type=int, default=None, help="cdp: top scores guessed in (m/4)")
    p.add_argument("--k-minus", type=int, default=None, help="cdp: bottom scores guessed out (m/4)")
    p.add_argument(
        "--delta",
        type=float,
        default=None,
        help="cdp, vae-ldp: the delta at which both the claim and the bound are computed "
        "(default 1/N_train for cdp, 1/|D| for vae-ldp); the one-run audit proves nothing once "
        "2 m delta >= 0.05",
    )
    p.add_argument("--draws", type=int, default=None, metavar="M", help="ldp, vae-ldp: draws M")
    p.add_argument("--seed", type=int, default=0, help="root seed (cell and audit)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (cdp)")
    p.add_argument("--data-home", type=Path, default=None, help="where LFW/MotionSense live")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    return p


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _cell_and_data(args: argparse.Namespace):
    from audit.config import CellConfig, MechanismName, ProfileName, profile_for
    from audit.datasets import dataset_modality, load_dataset, stratified_split
    from audit.mechanisms import build_options, get_mechanism
    from audit.pipeline import cell_data

    mech = MechanismName(args.mech)
    profile = profile_for(ProfileName(args.profile), dataset_modality(args.dataset))
    cell = CellConfig(
        dataset=args.dataset,
        mech=mech,
        param_name=get_mechanism(mech).param_name,
        param_value=args.grid,
        seed=args.seed,
        profile=profile,
        mech_options=dict(build_options([mech], {"delta": args.delta})).get(mech),
    )
    dataset = load_dataset(args.dataset, data_home=args.data_home)
    split = stratified_split(dataset.y, fractions=dataset.split_fractions, seed=args.seed)
    return cell, cell_data(dataset, split, cell)


def _local_lines(audit: LocalAudit) -> list[str]:
    b = audit.bound
    claims = ", ".join(f"{k} {v:.6g}" for k, v in audit.claims.items())
    return [
        f"{audit.mechanism} [{audit.pair}]: claims {claims}; compared with {audit.claim_kind}",
        f"  lower bound {b.epsilon:.6g} (claim {audit.claim:.6g}); threshold test, M = "
        f"{audit.draws} draws per input (threshold from the first half, Clopper-Pearson on the "
        f"second), FPR <= {b.fpr_hi:.4g}, FNR <= {b.fnr_hi:.4g}, delta {b.delta:.6g}, joint "
        f"confidence {b.confidence:.0%} (Bonferroni); ceiling {audit.ceiling:.6g}; "
        f"{audit.seconds:.1f} s",
    ]


def _run_local(args: argparse.Namespace) -> tuple[list[str], float]:
    from audit.empirical.local import audit_laplace_series, audit_pixelization, audit_vae_ldp
    from audit.mechanisms.ldp import default_neighborhood
    from core.records import Modality, record_modality

    draws = DRAWS[args.profile] if args.draws is None else args.draws
    if draws < 2:
        raise ValueError(f"--draws must be >= 2, got {draws!r}")
    cell, data = _cell_and_data(args)
    if args.mech == "vae-ldp":
        delta = 1.0 / data.n_total if args.delta is None else args.delta
        audit = audit_vae_ldp(
            sigma=args.grid,
            latent_dim=cell.profile.latent_dim,
            delta=delta,
            draws=draws,
            seed=args.seed,
        )
        source = f"1/|D| with |D| = {data.n_total}" if args.delta is None else "--delta"
        return [f"delta = {delta:.6g} ({source})", *_local_lines(audit)], audit.epsilon
    if record_modality(data.shape) is Modality.SERIES:
        audit = audit_laplace_series(eps_i=args.grid, draws=draws, seed=args.seed)
        return _local_lines(audit), audit.epsilon
    c, h, w = data.shape
    lines: list[str] = []
    audits = {}
    for pattern in (Pattern.NEIGHBOURHOOD, Pattern.ANY_TWO):
        audits[pattern] = audit_pixelization(
            eps_i=args.grid,
            shape=(c, h, w),
            neighborhood=default_neighborhood(h, w),
            pattern=pattern,
            draws=draws,
            seed=args.seed,
        )
        lines += _local_lines(audits[pattern])
    lines.append("bound against the any-two-records claim (the epsilon column):")
    return lines, audits[Pattern.ANY_TWO].epsilon


def _run_cdp(args: argparse.Namespace) -> tuple[list[str], float]:
    from audit.empirical.one_run import OneRunSettings, audit_one_run
    from audit.mechanisms import Context
    from core.progress import null_progress

    default_m = 1000 if args.canary_kind == "gradient" else 100
    settings = OneRunSettings(
        kind=args.canary_kind,
        canaries=default_m if args.canaries is None else args.canaries,
        k_plus=args.k_plus,
        k_minus=args.k_minus,
        seed=args.seed,
    )
    cell, data = _cell_and_data(args)
    audit = audit_one_run(cell, data, Context(device=args.device, progress=null_progress), settings)
    b, claim = audit.bound, audit.claim
    lines = [
        f"cdp z={args.grid:g}: claimed epsilon {claim.epsilon:.6g} at delta {claim.delta:.6g} "
        f"({claim.method}, N_train {int(claim.extra.get('n_train', len(data.train[0])))})",
        f"  {audit.kind.value} canaries: lower bound {b.epsilon:.6g}; one run (Steinke et al. "
        f"2023, delta term included), m = {b.m}, guesses k+ = {audit.k_plus}, k- = "
        f"{audit.k_minus} (r = {b.r}), {b.v} right, confidence {b.confidence:.0%}; ceiling "
        f"(all r right) {b.ceiling:.6g}",
        f"  score: {audit.score}",
        *(
            f"  {k}: {v:.6g}" if isinstance(v, float) else f"  {k}: {v}"
            for k, v in audit.extra.items()
        ),
        f"  extra training run {audit.train_seconds:.1f} s; audit {audit.seconds:.1f} s",
    ]
    if b.ceiling == 0:
        lines.append(
            f"  note: 2 m delta = {2 * b.m * b.delta:.3g} >= 0.05, so no m = {b.m} audit can "
            "prove anything at this delta; use fewer --canaries or a smaller --delta"
        )
    return lines, b.epsilon


def run_audit(argv: Sequence[str]) -> str:
    """The subcommand's text; its last line is the bare lower bound.

    Raises:
        ValueError: bad options or values (quoted).
    """
    args = build_audit_parser().parse_args(list(argv))
    _positive("--canaries", args.canaries)
    _positive("--draws", args.draws)
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed!r}")
    if not (math.isfinite(args.grid) and args.grid > 0):
        raise ValueError(f"--grid must be a positive finite number, got {args.grid!r}")
    if args.mech != "cdp" and (args.canaries, args.k_plus, args.k_minus) != (None, None, None):
        raise ValueError(f"--canaries/--k-plus/--k-minus apply to cdp only, not {args.mech!r}")
    if args.delta is not None and not 0 < args.delta < 1:
        raise ValueError(f"--delta must lie in (0, 1), got {args.delta!r}")
    if args.mech == "ldp" and args.delta is not None:
        raise ValueError("--delta does not apply to ldp (pure eps-DP, delta = 0)")
    if args.mech == "cdp" and args.draws is not None:
        raise ValueError("--draws applies to ldp and vae-ldp; cdp takes --canaries")
    level = logging.WARNING if args.verbose == 0 else logging.INFO
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", force=True)
    if args.verbose == 0:
        warnings.filterwarnings("ignore")
    lines, bound = _run_cdp(args) if args.mech == "cdp" else _run_local(args)
    return "\n".join([*lines, f"{bound:.10g}"])


def audit_main(argv: Sequence[str]) -> int:
    print(run_audit(argv))
    return 0
