"""The console script ``dpvae-audit`` (pyproject's ``[project.scripts]``) is the same command line
as ``python benchmark.py``."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[3]
EPSILON = ["epsilon", "--mech", "ldp", "--eps-i", "1", "--channels", "3", "--height", "64"]
EPSILON += ["--width", "64"]


def console_script():
    """The callable ``dpvae-audit`` names in pyproject.toml."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["dpvae-audit"].partition(":")
    return getattr(importlib.import_module(module), name)


def test_the_console_script_runs_the_benchmark_command_line(capsys):
    assert console_script()(EPSILON) == 0
    script_last = capsys.readouterr().out.strip().splitlines()[-1]
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmark.py"), *EPSILON],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    assert script_last == result.stdout.strip().splitlines()[-1] == "192"


def test_the_console_script_refuses_bad_input_with_status_2(capsys):
    assert console_script()(["epsilon", "--mech", "nope"]) == 2
    assert capsys.readouterr().err.startswith("error:")
