"""Each malformed input to ``benchmark.py attack``, and the one line and exit status it gets.

    python examples/own_release_bad_inputs.py DIR

writes small record files and a model module into DIR, runs every case as a subprocess and
prints ``$ <the flags that differ>``, then the exit status and the error line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODEL = """
import torch
from torch import nn
from audit.release import ExternalModel

net = nn.Sequential(nn.Linear(4, 64), nn.Sigmoid())

def good():
    return ExternalModel(decode=lambda z: net(z).view(-1, 1, 8, 8), latent_dim=4)

def conditional():
    return ExternalModel(decode=lambda z, y: net(z).view(-1, 1, 8, 8), latent_dim=4,
                         conditional=True)

def failing():
    def decode(z):
        raise RuntimeError("CUDA error: out of memory")
    return ExternalModel(decode=decode, latent_dim=4)

def wrong_shape():
    return ExternalModel(decode=lambda z: net(z).view(-1, 1, 64), latent_dim=4)

def unbounded():
    return ExternalModel(decode=lambda z: 255 * net(z).view(-1, 1, 8, 8), latent_dim=4)
"""


def _write(d: Path) -> None:
    rng = np.random.default_rng(0)
    images = {
        name: rng.random((n, 1, 8, 8)).astype(np.float32)
        for name, n in (("members", 20), ("non-members", 20), ("reference", 30), ("samples", 30))
    }
    m = images["members"]
    images |= {
        "dup-non-members": np.concatenate([images["non-members"][:19], m[3:4]]),
        "dup-reference": np.concatenate([images["reference"][:29], m[5:6]]),
        "few-members": m[:9],
        "small-images": rng.random((20, 1, 7, 7)).astype(np.float32),
        "0-255-floats": m * 255,
        "uint8-non-members": (images["non-members"] * 255).astype(np.uint8),
    }
    for name, x in images.items():
        np.savez(d / f"{name}.npz", X=x)
    np.savez(d / "labelled-members.npz", X=m, y=np.arange(20) % 2)
    (d / "model.py").write_text(MODEL)
    (d / "a-sweep").mkdir(exist_ok=True)
    (d / "a-sweep" / "run.json").write_text("{}")  # what a sweep's --out holds


CASES = [
    ("shape mismatch", {"--non-members": "small-images.npz"}),
    ("range: 0..255 stored as floats", {"--non-members": "0-255-floats.npz"}),
    ("range/storage mismatch between sets", {"--non-members": "uint8-non-members.npz"}),
    ("member among the non-members", {"--non-members": "dup-non-members.npz"}),
    ("member among the reference records", {"--reference": "dup-reference.npz"}),
    ("too few records", {"--members": "few-members.npz"}),
    ("labels on one side only", {"--members": "labelled-members.npz"}),
    ("model fails on one batch", {"--decoder": "model.py:failing"}),
    ("model returns the wrong shape", {"--decoder": "model.py:wrong_shape"}),
    ("model outside the records' range", {"--decoder": "model.py:unbounded"}),
    ("conditional model, unlabelled records", {"--decoder": "model.py:conditional"}),
    ("decoder given as --vae", {"--vae": "model.py:good"}),
    ("entry point missing", {"--decoder": "model.py:nothing"}),
    ("claim without delta", {"--epsilon": "1"}),
    ("attack the release does not allow", {"--attack": "reconstruction"}),
    ("a release name of two lines", {"--name": "my\nrelease"}),
    ("a release name with a slash", {"--name": "faces/v2"}),
    ("--out holding a sweep", {"--out": "a-sweep"}),
]


def main(d: Path) -> int:
    d.mkdir(parents=True, exist_ok=True)
    _write(d)
    base = {
        "--members": "members.npz",
        "--non-members": "non-members.npz",
        "--reference": "reference.npz",
        "--samples": "samples.npz",
    }
    for title, change in CASES:
        flags = {**base, **change}
        argv = [
            sys.executable,
            str(ROOT / "benchmark.py"),
            "attack",
            "--no-progress",
            "--out",
            str(d / "out"),
        ]
        for flag, value in flags.items():
            argv += [
                flag,
                str(d / value) if value.endswith((".npz", ".py")) or ".py:" in value else value,
            ]
        done = subprocess.run(argv, capture_output=True, text=True, cwd=d, check=False)
        shown = " ".join(f"{k} {v!r}" if "\n" in v else f"{k} {v}" for k, v in change.items())
        print(f"{title}: `{shown}`\n    exit {done.returncode}: {done.stderr.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "bad-inputs")))
