"""Issue 30, item 13: bad input stops with one ``error:`` line naming the value, status 2,
before any work (each case crashed or gave a misleading message before)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from audit.datasets import DatasetUnavailable, load_dataset, stratified_split


def test_a_directory_given_as_npz_is_named_a_directory(tmp_path):
    folder = tmp_path / "data.npz"
    folder.mkdir()
    with pytest.raises(DatasetUnavailable, match="is a directory; give the .npz file itself"):
        load_dataset(f"npz:{folder}")


def test_sixteen_bit_integer_images_get_a_scaling_hint_not_the_binary_one(tmp_path: Path):
    path = tmp_path / "deep.npz"
    np.savez(path, X=np.full((40, 8, 8), 4000, np.int32), y=np.arange(40) % 2)
    with pytest.raises(DatasetUnavailable) as info:
        load_dataset(f"npz:{path}")
    assert "max 4000" in str(info.value) and "more than 8 bits" in str(info.value)
    assert "binary" not in str(info.value)


def _small_npz(path: Path, side: int = 5) -> Path:
    rng = np.random.default_rng(0)
    np.savez(path, X=rng.random((60, side, side), dtype=np.float32), y=np.arange(60) % 2)
    return path


def test_the_hint_for_small_images_names_attacks_every_mechanism_allows(tmp_path):
    from audit.config import SweepConfig
    from audit.profiles import PROFILES, ProfileName
    from audit.sweep.plan import check_sweep

    def data(side: int):
        dataset = load_dataset(f"npz:{_small_npz(tmp_path / f'{side}.npz', side)}")
        split = stratified_split(dataset.y, fractions=dataset.split_fractions, seed=0)
        return dataset, {0: split}

    config = SweepConfig(
        dataset="npz:small.npz",
        mechs=("dp2vae",),  # decoder only: no likelihood attack
        profile_name=ProfileName.QUICK,
        profile=PROFILES[ProfileName.QUICK],
        out=tmp_path / "out",
        seeds=(0,),
        grid=(1.0,),
    )
    with pytest.raises(ValueError, match="--mech none\\)") as info:
        check_sweep(config, data(5))  # the baseline none runs the reconstruction attack
    hint = str(info.value).split("--attack ")[1]
    assert hint == "monte-carlo latent-search domias"
    check_sweep(replace(config, attacks=tuple(hint.split())), data(5))  # the hint passes
    check_sweep(config, data(7))  # 7x7 fits the window
