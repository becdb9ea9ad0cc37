"""The sweep's ``--tune N`` and ``--tune-seed S`` flags (:mod:`audit.cell.tuning`)."""

from __future__ import annotations

import argparse


def add_tune_flags(parser: argparse.ArgumentParser) -> None:
    """Add the tuning flags to the sweep's ``parser``, in a group of their own."""
    from audit.cell.tuning import OBJECTIVE, TUNE_EXTRA
    from audit.config import MAX_TUNE_TRIALS

    group = parser.add_argument_group("per-setting tuning (the trade-off paper's recipe search)")
    group.add_argument(
        "--tune",
        type=int,
        default=None,
        metavar="N",
        help="choose each cell's VAE learning rate and batch size (and the target classifier's "
        f"learning rate, batch size and epochs where it is a network) over N trials, 1 to "
        f"{MAX_TUNE_TRIALS}, of Bayesian optimisation (Optuna's TPE, seeded; {TUNE_EXTRA}); "
        f"objective: {OBJECTIVE}, never D_test or D_atk. The tuning's privacy cost is not "
        "accounted (each row says so); tuned cells get their own hashes and their trials are "
        "cached in OUT/cache (docs/tuning.md). Default: no tuning",
    )
    group.add_argument(
        "--tune-seed",
        type=int,
        default=0,
        metavar="S",
        help="the tuning's sampler seed, with each cell's root seed (default 0; in the tuned "
        "cells' hashes)",
    )
