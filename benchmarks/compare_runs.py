"""Compare two runs.csv on every column the old one has, except wall_s and code_version.

    python benchmarks/compare_runs.py OLD/runs.csv NEW/runs.csv [--metrics-only]

Values must be identical as written (NaN equals NaN; numbers compared exactly as text). Rows are
matched on (mech, param_value, seed, attack, distance, variant) where both runs have those
columns, else on (mech, param_value, seed, distance) with the new run's reconstruction rows only
(the attack an old run without the column had); rows in one run
only are counted. ``--metrics-only`` also leaves out the columns
that name a cell rather than measure it (its hashes: ``config_hash``, ``baseline_hash``,
``run_hash``, ``setting_hash``), which a new cache schema changes by design, and reads the
durations ``privacy_notes`` quotes (the reference models' training seconds) as ``<t> s``. Prints
one line per differing value and their count.
"""

import sys

import pandas as pd

IDENTITY = ("config_hash", "baseline_hash", "run_hash", "setting_hash")

args = [a for a in sys.argv[1:] if not a.startswith("--")]
metrics_only = "--metrics-only" in sys.argv[1:]
old, new = (pd.read_csv(path, keep_default_na=False, dtype=str) for path in args)
if metrics_only:
    for frame in (old, new):
        if "privacy_notes" in frame.columns:
            frame["privacy_notes"] = frame["privacy_notes"].str.replace(
                r"\b\d+(?:\.\d+)? s\b", "<t> s", regex=True
            )
key = ["mech", "param_value", "seed", "distance"]
if "attack" in old.columns and "attack" in new.columns:
    key = ["mech", "param_value", "seed", "attack", "distance", "variant"]
elif "attack" in new.columns:
    new = new[new["attack"] == "reconstruction"]
skip = {"wall_s", "code_version", *(IDENTITY if metrics_only else ())}
cols = [c for c in old.columns if c not in skip]
missing = [c for c in cols if c not in new.columns]
both = old.merge(new, on=key, how="outer", suffixes=("", " new"), indicator=True)
only = both[both["_merge"] != "both"]
both = both[both["_merge"] == "both"].reset_index(drop=True)
compared = len(cols) - len(missing)
print(
    f"rows {len(old)} vs {len(new)}: {len(both)} matched, {len(only)} in one run only; "
    f"columns compared {compared}; missing in new: {missing}"
)
print("columns only in new:", sorted(set(new.columns) - set(old.columns)))
n = 0
for c in cols:
    if c in missing or c in key:
        continue
    for i in range(len(both)):
        a, b = str(both.at[i, c]), str(both.at[i, f"{c} new"])
        if a != b:
            n += 1
            where = " ".join(str(both.at[i, k]) for k in key)
            print(f"DIFF {where} {c}: {a!r} -> {b!r}")
print(f"{n} differing values")
