"""The ``audit`` subcommand: claimed epsilon against what an auditor can prove, for one mechanism
and one parameter value; the last line printed is the bare lower bound.

  benchmark.py audit --dataset NAME --mech MECH --grid VALUE [--profile P] [--canaries m]
                     [--draws M] [--seed S] [--canary-kind gradient|input] [--runs R --out DIR]

A usage error raises ValueError, which :func:`audit.cli.main.main` prints as one 'error:' line
(status 2).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from audit.cli.logs import configure_logging
from audit.cli.parsing import Parser, add_verbosity
from audit.empirical.local import DRAWS, LocalAudit, Pattern

#: Mechanisms with an empirical audit: the DP-SGD ones get the one-run audit.
ONE_RUN = ("cdp", "cdp-termwise", "dp2vae")
AUDITED = (*ONE_RUN, "ldp", "vae-ldp")


def build_audit_parser() -> argparse.ArgumentParser:
    from audit.config import ProfileName
    from audit.datasets import dataset_names

    p = Parser(
        prog="benchmark.py audit",
        description="Empirical epsilon lower bound for one mechanism and parameter value. "
        "ldp and vae-ldp: black-box threshold tests on worst-case inputs (M draws each, "
        "Clopper-Pearson at 95 % confidence); cdp, cdp-termwise, dp2vae: the one-run audit "
        "with m canaries in one extra training run of the mechanism, bounded by Steinke, Nasr "
        "and Jagielski (2023) and by the f-DP analysis of Mahloujifar, Melis and Chaudhuri; "
        "with --runs R, R runs and the Clopper-Pearson and GDP (Nasr et al. 2023) estimates "
        "over their pooled scores. The last line is the bare bound: one-run's (Steinke et al.) "
        "for one run, GDP's for --runs.",
    )
    p.add_argument("--dataset", default="lfw-subset", help=f"dataset: {', '.join(dataset_names())}")
    p.add_argument("--mech", required=True, choices=AUDITED, help="the mechanism to audit")
    p.add_argument(
        "--grid",
        required=True,
        type=float,
        metavar="VALUE",
        help="the parameter: noise multiplier z (cdp, cdp-termwise), sigma (dp2vae, vae-ldp), "
        "eps_i (ldp)",
    )
    p.add_argument(
        "--profile",
        default=ProfileName.QUICK.value,
        choices=[x.value for x in ProfileName],
        help="sets the cell's training settings and the default M "
        + ", ".join(f"{k} {v:.0e}" for k, v in DRAWS.items()),
    )
    p.add_argument(
        "--canaries", type=int, default=None, metavar="m", help=f"{', '.join(ONE_RUN)}: canaries m"
    )
    p.add_argument(
        "--canary-kind",
        default="gradient",
        choices=("gradient", "input"),
        help="one-run audits: gradient canaries (the implementation) or input canaries scored "
        "by the strongest attack of the release (reconstruction; latent search for dp2vae's "
        "decoder) (default gradient)",
    )
    p.add_argument(
        "--k-plus", type=int, default=None, help="one-run: top scores guessed in (default: rule)"
    )
    p.add_argument(
        "--k-minus",
        type=int,
        default=None,
        help="one-run: bottom scores guessed out (default: rule)",
    )
    p.add_argument(
        "--input-design",
        default="uniform-noise",
        choices=("uniform-noise", "blocks", "patches", "marked-mean", "mean-blocks", "label-slot"),
        help="input canaries (audit/empirical/input_canaries.py): uniform-noise records; "
        "images only: blocks (random black-and-white 5x5 patterns), patches (black, one white "
        "cell of a grid each), marked-mean (D_val's mean image, one grid cell flipped each), "
        "mean-blocks (D_val's mean plus a random +-0.5 8x8 pattern), label-slot (blocks "
        "images, each with its own label value outside the real classes; the audited model "
        "gets one extra class slot per canary; scored from the decoder alone) "
        "(default uniform-noise)",
    )
    p.add_argument(
        "--copies",
        type=int,
        default=1,
        metavar="k",
        help="input canaries: each included canary goes into D_train k times (one coin per "
        "canary); the bound is then compared with the group claim for k records (Mironov "
        "2017, Prop. 2, on the run's RDP curve) (default 1)",
    )
    p.add_argument(
        "--reference-model",
        action="store_true",
        help="input canaries: score minus the same attack's score on a model trained without "
        "canaries (one more training)",
    )
    p.add_argument(
        "--clip-norm",
        type=float,
        default=None,
        help="cdp, cdp-termwise, dp2vae: the clip norm C of the audited runs (the claim does "
        "not depend on it; default the mechanism's)",
    )
    p.add_argument(
        "--guess-rule",
        default="design",
        choices=("design", "quarter"),
        help="one-run guesses where --k-plus/--k-minus are not given: design (the guesses that "
        "maximise the bound a mechanism at its claim would give, from m, delta and the claim "
        "only) or quarter (m/4 each) (default design)",
    )
    p.add_argument(
        "--runs",
        type=int,
        default=None,
        metavar="R",
        help="cdp, cdp-termwise, dp2vae: R training runs with gradient canaries (each canary in "
        "about half of them), cached in --out and resumable; Clopper-Pearson (threshold from "
        "the first R//2 runs) and GDP estimates over the pooled scores",
    )
    p.add_argument(
        "--out", type=Path, default=None, help="--runs: where each run's scores are cached"
    )
    p.add_argument(
        "--executor",
        default="local",
        choices=("local", "ray"),
        help="--runs: where runs train: local (this process) or ray (each run a Ray task, as "
        "sweep cells)",
    )
    p.add_argument(
        "--delta",
        type=float,
        default=None,
        help="one-run audits, vae-ldp: the delta at which both the claim and the bound are "
        "computed (default 1/N_train, 1/|D| for vae-ldp); the one-run audit proves nothing "
        "once 2 m delta >= 0.05",
    )
    p.add_argument("--draws", type=int, default=None, metavar="M", help="ldp, vae-ldp: draws M")
    p.add_argument("--seed", type=int, default=0, help="root seed (cell and audit)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (one-run audits)")
    p.add_argument("--data-home", type=Path, default=None, help="where LFW/MotionSense live")
    add_verbosity(p)
    return p


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class AuditRequest:
    """A validated ``benchmark.py audit`` request (one mechanism, one parameter value)."""

    dataset: str
    mech: str
    grid: float
    profile: str
    seed: int = 0
    canaries: int | None = None
    canary_kind: str = "gradient"
    k_plus: int | None = None
    k_minus: int | None = None
    guess_rule: str = "design"
    input_design: str = "uniform-noise"
    copies: int = 1
    reference_model: bool = False
    clip_norm: float | None = None
    runs: int | None = None
    out: Path | None = None
    executor: str = "local"
    delta: float | None = None
    draws: int | None = None
    device: str = "cpu"
    data_home: Path | None = None

    def __post_init__(self) -> None:
        if self.mech not in AUDITED:
            raise ValueError(f"unknown mechanism {self.mech!r} to audit; choose one of {AUDITED}")
        _positive("--canaries", self.canaries)
        _positive("--draws", self.draws)
        _positive("--copies", self.copies)
        if self.copies != 1 and self.canary_kind != "input":
            raise ValueError("--copies applies to input canaries (--canary-kind input) only")
        if self.seed < 0:
            raise ValueError(f"--seed must be >= 0, got {self.seed!r}")
        if not (math.isfinite(self.grid) and self.grid > 0):
            raise ValueError(f"--grid must be a positive finite number, got {self.grid!r}")
        one_run = ", ".join(ONE_RUN)
        if self.mech not in ONE_RUN and (self.canaries, self.k_plus, self.k_minus) != (None,) * 3:
            raise ValueError(
                f"--canaries/--k-plus/--k-minus apply to {one_run} only, not {self.mech!r}"
            )
        if self.delta is not None and not 0 < self.delta < 1:
            raise ValueError(f"--delta must lie in (0, 1), got {self.delta!r}")
        if self.mech == "ldp" and self.delta is not None:
            raise ValueError("--delta does not apply to ldp (pure eps-DP, delta = 0)")
        if self.runs is not None:
            if self.mech not in ONE_RUN:
                raise ValueError(f"--runs applies to {one_run} only, not {self.mech!r}")
            if self.runs < 2:
                raise ValueError(f"--runs must be an integer >= 2, got {self.runs!r}")
            if self.out is None:
                raise ValueError("--runs needs --out DIR (where the runs' scores are cached)")
            if self.canary_kind != "gradient":
                raise ValueError("--runs audits gradient canaries only; drop --canary-kind")
        if self.mech not in ONE_RUN and (self.clip_norm is not None or self.reference_model):
            raise ValueError(f"--clip-norm/--reference-model apply to {one_run} only")
        if self.clip_norm is not None and not (
            math.isfinite(self.clip_norm) and self.clip_norm > 0
        ):
            raise ValueError(f"--clip-norm must be a positive number, got {self.clip_norm!r}")
        if self.runs is None and (self.out is not None or self.executor != "local"):
            raise ValueError("--out and --executor apply with --runs R only")
        if self.mech in ONE_RUN and self.draws is not None:
            raise ValueError(f"--draws applies to ldp and vae-ldp; {self.mech} takes --canaries")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AuditRequest:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names})


def _cell_and_data(args: AuditRequest):
    from audit.config import CellConfig, MechanismName, ProfileName, profile_for_dataset
    from audit.datasets import dataset_split, load_dataset
    from audit.mechanisms import DataFacts, build_options, get_mechanism
    from audit.pipeline import cell_data

    mech = MechanismName(args.mech)
    profile = profile_for_dataset(ProfileName(args.profile), args.dataset)
    cell = CellConfig(
        dataset=args.dataset,
        mech=mech,
        param_name=get_mechanism(mech).param_name,
        param_value=args.grid,
        seed=args.seed,
        profile=profile,
        mech_options=dict(build_options([mech], _given_options(args))).get(mech),
    )
    dataset = load_dataset(args.dataset, data_home=args.data_home)
    split = dataset_split(dataset, args.seed)
    mechanism = get_mechanism(mech)
    n_train = len(split.train) if profile.max_train is None else profile.max_train
    facts = DataFacts(dataset.shape, min(n_train, len(split.train)), profile.epochs)
    mechanism.check_options(
        mechanism.options_of(cell), grid=(args.grid,), batch_size=profile.batch_size, data=facts
    )
    return cell, cell_data(dataset, split, cell)


def _given_options(args: AuditRequest) -> dict:
    """The mechanism options the request sets: --delta and --clip-norm for the DP-SGD
    mechanisms (vae-ldp's audit reads --delta itself: its options take no delta)."""
    if args.mech not in ONE_RUN:
        return {}
    given = {"delta": args.delta}
    if args.clip_norm is not None:
        given["clip_norm"] = args.clip_norm
    return given


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


def _run_local(args: AuditRequest) -> tuple[list[str], float]:
    from audit.empirical.local import audit_laplace_series, audit_pixelization, audit_vae_ldp
    from audit.mechanisms.ldp import default_neighborhood
    from dpvae_core.records import Modality, record_modality

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


def _run_one_run(args: AuditRequest) -> tuple[list[str], float]:
    from audit.empirical.one_run import OneRunSettings, audit_one_run
    from audit.mechanisms import Context
    from dpvae_core.progress import null_progress

    default_m = 1000 if args.canary_kind == "gradient" else 100
    settings = OneRunSettings(
        kind=args.canary_kind,
        canaries=default_m if args.canaries is None else args.canaries,
        k_plus=args.k_plus,
        k_minus=args.k_minus,
        seed=args.seed,
        guess_rule=args.guess_rule,
        input_design=args.input_design,
        reference=args.reference_model,
        copies=args.copies,
    )
    if args.runs is not None:
        return _run_multi(args, settings)
    cell, data = _cell_and_data(args)
    audit = audit_one_run(cell, data, Context(device=args.device, progress=null_progress), settings)
    b, claim = audit.bound, audit.claim
    n_run = int(audit.extra.get("n_train_with_canaries", len(data.train[0])))
    lines = [
        f"{args.mech} {cell.param_name}={args.grid:g}: claimed epsilon {claim.epsilon:.6g} at "
        f"delta {claim.delta:.6g} ({claim.method}, N_train {n_run} in the audit's run)",
        *(
            [
                f"  the canaries were inserted {args.copies} times each: the claim above is the "
                f"group claim for {args.copies} records (one record: "
                f"{audit.extra['single_record_epsilon']:.6g})"
            ]
            if args.copies > 1
            else []
        ),
        *_paper_claim_lines(claim, b.epsilon),
        f"  {audit.kind.value} canaries: m = {b.m}, guesses k+ = {audit.k_plus}, k- = "
        f"{audit.k_minus} (r = {b.r}, {audit.guess_rule} rule), {b.v} right, confidence "
        f"{b.confidence:.0%}",
        f"  one-run-fdp (Mahloujifar et al., Gaussian trade-off assumed): lower bound "
        f"{audit.fdp_epsilon:.6g}",
        f"  one-run (Steinke et al. 2023, delta term included): lower bound {b.epsilon:.6g}; "
        f"ceiling (all r right) {b.ceiling:.6g}",
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


def _run_multi(args: AuditRequest, settings) -> tuple[list[str], float]:
    from audit.config import CellConfig, MechanismName, ProfileName, profile_for_dataset
    from audit.datasets import load_dataset
    from audit.empirical.multi_run import multi_run_audit
    from audit.executors import ExecutorName, make_executor
    from audit.mechanisms import build_options, get_mechanism

    mech = MechanismName(args.mech)
    cell = CellConfig(
        dataset=args.dataset,
        mech=mech,
        param_name=get_mechanism(mech).param_name,
        param_value=args.grid,
        seed=args.seed,
        profile=profile_for_dataset(ProfileName(args.profile), args.dataset),
        mech_options=dict(build_options([mech], _given_options(args))).get(mech),
    )
    dataset = load_dataset(args.dataset, data_home=args.data_home)
    get_mechanism(mech).check_modality(dataset.shape)
    executor = make_executor(ExecutorName(args.executor))
    a = multi_run_audit(cell, dataset, settings, runs=args.runs, out=args.out, executor=executor)
    r = a.rates
    lines = [
        f"{args.mech} {cell.param_name}={args.grid:g}: claimed epsilon {a.claim_epsilon:.6g} at "
        f"delta {a.delta:.6g}; {a.runs} runs ({a.cached} from {args.out}), m = {a.m} gradient "
        f"canaries each, training {a.train_seconds:.1f} s in all",
        f"  one-run (Steinke et al.), mean over runs: {a.one_run_mean:.6g}; one-run-fdp: "
        f"{a.one_run_fdp_mean:.6g}",
        f"  clopper-pearson (threshold {r.threshold:.6g} from runs 1-{a.runs // 2}, bound on "
        f"the rest: TPR >= {r.tpr_lo:.4g} of {r.positives}, FPR <= {r.fpr_hi:.4g} of "
        f"{r.negatives}, 95 %): lower bound {a.clopper_pearson:.6g}",
        f"  gdp (Nasr et al. 2023, all runs, Bonferroni over {a.gdp_thresholds} thresholds, "
        f"95 %): mu >= {a.gdp_mu:.4g}, epsilon {a.gdp:.6g}",
    ]
    return lines, a.gdp


def _paper_claim_lines(claim, bound: float) -> list[str]:
    """dp2vae: paper 002's Theorem 3.1 value (not a bound for what the code does) next to the
    lower bound, and whether the audit refutes it."""
    paper = claim.extra.get("epsilon_paper_theorem_3_1")
    if paper is None:
        return []
    verdict = "EXCEEDS it: the paper's value is refuted" if bound > paper else "does not exceed it"
    return [
        f"  paper 002 Theorem 3.1 value (notes, not a valid bound): {paper:.6g}; the lower bound "
        f"{verdict}"
    ]


def run_audit(request: AuditRequest) -> str:
    """The subcommand's text; its last line is the bare lower bound."""
    run = _run_one_run if request.mech in ONE_RUN else _run_local
    lines, bound = run(request)
    return "\n".join([*lines, f"{bound:.10g}"])


def audit_main(argv: Sequence[str]) -> int:
    args = build_audit_parser().parse_args(list(argv))
    configure_logging(args.verbose)
    print(run_audit(AuditRequest.from_args(args)))
    return 0
