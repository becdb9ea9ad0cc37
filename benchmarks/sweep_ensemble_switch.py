#!/usr/bin/env python
"""``benchmark.py`` with the CUDA ensemble switched on or off, for the GPU scripts
(``gpu_ensemble_check.sh``, ``gpu_main_command.sh``):

    python benchmarks/sweep_ensemble_switch.py on|off BENCHMARK_ARGS...

``off`` empties :data:`models.ensemble.ENSEMBLE_DEVICE_TYPES`, so every model trains alone (what a
cell does on the CPU); ``on`` runs ``benchmark.py`` unchanged.
"""

import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("on", "off"):
        sys.exit("usage: sweep_ensemble_switch.py on|off BENCHMARK_ARGS...")
    sys.path.insert(0, str(ROOT))
    if sys.argv[1] == "off":
        import models.ensemble as ensemble

        ensemble.ENSEMBLE_DEVICE_TYPES = frozenset()
    sys.argv = ["benchmark.py", *sys.argv[2:]]
    runpy.run_path(str(ROOT / "benchmark.py"), run_name="__main__")
