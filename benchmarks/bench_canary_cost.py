#!/usr/bin/env python
"""What gradient canaries cost: a cdp training run with m canaries against the same training
without, alternated in one process (so that a busy machine slows both alike).

  python benchmarks/bench_canary_cost.py [--dataset lfw-subset] [--grid 4] \
      [--canaries 1000 10000 50000] [--repeats 2] [--delta 1e-5]

Per m: ``--repeats`` pairs (training without canaries, then with m gradient canaries through
:class:`audit.empirical.canary_hooks.GradientCanaries`), each timed on the training alone; prints
each pair's ratio and their median.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from audit.cell.membership import cell_data
from audit.config import CellConfig
from audit.datasets import load_dataset, stratified_split
from audit.empirical.canary_hooks import GradientCanaries, Switches
from audit.empirical.one_run import audit_cell_of, extra_run
from audit.mechanisms import Context, build_options, get_mechanism
from audit.profiles import ProfileName, profile_for_dataset
from dpvae_core.progress import null_progress


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="lfw-subset")
    p.add_argument("--grid", type=float, default=4.0)
    p.add_argument("--canaries", type=int, nargs="+", default=[1000, 10000, 50000])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--delta", type=float, default=1e-5)
    args = p.parse_args()
    mech = "cdp"
    cell = CellConfig(
        dataset=args.dataset,
        mech=mech,
        param_name=get_mechanism(mech).param_name,
        param_value=args.grid,
        seed=0,
        profile=profile_for_dataset(ProfileName.QUICK, args.dataset),
        mech_options=dict(build_options([mech], {"delta": args.delta})).get(mech),
    )
    dataset = load_dataset(args.dataset)
    split = stratified_split(dataset.y, fractions=dataset.split_fractions, seed=0)
    data = cell_data(dataset, split, cell)
    ctx = Context(device="cpu", progress=null_progress)
    run_cell = audit_cell_of(cell)
    rate = get_mechanism(mech).canary_sample_rate(cell, len(data.train[0]))
    print(f"{args.dataset} cdp z = {args.grid:g}, quick profile, training seconds per pair")
    for m in args.canaries:
        ratios = []
        for _ in range(args.repeats):
            plain = extra_run(run_cell, data, ctx, Switches()).seconds
            hook = GradientCanaries(
                included=np.random.default_rng(0).random(m) < 0.5,
                sample_rate=rate,
                raw_norm=100.0,
                seed=0,
            )
            with_canaries = extra_run(run_cell, data, ctx, hook).seconds
            ratios.append(with_canaries / plain)
            print(f"  m = {m}: without {plain:.1f} s, with {with_canaries:.1f} s", flush=True)
        print(f"m = {m}: median ratio {statistics.median(ratios):.2f}", flush=True)


if __name__ == "__main__":
    main()
