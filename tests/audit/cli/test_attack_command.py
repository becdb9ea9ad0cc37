"""``benchmark.py attack`` on a good release: rows and report, and a clean output however much
the user's code prints (its bad inputs: ``test_bad_inputs.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import benchmark
from dpvae_core.validation import resolve_device

MODEL = """
import sys
import torch
from torch import nn
from audit.release import ExternalModel

class Dec(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 64)
    def decode(self, z):
        return torch.sigmoid(self.lin(z)).view(-1, 1, 8, 8)

def good():
    return ExternalModel(decode=Dec().decode, latent_dim=4)

print("the module prints on import")

def chatty():
    print("the entry point prints")
    print("on stderr too", file=sys.stderr)
    return good()
"""


def _images(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.random((n, 1, 8, 8)).astype(np.float32)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    arrays = {
        "members": _images(rng, 20),
        "non-members": _images(rng, 20),
        "reference": _images(rng, 30),
        "samples": _images(rng, 30),
    }
    paths = {}
    for name, x in arrays.items():
        paths[name] = tmp_path / f"{name}.npz"
        np.savez(paths[name], X=x)
    (tmp_path / "model.py").write_text(MODEL)
    paths["model"] = tmp_path / "model.py"
    return paths


def _argv(files: dict[str, Path], tmp_path: Path, **swap: str) -> list[str]:
    args = {
        "--members": str(files["members"]),
        "--non-members": str(files["non-members"]),
        "--reference": str(files["reference"]),
        "--samples": str(files["samples"]),
        "--out": str(tmp_path / "out"),
    }
    for key, value in swap.items():
        flag = "--" + key.replace("_", "-")
        if value is None:
            args.pop(flag)
        else:
            args[flag] = value
    return ["attack", "--no-progress", *[x for kv in args.items() for x in kv]]


def test_a_good_release_writes_rows_and_report(files, tmp_path, capsys) -> None:
    argv = _argv(files, tmp_path) + ["--decoder", f"{files['model']}:good", "--attack-samples", "2"]
    assert benchmark.main(argv) == 0, capsys.readouterr().err
    out = tmp_path / "out"
    assert (out / "runs.csv").is_file()
    text = (out / "report" / "report.md").read_text()
    assert text.startswith("# Attacks on the release model\n")  # the module file's stem
    assert "### At a glance (one line per threat model)" in text and "DCR baseline" in text
    assert (out / "report" / "report.html").is_file()


def test_what_the_users_code_prints_stays_out_of_the_output(files, tmp_path, capsys) -> None:
    """The module and entry point print on stdout and stderr: the command's stdout stays empty
    and its stderr holds its own lines only, the device as the attacks start and where the rows
    went (the prints go to the log, shown with -v)."""
    argv = _argv(files, tmp_path) + [
        "--decoder",
        f"{files['model']}:chatty",
        "--attack-samples",
        "2",
    ]
    assert benchmark.main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 2 and "rows in" in lines[1], captured.err
    assert lines[0] == resolve_device("auto").line(), captured.err  # "device: cpu (auto: ..."
