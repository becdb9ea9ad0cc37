"""The face-embedding classifier (issue 27): dlib's frozen face descriptor and a logistic
regression. Real-face checks need the faces extra and the real LFW images (DPVAE_LFW_HOME); they
skip, with the reason, where either is absent."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models import face_embedding
from models.face_embedding import CHIP_SIDE, _chips, embedding_accuracy
from tests.audit.check.test_lfw20_thresholds import lfw_home


def test_chips_are_contiguous_150_pixel_uint8_images():
    x = torch.full((3, 3, 64, 64), 0.5)
    x[1] = 1.0
    chips = _chips(x)
    assert len(chips) == 3
    assert all(c.shape == (CHIP_SIDE, CHIP_SIDE, 3) and c.dtype == np.uint8 for c in chips)
    assert all(c.flags["C_CONTIGUOUS"] for c in chips)
    # 0.5 * 255 = 127.5 rounds to 128, or to 127 where bilinear resizing leaves 0.4999999
    assert np.isin(chips[0], (127, 128)).all() and (chips[1] == 255).all()


def test_a_sweep_with_the_face_classifier_but_no_extra_is_refused_before_any_work(
    tmp_path, capsys, monkeypatch
):
    from audit import sweep
    from benchmark import main

    monkeypatch.setattr(sweep, "face_embedding_available", lambda: False)
    out = tmp_path / "out"
    code = main(
        ["--dataset", "digits", "--mech", "none", "--profile", "quick", "--classifier",
         "face-embedding", "--out", str(out), "--no-progress"]
    )  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "face-embedding" in err[0] and "pip install -e '.[faces]'" in err[0]
    assert not out.exists()


def _faces(people: int, per_person: int) -> tuple[torch.Tensor, torch.Tensor]:
    from audit.datasets import load_dataset

    ds = load_dataset("lfw20", data_home=lfw_home())
    picks = [np.flatnonzero(ds.y == c)[:per_person] for c in range(people)]
    idx = np.concatenate(picks)
    return torch.from_numpy(ds.x[idx]), torch.from_numpy(ds.y[idx])


@pytest.mark.skipif(not face_embedding.available(), reason="the faces extra is not installed")
@pytest.mark.skipif(lfw_home() is None, reason="real LFW images absent: set DPVAE_LFW_HOME")
def test_the_descriptor_tells_real_lfw20_people_apart_and_not_shuffled_labels():
    """10 people, 4 training faces, 1 validation and 3 test faces each (30 test faces, chance
    0.1). The descriptor's codes must separate them: accuracy >= 0.6 (a blind guesser reaches
    it with probability below 1e-12: binomial(30, 0.1)). The same pipeline with the training
    labels shuffled across people must stay <= 0.4 (its mean is 0.1; the test can fail)."""
    x, y = _faces(10, 8)
    slot = torch.arange(len(y)) % 8
    train, val, test = slot < 4, slot == 4, slot > 4
    acc = embedding_accuracy((x[train], y[train]), (x[val], y[val]), (x[test], y[test]))
    assert acc >= 0.6
    order = torch.randperm(int(train.sum()), generator=torch.Generator().manual_seed(0))
    shuffled = y[train][order]
    wrong = embedding_accuracy((x[train], shuffled), (x[val], y[val]), (x[test], y[test]))
    assert wrong <= 0.4
