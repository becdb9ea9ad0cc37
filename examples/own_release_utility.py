"""A labelled release with a test set, for the utility columns of ``benchmark.py attack``: writes
scikit-learn's digits as labelled members (150), non-members (150), reference records (200) and
test records (400), and "samples" that are the members plus N(0, 0.05) noise (a release that
copies its training records: every sample attack beats chance, and the samples teach a
classifier as much as the members do).

    python examples/own_release_utility.py OUT
    python benchmark.py attack --members OUT/members.npz --non-members OUT/non-members.npz \\
        --reference OUT/reference.npz --samples OUT/samples.npz --test OUT/test.npz \\
        --out OUT/audit
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

SIZES = {"members": 150, "non-members": 150, "reference": 200, "test": 400}


def main(out: Path, *, seed: int = 0) -> None:
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]  # (1797, 1, 8, 8) in [0, 1]
    y = digits.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(x))
    out.mkdir(parents=True, exist_ok=True)
    start = 0
    for name, n in SIZES.items():
        idx = order[start : start + n]
        np.savez(out / f"{name}.npz", X=x[idx], y=y[idx])
        start += n
    members = np.load(out / "members.npz")
    noisy = members["X"] + rng.normal(0, 0.05, members["X"].shape)
    np.savez(out / "samples.npz", X=np.clip(noisy, 0, 1).astype(np.float32), y=members["y"])


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "own-release-utility"))
