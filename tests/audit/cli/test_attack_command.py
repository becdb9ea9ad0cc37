"""``benchmark.py attack``: every malformed input is one ``error:`` line and status 2, before
any attack runs (nothing is written to --out)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import benchmark

MODEL = """
import torch
from torch import nn
from audit.release import ExternalModel

class Dec(nn.Module):
    def __init__(self, out=64, fail=False):
        super().__init__()
        self.lin, self.out, self.fail = nn.Linear(4, out), out, fail
    def decode(self, z):
        if self.fail:
            raise RuntimeError("cuda out of memory")
        side = int(self.out ** 0.5)
        return torch.sigmoid(self.lin(z)).view(-1, 1, side, side)

def good():
    return ExternalModel(decode=Dec().decode, latent_dim=4)

def good_conditional():
    d = Dec()
    return ExternalModel(decode=lambda z, y: d.decode(z), latent_dim=4, conditional=True)

def failing():
    return ExternalModel(decode=Dec(fail=True).decode, latent_dim=4)

def wrong_shape():
    return ExternalModel(decode=Dec(out=49).decode, latent_dim=4)

def unbounded():
    d = Dec()
    return ExternalModel(decode=lambda z: 3 * d.decode(z), latent_dim=4)

def decoder_only():
    return ExternalModel(decode=Dec().decode, latent_dim=4)

def not_a_model():
    return 42
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
    members = arrays["members"]
    extra = {
        "dup-nonmembers": np.concatenate([arrays["non-members"][:19], members[3:4]]),
        "dup-reference": np.concatenate([arrays["reference"][:29], members[5:6]]),
        "few": members[:9],
        "shape": rng.random((20, 1, 7, 7)).astype(np.float32),
        "range": members * 2,
        "uint8": (members * 255).astype(np.uint8),
        "series": rng.random((20, 8, 8)).astype(np.float32) * 3,
    }
    for name, x in extra.items():
        paths[name] = tmp_path / f"{name}.npz"
        np.savez(paths[name], X=x)
    np.savez(tmp_path / "labelled.npz", X=members, y=np.zeros(20, np.int64))
    paths["labelled"] = tmp_path / "labelled.npz"
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


CASES = {
    "record shape": (dict(non_members="shape"), "differ in shape"),
    "range": (dict(non_members="range"), "float X has min"),
    "storage": (dict(non_members="uint8"), "store X differently"),
    "member among non-members": (
        dict(non_members="dup-nonmembers"),
        "also appear in --non-members",
    ),
    "member among references": (dict(reference="dup-reference"), "also appear in --reference"),
    "too few members": (dict(members="few"), "holds 9 records"),
    "labels on one side": (dict(members="labelled"), "both carry labels"),
    "missing file": (dict(samples="/nonexistent.npz"), "does not exist"),
    "no release": (dict(samples=None), "give the release"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_records_are_one_line_and_status_2(case, files, tmp_path, capsys) -> None:
    swap, message = CASES[case]
    swap = {k: (str(files[v]) if v in files else v) for k, v in swap.items()}
    code = benchmark.main(_argv(files, tmp_path, **swap))
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("error:") and message in err and "\n" not in err, err
    assert not (tmp_path / "out" / "runs.csv").exists()


MODEL_CASES = {
    "fails on one batch": ("--decoder", "failing", "decode failed on one batch"),
    "wrong output shape": ("--decoder", "wrong_shape", "expected a tensor of shape (2, 1, 8, 8)"),
    "outside the records' range": ("--decoder", "unbounded", "the records lie in [0, 1]"),
    "decoder given as a vae": ("--vae", "decoder_only", "without encode"),
    "not a model": ("--decoder", "not_a_model", "lacks decode(z, y)"),
    "no such function": ("--decoder", "nothing_here", "has no function 'nothing_here'"),
    "conditional without labels": ("--decoder", "good_conditional", "carry none"),
}


@pytest.mark.parametrize("case", sorted(MODEL_CASES))
def test_bad_models_are_one_line_and_status_2(case, files, tmp_path, capsys) -> None:
    flag, fn, message = MODEL_CASES[case]
    argv = _argv(files, tmp_path) + [flag, f"{files['model']}:{fn}"]
    code = benchmark.main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("error:") and message in err and "\n" not in err, err
    assert not (tmp_path / "out" / "runs.csv").exists()


def test_bad_arguments_are_one_line_and_status_2(files, tmp_path, capsys) -> None:
    for extra, message in (
        (["--epsilon", "1"], "--epsilon and --delta go together"),
        (["--epsilon", "-1", "--delta", "0"], "finite epsilon > 0"),
        (["--attack", "reconstruction"], "--attack reconstruction needs"),
        (["--attack", "gan"], "not a registered attack"),
        (["--modality", "series"], "series X must be floats"),
        (["--decoder", "x:y", "--vae", "x:y"], "not allowed with argument"),
    ):
        code = benchmark.main(_argv(files, tmp_path) + extra)
        err = capsys.readouterr().err.strip()
        assert code == 2, (extra, err)
        assert err.startswith("error:") and message in err and "\n" not in err, (extra, err)


def test_a_good_release_writes_rows_and_report(files, tmp_path, capsys) -> None:
    argv = _argv(files, tmp_path) + ["--decoder", f"{files['model']}:good", "--attack-samples", "2"]
    assert benchmark.main(argv) == 0, capsys.readouterr().err
    out = tmp_path / "out"
    assert (out / "runs.csv").is_file()
    text = (out / "report" / "report.md").read_text()
    assert text.startswith("# Attacks on the release model\n")  # the module file's stem
    assert "### At a glance (one line per threat model)" in text and "DCR baseline" in text
    assert (out / "report" / "report.html").is_file()
