"""Check a report's sweet_spots.csv row by row against the rule it was chosen by.

    python benchmarks/check_sweet_spots.py OUT/report/sweet_spots.csv

A row with a setting must have: the upper end of its held-out worst case's interval at most the
limit, the limit certifiable at its counts (the blind attacker's 95 % quantile at most the
limit), no attack's lower end above the limit, and accuracy above chance. A row without one
must give its reason. Prints the rows and one verdict line; exit 1 where a row breaks the rule.
"""

import sys

import pandas as pd


def main(path: str) -> int:
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    chosen = frame[frame["setting"].notna()]
    empty = frame[frame["setting"].isna()]
    holds = (
        (chosen.worst_mi_ap_high <= chosen.limit)
        & (chosen.certifiable_from <= chosen.limit)
        & ~(chosen.strongest_mi_ap_low > chosen.limit)
        & (chosen.acc > chosen.chance_acc)
    )
    reasons = empty["reason"].fillna("").astype(str).str.len() > 0
    columns = [
        "limit", "mech", "setting", "epsilon", "worst_mi_ap", "worst_mi_ap_high",
        "certifiable_from", "strongest_mi_ap_low", "acc", "acc_low", "chance_acc",
        "records_to_certify",
    ]  # fmt: skip
    print(frame[[c for c in columns if c in frame]].round(3).to_string())
    print(
        f"{len(frame)} rows: {len(chosen)} with a setting, the rule holds on {int(holds.sum())}; "
        f"{len(empty)} without, {int(reasons.sum())} of them with a reason"
    )
    return 0 if holds.all() and reasons.all() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
