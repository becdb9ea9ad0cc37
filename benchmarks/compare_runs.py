"""Compare two runs.csv on every column the old one has, except wall_s and code_version.

    python benchmarks/compare_runs.py OLD/runs.csv NEW/runs.csv

Values must be identical as written (NaN equals NaN; numbers compared exactly as text). Rows are
matched on (mech, param_value, seed, distance); where the new run has an ``attack`` column only
its reconstruction rows are compared (the attack the old run had). Prints one line per differing
value and their count.
"""

import sys

import pandas as pd

old, new = (
    pd.read_csv(sys.argv[1], keep_default_na=False),
    pd.read_csv(sys.argv[2], keep_default_na=False),
)
key = ["mech", "param_value", "seed", "distance"]
if "attack" in new.columns:
    new = new[new["attack"] == "reconstruction"]
cols = [c for c in old.columns if c not in ("wall_s", "code_version")]
missing = [c for c in cols if c not in new.columns]
old = old.sort_values(key).reset_index(drop=True)
new = new.sort_values(key).reset_index(drop=True)
compared = len(cols) - len(missing)
print(f"rows {len(old)} vs {len(new)}; columns compared {compared}; missing in new: {missing}")
print("columns only in new:", sorted(set(new.columns) - set(old.columns)))
n = 0
for c in cols:
    if c in missing:
        continue
    for i in range(len(old)):
        a, b = str(old.at[i, c]), str(new.at[i, c])
        if a != b:
            n += 1
            where = " ".join(str(old.at[i, k]) for k in key)
            print(f"DIFF {where} {c}: {a!r} -> {b!r}")
print(f"{n} differing values")
