"""Why a calibrated attack helps or not: how much of a raw score is the record's difficulty.

For every cell of a sweep that ran the likelihood attack or latent search with reference models,
the calibrated score is the raw score minus the reference models' mean score for the same record
(:mod:`attacks.likelihood`, :mod:`attacks.latent_search`), so ``raw - calibrated`` is that mean:
what a record scores under VAEs that never saw it. This prints, per cell and attack:

* corr(raw, reference mean): how much of the raw score is difficulty;
* the member minus non-member gap of the raw, calibrated and reference-mean scores, with the
  standard error of a gap between two random halves of D_atk of those sizes (raw score's spread);
* MI AP of the raw and calibrated scores, and of the reference mean alone: an "attack" that
  knows nothing of the target. Above its blind band it says that this D_atk's members are
  easier (or harder) records than its non-members by chance of the draw, which the raw score
  inherits and the calibrated one removes.

    .venv/bin/python benchmarks/calibration_why.py results/lfw-subset-standard-attacks
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from sklearn.metrics import average_precision_score

from audit.results import load_cell_config, scores_key

#: (attack, distance) of the attacks with a calibrated variant; higher scores mean "member".
CALIBRATED = (("likelihood", "iwae-bernoulli"), ("latent-search", "mse"))


def cell_lines(cell: Path) -> list[str]:
    config = load_cell_config(cell)
    value = config.param_value
    setting = config.mech + ("" if value is None else f" {value:g}")
    scores = np.load(cell / "scores.npz")
    member = scores["is_member"].astype(bool)
    lines = []
    for attack, distance in CALIBRATED:
        raw_key = scores_key(attack, distance, "raw")
        cal_key = scores_key(attack, distance, "calibrated")
        if raw_key not in scores or cal_key not in scores:
            continue
        raw, cal = scores[raw_key].astype(float), scores[cal_key].astype(float)
        ref = raw - cal

        def gap(s: np.ndarray) -> float:
            return float(s[member].mean() - s[~member].mean())

        se = raw.std() * np.sqrt(1 / member.sum() + 1 / (~member).sum())
        lines.append(
            f"{setting:16s} {attack:15s} corr(raw, ref) {np.corrcoef(raw, ref)[0, 1]:+.3f}  "
            f"gap raw {gap(raw):+.3g} calibrated {gap(cal):+.3g} reference {gap(ref):+.3g} "
            f"(se {se:.3g})  MI AP raw {average_precision_score(member, raw):.3f} "
            f"calibrated {average_precision_score(member, cal):.3f} "
            f"reference alone {average_precision_score(member, ref):.3f}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="a sweep's output directory")
    args = parser.parse_args(argv)
    cells = sorted(p for p in (args.out / "cells").glob("*") if (p / "scores.npz").is_file())
    if not cells:
        print(f"error: no finished cell with scores under {args.out / 'cells'}", file=sys.stderr)
        return 2
    lines = [line for cell in cells for line in cell_lines(cell)]
    if not lines:
        print(f"error: no cell under {args.out} ran a calibrated attack", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
