#!/usr/bin/env python
"""Every estimator of the DP-SGD audits against the claim, with its cost as a ratio to one training.

  python benchmarks/bench_audit_estimators.py [--dataset lfw-subset] [--grid 4 2] \
      [--canaries 1000 10000 50000] [--seeds 0 1 2] [--runs 4] [--broken-runs 2] \
      [--out results/audit-runs] [--delta 1e-5]

Per grid value z of cdp (quick profile): the cell's own training without canaries (the baseline,
measured in this process), then

- one-run gradient-canary audits (:func:`audit.empirical.one_run.audit_one_run`, guesses by the
  design rule) for each m at seed 0: Steinke et al.'s bound, the f-DP bound, the guesses, the
  ceiling, the extra run's seconds as a ratio to the baseline;
- the same at the middle m for every seed (the correct mechanism must stay below its claim);
- the multi-run audit (:func:`audit.empirical.multi_run.multi_run_audit`, runs cached in
  ``--out``, the same cache as ``benchmark.py audit --runs``): Clopper-Pearson and GDP;
- the broken mechanisms (no noise, no clipping) with every estimator (one run at the middle m,
  and ``--broken-runs`` runs for the several-run estimators).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from audit.cell.membership import cell_data
from audit.config import CellConfig
from audit.datasets import load_dataset, stratified_split
from audit.empirical.canary_hooks import Switches
from audit.empirical.guesses import GuessRule
from audit.empirical.multi_run import multi_run_audit
from audit.empirical.one_run import audit_cell_of, audit_one_run, extra_run
from audit.empirical.one_run_settings import Broken, OneRunSettings
from audit.executors import LocalExecutor
from audit.mechanisms import Context, build_options, get_mechanism
from audit.profiles import ProfileName, profile_for_dataset
from dpvae_core.progress import null_progress

CTX = Context(device="cpu", progress=null_progress)


def _cell(args, z: float, seed: int) -> CellConfig:
    mech = "cdp"
    return CellConfig(
        dataset=args.dataset,
        mech=mech,
        param_name=get_mechanism(mech).param_name,
        param_value=z,
        seed=seed,
        profile=profile_for_dataset(ProfileName.QUICK, args.dataset),
        mech_options=dict(build_options([mech], {"delta": args.delta})).get(mech),
    )


def _one_run(cell, data, settings, base_s: float, label: str) -> None:
    a = audit_one_run(cell, data, CTX, settings)
    b = a.bound
    print(
        f"| {label} | {a.claim.epsilon:.4g} | {b.m} | {a.k_plus}/{a.k_minus} | {b.v}/{b.r} | "
        f"{b.epsilon:.4g} | {a.fdp_epsilon:.4g} | {b.ceiling:.4g} | "
        f"{a.train_seconds / base_s:.2f} | {a.seconds / base_s:.2f} |",
        flush=True,
    )


def _multi(cell, dataset, settings, runs: int, out: Path, base_s: float, label: str) -> None:
    start = time.perf_counter()
    a = multi_run_audit(cell, dataset, settings, runs=runs, out=out, executor=LocalExecutor())
    spent = time.perf_counter() - start
    print(
        f"| {label} | {a.claim_epsilon:.4g} | {a.runs} x {a.m} | {a.one_run_mean:.4g} | "
        f"{a.one_run_fdp_mean:.4g} | {a.clopper_pearson:.4g} | {a.gdp:.4g} (mu {a.gdp_mu:.3g}) | "
        f"{a.train_seconds / base_s:.2f} | {a.cached} cached, {spent:.0f} s now |",
        flush=True,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="lfw-subset")
    p.add_argument("--grid", type=float, nargs="+", default=[4.0, 2.0])
    p.add_argument("--canaries", type=int, nargs="+", default=[1000, 10000, 50000])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--broken-runs", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("results/audit-runs"))
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--data-home", default=None)
    p.add_argument(
        "--broken-guesses",
        default="design",
        choices=("design", "quarter"),
        help="the broken runs' one-run guesses: the design rule (as the correct runs) or m/4 "
        "each (a higher ceiling: 7.14 for one-run, 13.58 for f-DP at m = 10000, delta 1e-5)",
    )
    p.add_argument(
        "--only-broken",
        action="store_true",
        help="only the broken mechanisms' one-run rows (no seeds, no several-run audits)",
    )
    args = p.parse_args()
    dataset = load_dataset(args.dataset, data_home=args.data_home)
    middle = sorted(args.canaries)[len(args.canaries) // 2]
    one_head = (
        "| audit | claim | m | k+/k- | right/r | one-run | one-run-fdp | ceiling | "
        "extra run / training | whole audit / training |\n|" + " --- |" * 10
    )
    multi_head = (
        "| audit | claim | runs x m | one-run (mean) | f-DP (mean) | clopper-pearson | gdp | "
        "trainings / training | cache |\n|" + " --- |" * 9
    )
    for z in args.grid:
        cell = _cell(args, z, 0)
        split = stratified_split(dataset.y, fractions=dataset.split_fractions, seed=0)
        data = cell_data(dataset, split, cell)
        base = extra_run(audit_cell_of(cell), data, CTX, Switches())
        print(
            f"\n### cdp z = {z:g}: claim {base.claim.epsilon:.4g} at delta {args.delta:g}; "
            f"one training without canaries {base.seconds:.1f} s\n\n{one_head}",
            flush=True,
        )
        broken_rule = GuessRule(args.broken_guesses)
        if args.only_broken:
            for broken in (Broken.NO_NOISE, Broken.NO_CLIP):
                for m in args.canaries:
                    settings = OneRunSettings(canaries=m, broken=broken, guess_rule=broken_rule)
                    label = f"{broken.value}, m {m}, {broken_rule.value} guesses"
                    _one_run(cell, data, settings, base.seconds, label)
            continue
        for m in args.canaries:
            _one_run(cell, data, OneRunSettings(canaries=m), base.seconds, f"seed 0, m {m}")
        for seed in args.seeds:
            if seed == 0:
                continue
            seeded = _cell(args, z, seed)
            split_s = stratified_split(dataset.y, fractions=dataset.split_fractions, seed=seed)
            _one_run(
                seeded,
                cell_data(dataset, split_s, seeded),
                OneRunSettings(canaries=middle, seed=seed),
                base.seconds,
                f"seed {seed}, m {middle}",
            )
        for broken in (Broken.NO_NOISE, Broken.NO_CLIP):
            settings = OneRunSettings(canaries=middle, broken=broken, guess_rule=broken_rule)
            _one_run(cell, data, settings, base.seconds, f"{broken.value}, m {middle}")
        print(f"\n{multi_head}", flush=True)
        settings = OneRunSettings(canaries=middle)
        _multi(cell, dataset, settings, args.runs, args.out / f"z{z:g}", base.seconds, "correct")
        for broken in (Broken.NO_NOISE, Broken.NO_CLIP):
            _multi(
                cell,
                dataset,
                replace(settings, broken=broken),
                args.broken_runs,
                args.out / f"z{z:g}",
                base.seconds,
                broken.value,
            )


if __name__ == "__main__":
    main()
