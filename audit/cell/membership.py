"""A cell's records: D_train capped, D_atk's members and non-members (balanced or by fair
coins), and the attacker's reference records."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attacks import AttackData, Records
from audit.config import CellConfig
from audit.datasets import Dataset, Split
from audit.mechanisms import CellData
from dpvae_core.records import Modality
from dpvae_core.seeding import Purpose, numpy_rng
from models.training import Pair


@dataclass(frozen=True)
class AttackIndex:
    """A cell's attack index: which dataset records its D_atk holds, as rows of the loaded
    dataset (``Dataset.x``), saved so the report can show them without recomputing D_atk.

    ``index`` (n,): each D_atk record's row, in the order the attack scored them (the order of
    ``scores.npz``: members, then non-members); ``is_member`` (n,) bool; ``train_index`` (m,):
    the rows of the cell's D_train after the ``max_train`` cap (where the members come from; the
    report's class-latent samples read it).
    """

    index: np.ndarray
    is_member: np.ndarray
    train_index: np.ndarray

    def __post_init__(self) -> None:
        for name in ("index", "train_index"):
            value = getattr(self, name)
            if value.ndim != 1 or value.dtype.kind not in "iu" or (value < 0).any():
                raise ValueError(
                    f"{name} must be a 1-d array of non-negative integers, got "
                    f"{value.dtype} {value.shape}"
                )
        if self.is_member.dtype != np.bool_ or self.is_member.shape != self.index.shape:
            raise ValueError(
                f"is_member must be bool of index's shape {self.index.shape}, got "
                f"{self.is_member.dtype} {self.is_member.shape}"
            )


def cell_data(dataset: Dataset, split: Split, cell: CellConfig) -> CellData:
    """Tensors of the split, with D_train capped at ``profile.max_train`` (stratified, seeded)
    and, with ``profile.membership_coins``, D_atk's membership drawn by independent fair coins
    (:func:`membership_by_coins`; else D_atk is drawn balanced when attacked).

    A series dataset with ``channel_ranges`` is clipped into those fixed per-channel ranges and
    mapped to [-1, 1] record by record (no statistic of any record is used); every split, and so
    the mechanisms, the target VAE, the classifier and the attack, sees that one scale. The
    returned ``notes`` say so and go into every row of the cell.
    """
    train_idx = split.train
    cap = cell.profile.max_train
    if cap is not None and cap < len(train_idx):
        rng = numpy_rng(cell.seed, Purpose.SPLIT, "cap")
        subset = balanced_subset if cell.profile.balanced_train else _stratified_subset
        train_idx = subset(train_idx, dataset.y[train_idx], cap, rng)
    test_idx, members, others, notes = split.test, None, None, {}
    if cell.profile.membership_coins:
        train_idx, test_idx, members, others = membership_by_coins(train_idx, test_idx, cell)
        notes["attack_membership"] = MEMBERSHIP_NOTE
    scaler = dataset.channel_ranges

    def pair(idx: np.ndarray) -> Pair:
        x = dataset.x[idx] if scaler is None else scaler.transform(dataset.x[idx])
        return torch.from_numpy(x), torch.from_numpy(dataset.y[idx])

    n_total = len(train_idx) + len(split.val) + len(test_idx)
    if dataset.modality is Modality.SERIES:
        notes["series_scaling"] = "series given in [-1, 1]" if scaler is None else scaler.describe()
    return CellData(
        pair(train_idx),
        pair(split.val),
        pair(test_idx),
        dataset.num_classes,
        n_total,
        notes=notes,
        train_index=train_idx,
        test_index=test_idx,
        attack_members=members,
        attack_nonmembers=others,
    )


MEMBERSHIP_NOTE = (
    "D_atk's 2n candidates (n from the split's D_train, n from its D_test) each joined D_train "
    "on an independent fair coin (seeded per seed), so |D_train| and the member count vary"
)


def _attack_count(n_train: int, n_test: int, cell: CellConfig) -> int:
    """n: D_atk's records from each side of the split (balanced on average)."""
    limit = cell.profile.attack_records
    n_each = min(n_train, n_test)
    return n_each if limit is None else min(n_each, limit // 2)


def membership_by_coins(
    train_idx: np.ndarray, test_idx: np.ndarray, cell: CellConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(D_train rows, D_test rows, members' positions in D_train, non-members' positions in
    D_test): D_atk's candidates are n records of the split's D_train and n of its D_test
    (:func:`_attack_count`, seeded); each then goes to D_train on its own fair coin.

    Notes:
        Steinke, Nasr and Jagielski's one-run analysis (2023, Algorithm 1) needs each audited
        record included independently with probability 1/2; a balanced draw (exactly n members)
        is not that. The candidates are chosen before, and independently of, the coins, and
        every record outside them keeps its side, so D_atk's membership is i.i.d. fair coins
        given everything else, and every attack's scores give an epsilon lower bound
        (:mod:`audit.empirical.attack_bound`). Coins are keyed by the seed alone: every cell of
        a seed (its baseline included) has the same D_train and D_atk.
    """
    n_each = _attack_count(len(train_idx), len(test_idx), cell)
    rng = numpy_rng(cell.seed, Purpose.ATTACK, "records")
    candidates = np.concatenate(
        [
            rng.choice(train_idx, size=n_each, replace=False),
            rng.choice(test_idx, size=n_each, replace=False),
        ]
    )
    coins = numpy_rng(cell.seed, Purpose.ATTACK, "membership").random(candidates.size) < 0.5
    train = np.sort(np.concatenate([np.setdiff1d(train_idx, candidates), candidates[coins]]))
    test = np.sort(np.concatenate([np.setdiff1d(test_idx, candidates), candidates[~coins]]))
    members = np.searchsorted(train, np.sort(candidates[coins]))
    others = np.searchsorted(test, np.sort(candidates[~coins]))
    return train, test, members, others


def independent_membership(data: CellData) -> bool:
    """Whether D_atk's membership was drawn by independent coins (:func:`cell_data` does;
    data built by hand, with a balanced D_atk, does not)."""
    return data.attack_members is not None


def _stratified_subset(
    idx: np.ndarray, y: np.ndarray, k: int, rng: np.random.Generator
) -> np.ndarray:
    """k indices of ``idx`` keeping each class's share (largest remainders), sorted."""
    classes, counts = np.unique(y, return_counts=True)
    quota = counts * k / len(y)
    take = np.floor(quota).astype(int)
    for i in np.argsort(-(quota - take))[: k - take.sum()]:
        take[i] += 1
    chosen = [
        rng.choice(idx[y == c], size=t, replace=False) for c, t in zip(classes, take, strict=True)
    ]
    return np.sort(np.concatenate(chosen))


def balanced_subset(idx: np.ndarray, y: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k indices of ``idx`` spread over the classes as evenly as their sizes allow, sorted.

    Water-filling: every class gets min(n_c, t) records for the largest t whose total is at most
    k; the records left over go one each to the largest classes still holding more (ties: the
    lower label). LFW20, k = 200: 10 per person.
    """
    classes, counts = np.unique(y, return_counts=True)
    take = np.zeros(len(classes), dtype=int)
    while take.sum() < k:
        open_ = np.flatnonzero(take < counts)
        room = k - take.sum()
        if len(open_) <= room:
            take[open_] += 1
        else:
            largest = open_[np.argsort(-counts[open_], kind="stable")][:room]
            take[largest] += 1
    chosen = [
        rng.choice(idx[y == c], size=t, replace=False) for c, t in zip(classes, take, strict=True)
    ]
    return np.sort(np.concatenate(chosen))


def _attack_positions(data: CellData, cell: CellConfig) -> tuple[np.ndarray, np.ndarray]:
    """(members: positions in D_train, non-members: positions in D_test) of D_atk: those
    :func:`cell_data` drew by coins, or for data without them a balanced seeded draw."""
    if data.attack_members is not None and data.attack_nonmembers is not None:
        return data.attack_members, data.attack_nonmembers
    n_each = _attack_count(len(data.train[0]), len(data.test[0]), cell)
    rng = numpy_rng(cell.seed, Purpose.ATTACK, "records")
    members = np.sort(rng.choice(len(data.train[0]), size=n_each, replace=False))
    others = np.sort(rng.choice(len(data.test[0]), size=n_each, replace=False))
    return members, others


def attack_data(data: CellData, cell: CellConfig) -> AttackData:
    """D_atk: members from D_train, non-members from D_test, always UNPERTURBED."""
    members, others = _attack_positions(data, cell)
    x = torch.cat([data.train[0][members], data.test[0][others]])
    y = torch.cat([data.train[1][members], data.test[1][others]])
    is_member = np.concatenate([np.ones(len(members), bool), np.zeros(len(others), bool)])
    return AttackData(x=x, y=y, is_member=is_member)


MIN_REFERENCE_RECORDS = 20
"""Fewest reference records a cell hands the attacker; with fewer it holds none (DOMIAS's KDE
needs more records than its 10 PCA dimensions, and so few records estimate no density), and
the attacks needing them do not run. There is no upper cap: every D_test record outside D_atk
is a reference record, whatever the profile."""


def reference_positions(data: CellData, cell: CellConfig) -> np.ndarray:
    """Positions in D_test of the cell's reference records: every D_test record that is not one
    of D_atk's non-members (:func:`attack_data`), sorted.

    Notes:
        They are in neither D_train nor D_atk, and no training of the cell reads them: the
        target VAE trains on D_train (early stopping on D_val), ldp and vae-ldp perturb D_train
        and D_val, vae-ldp's perturbation model fits D_val or D_train, the classifiers fit D_gen
        or D_train (early stopping on a D_gen holdout or D_val). D_test scores the classifiers
        and the train-test gap only.
    """
    _, nonmembers = _attack_positions(data, cell)
    return np.setdiff1d(np.arange(len(data.test[0])), nonmembers)


def reference_records(data: CellData, cell: CellConfig) -> Records | None:
    """The attacker's reference records (:func:`reference_positions`), unperturbed; None when
    there are fewer than :data:`MIN_REFERENCE_RECORDS`."""
    positions = reference_positions(data, cell)
    if len(positions) < MIN_REFERENCE_RECORDS:
        return None
    return Records(data.test[0][positions], data.test[1][positions])


def attack_index(data: CellData, cell: CellConfig) -> AttackIndex | None:
    """D_atk of :func:`attack_data` as dataset rows (same records, same order), and D_train's
    rows; None where ``data`` does not say its rows (not cut from a dataset)."""
    if data.train_index is None or data.test_index is None:
        return None
    members, others = _attack_positions(data, cell)
    return AttackIndex(
        index=np.concatenate([data.train_index[members], data.test_index[others]]),
        is_member=np.concatenate([np.ones(len(members), bool), np.zeros(len(others), bool)]),
        train_index=np.asarray(data.train_index),
    )
