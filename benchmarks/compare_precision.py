#!/usr/bin/env python
"""Are two runs' rows equal within their sampling noise? (A speed-up is kept only if they are.)

    python benchmarks/compare_precision.py BEFORE/runs.csv AFTER/runs.csv [--z 1.96]

For sweeps of the same cells in two arithmetics (``--precision float32`` against ``bf16``), or
two code versions whose rows differ at rounding level. Rows are matched on (mech, param_value,
seed, attack, distance, variant). For each matched row:

- MI AP: the difference against z * sqrt(se_a^2 + se_b^2), each se from the row's bootstrap
  interval (``mi_ap_low``, ``mi_ap_high``: a 95 % interval, se = width / 3.92). The two runs
  attack the same D_atk with models trained on the same data and noise, so their errors are
  positively correlated and this bound is conservative;
- accuracy on D_gen (one per cell): the difference against z * sqrt(2 p (1 - p) / n_test);
- the worst case and phi are printed beside them (phi is a function of MI AP and accuracy;
  it is equal within noise where they are).

Prints one line per cell and attack, then the count of values outside their band; exit status 1
if any is.
"""

from __future__ import annotations

import argparse
import math

import pandas as pd

KEY = ["mech", "param_value", "seed", "attack", "distance", "variant"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--z", type=float, default=1.96)
    args = p.parse_args()
    a, b = (pd.read_csv(path) for path in (args.before, args.after))
    for frame in (a, b):
        frame["param_value"] = frame["param_value"].fillna(-1.0)
        frame["variant"] = frame["variant"].fillna("")
    both = a.merge(b, on=KEY, suffixes=("_a", "_b"))
    print(f"{len(both)} rows matched ({len(a)} before, {len(b)} after)")
    outside, checked = 0, 0
    for _, r in both.sort_values(KEY).iterrows():
        se_a = (r.mi_ap_high_a - r.mi_ap_low_a) / 3.92
        se_b = (r.mi_ap_high_b - r.mi_ap_low_b) / 3.92
        band = args.z * math.hypot(se_a, se_b)
        diff = r.mi_ap_b - r.mi_ap_a
        if math.isnan(band) and not math.isnan(diff):
            band = 0.0  # no interval: only an exact match passes
        flag = not abs(diff) <= band and not (math.isnan(r.mi_ap_a) and math.isnan(r.mi_ap_b))
        outside += flag
        checked += 1
        print(
            f"{r.mech:>12} {r.param_value:>8g} s{r.seed} {r.attack:>14} {r.distance:>10} "
            f"{r.variant:>12}: MI AP {r.mi_ap_a:.3f} -> {r.mi_ap_b:.3f} "
            f"(diff {diff:+.3f}, band {band:.3f}){' OUTSIDE' if flag else ''}"
        )
    cells = both.drop_duplicates(["mech", "param_value", "seed"])
    for _, r in cells.sort_values(KEY).iterrows():
        p_ = (r.acc_a + r.acc_b) / 2
        band = args.z * math.sqrt(2 * p_ * (1 - p_) / r.n_test_a)
        diff = r.acc_b - r.acc_a
        flag = abs(diff) > band
        outside += flag
        checked += 1
        print(
            f"{r.mech:>12} {r.param_value:>8g} s{r.seed}: acc {r.acc_a:.3f} -> {r.acc_b:.3f} "
            f"(diff {diff:+.3f}, band {band:.3f}){' OUTSIDE' if flag else ''}; "
            f"worst MI AP {r.worst_mi_ap_a:.3f} -> {r.worst_mi_ap_b:.3f}; "
            f"phi {r.phi_a:.3f} -> {r.phi_b:.3f}; wall {r.wall_s_a:.0f} s -> {r.wall_s_b:.0f} s"
        )
    print(f"{outside} of {checked} values outside their band (z = {args.z:g})")
    return 1 if outside else 0


if __name__ == "__main__":
    raise SystemExit(main())
