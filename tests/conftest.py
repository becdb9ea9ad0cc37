"""Shared fixtures: small datasets built in the real on-disk layouts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

LFW_TARGETS = ("pairsDevTrain.txt", "pairsDevTest.txt", "pairs.txt")


def build_lfw_fixture(data_home: Path, counts: dict[str, int], *, seed: int = 0) -> Path:
    """scikit-learn's LFW layout: lfw_home/{pairs*.txt, lfw_funneled/<Name>/<Name>_NNNN.jpg}.

    Each person's images share a tint so that identities are learnable; 250x250 RGB JPEGs as in
    the real archive.
    """
    from PIL import Image

    rng = np.random.default_rng(seed)
    home = data_home / "lfw_home"
    folder = home / "lfw_funneled"
    folder.mkdir(parents=True)
    for name in LFW_TARGETS:
        (home / name).write_text("")
    for person, n in counts.items():
        (folder / person).mkdir()
        tint = rng.integers(0, 256, size=3)
        for i in range(n):
            img = np.clip(tint + rng.normal(0, 30, size=(250, 250, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(img).save(folder / person / f"{person}_{i + 1:04d}.jpg")
    return data_home


@pytest.fixture
def lfw_home(tmp_path: Path) -> Path:
    """22 identities; the 20 largest have 3..12 images, two stragglers have 1 and 2."""
    counts = {f"Person_{chr(65 + i)}": 12 - (i // 2) for i in range(20)}
    counts.update({"Tiny_One": 1, "Tiny_Two": 2})
    return build_lfw_fixture(tmp_path / "data", counts)
