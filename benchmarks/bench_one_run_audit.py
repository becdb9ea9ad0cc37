#!/usr/bin/env python
"""The one-run audit of DP-SGD cells: the bounds against the claims, and the extra run's cost as
a ratio to the cell's own training.

  python benchmarks/bench_one_run_audit.py [--dataset lfw-subset] [--mech cdp] \
      [--grid 0.5 1 2] [--profile quick] [--delta 1e-5] [--canaries 1000] [--input-canaries 100]

For each grid value: the cell's own training (the mechanism's ``train`` on the cell's data, no
hook: the baseline), then the gradient-canary audit and the input-canary audit
(:func:`audit.empirical.one_run.audit_one_run`, each one extra training run), all in this process
on the same data. It prints per value the claimed epsilon (and, for dp2vae, the DP2-VAE paper's
Theorem 3.1 value, which is not a bound for what the code does), each bound with m, right guesses
and ceiling, and the seconds of each run with its ratio to the baseline training.

At the profile's default delta (1/N_train: 0.02 for the quick profile's 50 records) Steinke et
al.'s bound of m = 100 or more canaries is 0 whatever the guesses (its p-value is at least 2
delta for any outcome, about 3-4 delta with every one of many guesses right), while the f-DP
bound still proves up to 4.3; hence ``--delta`` (both the claim and the bound use it).
"""

from __future__ import annotations

import argparse
import time

from audit.cell.membership import cell_data
from audit.config import CellConfig
from audit.datasets import load_dataset, stratified_split
from audit.empirical.canary_hooks import Switches
from audit.empirical.one_run import audit_cell_of, audit_one_run, extra_run
from audit.empirical.one_run_settings import CanaryKind, OneRunSettings
from audit.mechanisms import Context, build_options, get_mechanism
from audit.profiles import ProfileName, profile_for_dataset
from dpvae_core.progress import null_progress


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="lfw-subset")
    p.add_argument("--mech", default="cdp", choices=("cdp", "cdp-termwise", "dp2vae"))
    p.add_argument("--grid", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    p.add_argument("--profile", default="quick", choices=[x.value for x in ProfileName])
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--canaries", type=int, default=1000, help="gradient canaries m")
    p.add_argument("--input-canaries", type=int, default=100, help="input canaries m")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-home", default=None)
    args = p.parse_args()

    mech = args.mech
    dataset = load_dataset(args.dataset, data_home=args.data_home)
    split = stratified_split(dataset.y, fractions=dataset.split_fractions, seed=args.seed)
    options = dict(build_options([mech], {"delta": args.delta}))[mech]
    ctx = Context(device="cpu", progress=null_progress)
    print(
        f"{args.dataset}, {args.mech}, profile {args.profile}, delta {args.delta:g}, "
        f"m = {args.canaries} gradient / {args.input_canaries} input canaries, seed {args.seed}"
    )
    for value in args.grid:
        cell = CellConfig(
            dataset=args.dataset,
            mech=mech,
            param_name=get_mechanism(mech).param_name,
            param_value=value,
            seed=args.seed,
            profile=profile_for_dataset(ProfileName(args.profile), args.dataset),
            mech_options=options,
        )
        data = cell_data(dataset, split, cell)
        start = time.perf_counter()
        base = extra_run(audit_cell_of(cell), data, ctx, Switches())
        base_s = time.perf_counter() - start
        claim = base.claim
        paper = claim.extra.get("epsilon_paper_theorem_3_1")
        extra = (
            "" if paper is None else f" (the DP2-VAE paper's Theorem 3.1: {paper:.4g}, not a bound)"
        )
        print(
            f"\n{cell.param_name} = {value:g}: claimed epsilon {claim.epsilon:.4g}{extra}, "
            f"N_train {len(data.train[0])}; the cell's own training {base.seconds:.1f} s"
        )
        for kind, m in (
            (CanaryKind.GRADIENT, args.canaries),
            (CanaryKind.INPUT, args.input_canaries),
        ):
            settings = OneRunSettings(kind=kind, canaries=m, seed=args.seed)
            audit = audit_one_run(cell, data, ctx, settings)
            b = audit.bound
            versus = f"claim {audit.claim.epsilon:.4g}"
            if kind is CanaryKind.INPUT:
                versus += f" for N_train {audit.extra['n_train_with_canaries']}"
            print(
                f"  {kind.value:8s} canaries: lower bound {b.epsilon:.4g} ({versus}); m = {b.m}, "
                f"{b.v} of r = {b.r} right, ceiling {b.ceiling:.4g}; extra run "
                f"{audit.train_seconds:.1f} s = {audit.train_seconds / base.seconds:.2f}x the "
                f"cell's training, whole audit {audit.seconds:.1f} s = "
                f"{audit.seconds / base_s:.2f}x"
            )
            print(f"           score: {audit.score}")


if __name__ == "__main__":
    main()
