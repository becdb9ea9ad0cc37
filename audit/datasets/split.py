"""The seeded stratified split of the trade-off paper (Figure 1) into D_train, D_val and D_test, and
the class counts it needs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from sklearn.model_selection import train_test_split

from audit.datasets.dataset import Dataset, DatasetUnavailable
from dpvae_core.seeding import Purpose, derive_seed


@dataclass(frozen=True)
class Split:
    """Index arrays into a Dataset for D_train, D_val and D_test (disjoint, stratified)."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    sizes: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "sizes", {"train": len(self.train), "val": len(self.val), "test": len(self.test)}
        )


def min_records_per_class(fractions: tuple[float, float, float]) -> int:
    """The fewest records a class needs for :func:`stratified_split` with ``fractions``.

    A class needs at least one record in D_train (``c * f_train >= 1``) and at least two in the
    remainder that is split, stratified again, into D_val and D_test
    (``c * (f_val + f_test) >= 2``): 4 for the trade-off paper's 50/20/30 split, 10 for 10/10/80.
    """
    train, val, test = fractions
    need = max(2.0, 1 / train, 2 / (val + test))
    return math.ceil(round(need, 9))


def check_class_counts(
    y: np.ndarray,
    *,
    fractions: tuple[float, float, float],
    class_names: tuple[str, ...] | None = None,
    source: str = "dataset",
) -> None:
    """Refuse labels the stratified split cannot handle: fewer than two classes, or a class
    with fewer than :func:`min_records_per_class` records; the error names the class."""
    labels, counts = np.unique(y, return_counts=True)

    def name(label: int) -> str:
        return repr(class_names[label]) if class_names is not None else repr(int(label))

    if len(labels) < 2:
        held = name(labels[0]) if len(labels) else "none"
        raise DatasetUnavailable(
            f"{source}: y holds {len(labels)} class(es) ({held}); the utility classifier and "
            "the split need at least 2 classes"
        )
    n_train = math.floor(fractions[0] * len(y))
    n_val = math.floor((len(y) - n_train) * fractions[1] / (fractions[1] + fractions[2]))
    sizes = {"D_train": n_train, "D_val": n_val, "D_test": len(y) - n_train - n_val}
    small = {k: v for k, v in sizes.items() if v < len(labels)}
    if small:
        part, size = next(iter(small.items()))
        raise DatasetUnavailable(
            f"{source}: {len(y)} records are too few for {len(labels)} classes: {part} would "
            f"hold {size} record(s), fewer than the classes the stratified split must put in it"
        )
    need = min_records_per_class(fractions)
    low = int(np.argmin(counts))
    if counts[low] < need:
        shares = "/".join(f"{round(100 * f)}" for f in fractions)
        raise DatasetUnavailable(
            f"{source}: class {name(labels[low])} has {counts[low]} record(s); the stratified "
            f"{shares} split needs at least {need} per class (one in D_train, two to split "
            "into D_val and D_test)"
        )


def stratified_split(
    y: np.ndarray,
    *,
    fractions: tuple[float, float, float],
    seed: int,
    class_names: tuple[str, ...] | None = None,
) -> Split:
    """Seeded stratified split into train/val/test with the given fractions (summing to 1).

    Raises ValueError, naming the class, where a class has too few records for the split
    (:func:`check_class_counts`).
    """
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or not math.isclose(sum(fractions), 1):
        raise ValueError(
            f"split fractions must be three positive numbers summing to 1, got {fractions}"
        )
    check_class_counts(y, fractions=fractions, class_names=class_names)
    idx = np.arange(len(y))
    split_seed = derive_seed(seed, Purpose.SPLIT) % (2**32)
    train, rest = train_test_split(
        idx, train_size=fractions[0], stratify=y, random_state=split_seed
    )
    val_share = fractions[1] / (fractions[1] + fractions[2])
    val, test = train_test_split(
        rest, train_size=val_share, stratify=y[rest], random_state=split_seed + 1
    )
    return Split(train=np.sort(train), val=np.sort(val), test=np.sort(test))


def dataset_split(dataset: Dataset, seed: int) -> Split:
    """The seed's split of ``dataset``: :func:`stratified_split` of its labels with its own
    fractions, its class names in the message where a class is too small. The one split every
    cell, audit and export of that seed sees."""
    return stratified_split(
        dataset.y,
        fractions=dataset.split_fractions,
        seed=seed,
        class_names=dataset.class_names,
    )
