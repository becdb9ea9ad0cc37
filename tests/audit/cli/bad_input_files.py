"""The files the bad-input suite (``test_bad_inputs.py``) points its commands at: good record
sets and a model to attack, one damaged or misplaced file per path argument, and a sweep's
output to check and report on. Built once per module; the suite checks no command changes them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from audit import results
from audit.config import CellConfig
from audit.profiles import PROFILES, ProfileName
from tests.audit.check.runs import THRESHOLDS, runs, write_runs

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


def exits():
    sys.exit(0)


def exits_with_text():
    sys.exit("bye")


def chatty():
    for i in range(300):
        print("a line of the user's own output", i)
        print("and one on stderr", i, file=sys.stderr)
    return 42


def nan_everywhere():
    d = Dec()
    return ExternalModel(decode=lambda z: d.decode(z) * float("nan"), latent_dim=4)


def nan_off_the_mode():
    d = Dec()

    def decode(z):
        x = d.decode(z)
        far = z.abs().sum(1).view(-1, 1, 1, 1) > 4.5
        return torch.where(far, x * float("nan"), x)

    return ExternalModel(decode=decode, latent_dim=4)


def failing():
    def decode(z):
        raise RuntimeError("cuda out of memory")

    return ExternalModel(decode=decode, latent_dim=4)


def wrong_shape():
    lin = nn.Linear(4, 49)
    return ExternalModel(decode=lambda z: torch.sigmoid(lin(z)).view(-1, 1, 7, 7), latent_dim=4)


def unbounded():
    d = Dec()
    return ExternalModel(decode=lambda z: 3 * d.decode(z), latent_dim=4)


def conditional():
    d = Dec()
    return ExternalModel(decode=lambda z, y: d.decode(z), latent_dim=4, conditional=True)


def not_a_model():
    return 42


def exits_in_decode():
    def decode(z):
        sys.exit(3)

    return ExternalModel(decode=decode, latent_dim=4)
"""


def _images(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.random((n, 1, 8, 8)).astype(np.float32)


def build(fx: Path) -> Path:
    """Write every file into ``fx``; returns ``fx``."""
    rng = np.random.default_rng(0)
    members, non_members = _images(rng, 20), _images(rng, 20)
    reference, samples = _images(rng, 30), _images(rng, 30)
    sets = {
        "members": members,
        "non-members": non_members,
        "reference": reference,
        "samples": samples,
        # near-duplicates: one record moved by 1e-7 (float rounding) or 5e-4 (under the tolerance)
        "near-non-members": np.concatenate([non_members[:19], members[3:4] + 1e-7]),
        "near-reference": np.concatenate([reference[:29], np.clip(members[5:6] - 5e-4, 0, 1)]),
        "near-ref-non-members": np.concatenate([reference[:29], non_members[7:8] + 1e-7]),
        "dup-non-members": np.concatenate([non_members[:19], members[3:4]]),
        "dup-reference": np.concatenate([reference[:29], members[5:6]]),
        "few-members": members[:9],
        "shape-7x7": rng.random((20, 1, 7, 7)).astype(np.float32),
        "range-2": members * 2,
        "uint8-non-members": (non_members * 255).astype(np.uint8),
        "series-3": rng.random((20, 8, 8)).astype(np.float32) * 3,
        "images-3d": members[:, 0],  # (N, H, W) images in [0, 1], the npz image layout
        "images-3d-non-members": non_members[:, 0],
    }
    for name, x in sets.items():
        np.savez(fx / f"{name}.npz", X=x)
    np.savez(fx / "labelled-test.npz", X=_images(rng, 30), y=np.arange(30) % 2)
    np.savez(fx / "labelled-members.npz", X=members, y=np.zeros(20, np.int64))
    np.savez(fx / "good.npz", X=rng.random((200, 8, 8)).astype(np.float32), y=np.arange(200) % 2)
    np.savez(fx / "small-5x5.npz", X=rng.random((60, 5, 5)).astype(np.float32), y=np.arange(60) % 2)
    whole = (fx / "good.npz").read_bytes()
    (fx / "truncated.npz").write_bytes(whole[: len(whole) // 2])
    (fx / "truncated-members.npz").write_bytes((fx / "members.npz").read_bytes()[:300])
    (fx / "empty.npz").write_bytes(b"")
    (fx / "text.npz").write_text("X,y\n1,2\n")
    (fx / "folder.npz").mkdir()
    (fx / "adir").mkdir()
    (fx / "FILE").write_text("a plain file\n")
    (fx / "model.py").write_text(MODEL)
    (fx / "exits_at_import.py").write_text("import sys\nsys.exit(0)\n\ndef f():\n    return 1\n")
    (fx / "broken.py").write_text("def f(:\n")
    (fx / "latin1.py").write_bytes('NAME = "caf\xe9"\n\ndef f():\n    return 1\n'.encode("latin-1"))
    cell = CellConfig("digits", "none", "none", None, 0, PROFILES[ProfileName.QUICK])
    results.claim_run(fx / "sweep-out", [cell.canonical()])  # a sweep's manifest
    run = write_runs(fx / "run", runs())
    (fx / "thresholds.json").write_text(json.dumps(THRESHOLDS))
    (fx / "nested.json").write_text("[" * 100_000 + "]" * 100_000)
    (fx / "latin1.json").write_bytes('{"entries": "caf\xe9"}'.encode("latin-1"))
    (fx / "empty.json").write_text("")
    (fx / "not.json").write_text("entries: none\n")
    (fx / "emptydir").mkdir()
    assert run.is_dir()
    return fx


def listing(root: Path) -> dict[str, int]:
    """Every path under ``root`` with its size (folders -1): what a command may not change."""
    return {
        str(p.relative_to(root)): (-1 if p.is_dir() else p.stat().st_size)
        for p in sorted(root.rglob("*"))
    }
