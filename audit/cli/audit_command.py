"""The ``audit`` subcommand: claimed epsilon against what an auditor can prove, for one mechanism
and one parameter value; the last line printed is the bare lower bound.

  benchmark.py audit --dataset NAME --mech MECH --grid VALUE [--profile P] [--canaries m]
                     [--draws M] [--seed S] [--canary-kind gradient|input] [--runs R --out DIR]

A usage error raises ValueError, which :func:`audit.cli.main.main` prints as one 'error:' line
(status 2).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace

from audit.cli.audit_request import INPUT_DESIGN, AuditRequest, build_audit_parser
from audit.cli.logs import configure_logging
from audit.empirical.local import DRAWS, LocalAudit
from audit.mechanisms import get_mechanism
from dpvae_core.validation import DeviceChoice, resolve_device


def _cell_and_data(args: AuditRequest):
    from audit.cell.membership import cell_data
    from audit.config import CellConfig
    from audit.datasets import dataset_split, load_dataset
    from audit.mechanisms import DataFacts, build_options
    from audit.profiles import ProfileName, profile_for_dataset

    mech = args.mech
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
    mechanisms (a local audit reads --delta itself: :meth:`Mechanism.local_audits`)."""
    if not get_mechanism(args.mech).one_run_audit:
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
    draws = DRAWS[args.profile] if args.draws is None else args.draws
    if draws < 2:
        raise ValueError(f"--draws must be >= 2, got {draws!r}")
    cell, data = _cell_and_data(args)
    audits = get_mechanism(args.mech).local_audits(
        cell, data, draws=draws, seed=args.seed, delta=args.delta, every=True
    )
    last = audits[-1]
    source = "--delta" if args.delta is not None else last.delta_from
    lines = [f"delta = {last.bound.delta:.6g} ({source})"] if source else []
    for audit in audits:
        lines += _local_lines(audit)
    if len(audits) > 1:
        lines.append(f"bound against the {last.claim_kind} claim (the epsilon column):")
    return lines, last.epsilon


def _run_one_run(args: AuditRequest) -> tuple[list[str], float]:
    from audit.empirical.one_run import audit_one_run
    from audit.empirical.one_run_settings import OneRunSettings
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
        input_design=args.input_design or INPUT_DESIGN,
        reference=args.reference_model,
        copies=args.copies,
    )
    if args.runs is not None:
        return _run_multi(args, settings)
    cell, data = _cell_and_data(args)
    print(DeviceChoice(args.device, args.device_reason).line(), file=sys.stderr, flush=True)
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
            f"  note: even all r = {b.r} guesses right would prove nothing with Steinke et al.'s "
            f"bound at delta {b.delta:.3g} (its p-value is at least 2 delta for any outcome); a "
            "smaller --delta may"
        )
    return lines, b.epsilon


def _run_multi(args: AuditRequest, settings) -> tuple[list[str], float]:
    from audit.config import CellConfig, ExecutorName
    from audit.datasets import load_dataset
    from audit.empirical.multi_run import multi_run_audit
    from audit.executors import make_executor
    from audit.mechanisms import build_options
    from audit.profiles import ProfileName, profile_for_dataset

    mech = args.mech
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
    """dp2vae: the DP2-VAE paper's Theorem 3.1 value (not a bound for what the code does) next to
    the lower bound, and whether the audit refutes it."""
    paper = claim.extra.get("epsilon_paper_theorem_3_1")
    if paper is None:
        return []
    verdict = "EXCEEDS it: that value is refuted" if bound > paper else "does not exceed it"
    return [
        f"  the DP2-VAE paper's Theorem 3.1 value (notes, not a valid bound): {paper:.6g}; "
        "the lower bound "
        f"{verdict}"
    ]


def run_audit(request: AuditRequest) -> str:
    """The subcommand's text; its last line is the bare lower bound."""
    run = _run_one_run if get_mechanism(request.mech).one_run_audit else _run_local
    lines, bound = run(request)
    return "\n".join([*lines, f"{bound:.10g}"])


def check_environment(request: AuditRequest) -> AuditRequest:
    """What the request needs of this machine, before any work: the device, a data home the
    dataset reads, and (with --runs) an --out it can write; nothing is created. Returns the
    request with its device resolved (``auto``: :func:`dpvae_core.validation.resolve_device`)."""
    from audit.datasets import check_data_home
    from dpvae_core.path_checks import check_output_dir

    device = resolve_device(request.device)
    check_data_home(request.dataset, request.data_home)
    if request.out is not None:
        check_output_dir(request.out, "--out")
    return replace(request, device=device.device, device_reason=device.reason)


def audit_main(argv: Sequence[str]) -> int:
    args = build_audit_parser().parse_args(list(argv))
    configure_logging(args.verbose)
    request = check_environment(AuditRequest.from_args(args))
    print(run_audit(request))
    return 0
