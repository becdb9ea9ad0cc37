"""D_train capped evenly per class (LFW20/LFW50: 10 per person), and the face profiles."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.cell.membership import balanced_subset
from audit.config import CellConfig
from audit.profiles import PROFILES, ProfileName, profile_for_dataset


def _naive_counts(counts: list[int], k: int) -> list[int]:
    """One record at a time to the open class with the fewest taken (ties: the largest class,
    then the lower label)."""
    take = [0] * len(counts)
    for _ in range(min(k, sum(counts))):
        open_ = [c for c in range(len(counts)) if take[c] < counts[c]]
        take[min(open_, key=lambda c: (take[c], -counts[c], c))] += 1
    return take


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.integers(1, 12), min_size=1, max_size=6), k=st.integers(0, 80))
def test_balanced_subset_equals_one_record_at_a_time(counts, k):
    y = np.repeat(np.arange(len(counts)), counts)
    idx = np.arange(len(y)) + 1000
    got = balanced_subset(idx, y, min(k, len(y)), np.random.default_rng(0))
    assert len(set(got)) == len(got) and np.all(np.diff(got) > 0)
    per_class = np.bincount(y[got - 1000], minlength=len(counts))
    assert per_class.tolist() == _naive_counts(counts, k)


def test_lfw20_sizes_give_ten_per_person():
    counts = [38, 21, 118, 61, 265, 54, 22, 19, 35, 26, 28, 21, 27, 30, 21, 20, 24, 26, 72, 25]
    y = np.repeat(np.arange(20), counts)  # LFW20's D_train at seed 0 (953 records)
    got = balanced_subset(np.arange(len(y)), y, 200, np.random.default_rng(0))
    assert np.bincount(y[got]).tolist() == [10] * 20
    assert len(balanced_subset(np.arange(len(y)), y, len(y), np.random.default_rng(0))) == 953


@pytest.mark.parametrize("profile", ["quick", "standard", "paper"])
def test_face_profiles_balance_d_train_and_use_the_face_embedding_classifier(profile):
    got = profile_for_dataset(ProfileName(profile), "lfw20")
    assert got.balanced_train and got.classifier == "face-embedding"
    other = profile_for_dataset(ProfileName(profile), "lfw-subset")
    assert not other.balanced_train and other.classifier is None


def test_face_settings_are_in_the_hash_and_unset_ones_are_not():
    quick = PROFILES[ProfileName.QUICK]
    plain = CellConfig("digits", "none", "none", None, 0, quick)
    assert "balanced_train" not in plain.canonical()["profile"]
    faces = CellConfig("lfw20", "none", "none", None, 0, quick)
    balanced = CellConfig(
        "lfw20",
        "none",
        "none",
        None,
        0,
        profile_for_dataset(ProfileName.QUICK, "lfw20"),
    )
    assert balanced.canonical()["profile"]["classifier"] == "face-embedding"
    assert balanced.config_hash != faces.config_hash


def test_an_unknown_classifier_is_refused_naming_the_known_ones():
    from dataclasses import replace

    with pytest.raises(ValueError, match="'vgg16'.*resnet, resnet-half, small-cnn"):
        replace(PROFILES[ProfileName.QUICK], classifier="vgg16")
