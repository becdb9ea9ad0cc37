"""A sweep's own cells, exported as releases and attacked with ``benchmark.py attack``: prints,
per cell and attack result, the MI AP of the sweep's row and of the release's row.

    python benchmarks/export_cell_check.py OUT [sweep flags ...]

runs ``benchmark.py --out OUT/sweep --no-report [sweep flags]`` (the flags should include
``--reference-models 0``: the attack command takes no reference models), exports every cell
(:func:`audit.release.export.export_cell`) and attacks each export into ``OUT/attack-<hash>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

import benchmark
from audit.release.export import export_cell

KEY = ["attack", "distance", "variant"]


def main(out: Path, sweep_flags: list[str]) -> int:
    code = benchmark.main([*sweep_flags, "--out", str(out / "sweep"), "--no-report"])
    if code:
        return code
    sweep = pd.read_csv(out / "sweep" / "runs.csv")
    data_home = None
    if "--data-home" in sweep_flags:
        data_home = Path(sweep_flags[sweep_flags.index("--data-home") + 1])
    mismatches = 0
    for digest, rows in sweep.groupby("config_hash", sort=False):
        exported = export_cell(out / "sweep", digest, out / f"export-{digest}", data_home=data_home)
        release_dir = out / f"attack-{digest}"
        code = benchmark.main([*exported.argv, "--out", str(release_dir), "--no-progress"])
        if code:
            return code
        release = pd.read_csv(release_dir / "runs.csv")
        both = rows.merge(release, on=KEY, how="outer", suffixes=("_sweep", "_release"))
        both["equal"] = both["mi_ap_sweep"] == both["mi_ap_release"]
        mismatches += int((~both["equal"]).sum())
        first = rows.iloc[0]
        print(
            f"\n{first['dataset']} {first['mech']} {first['param_name']}={first['param_value']}"
            f" seed {first['seed']} (cell {digest}, release {exported.kind.value})"
        )
        columns = [
            *KEY,
            "mi_ap_sweep",
            "mi_ap_release",
            "equal",
            "worst_case_sweep",
            "worst_case_release",
        ]
        print(both[columns].to_string(index=False, float_format="%.6f"))
    print(f"\n{mismatches} attack result(s) whose MI AP differs")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
