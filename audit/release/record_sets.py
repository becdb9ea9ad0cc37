"""The records a release attack reads: members, non-members, reference records and samples, each
an ``.npz`` in the format of ``npz:`` datasets (``X``, and ``y`` where labels are known), or
arrays given to the Python API; validated together before any attack runs."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import numpy as np
import torch

from attacks import AttackData, Records
from audit.datasets.dataset import DatasetUnavailable
from audit.datasets.npz import NPZ_READ_ERRORS, npz_images, npz_pixels
from dpvae_core.path_checks import check_input_file
from dpvae_core.records import Modality

#: Fewest members, and fewest non-members, a release attack scores: the held-out worst case halves
#: each side (:func:`attacks.worst_case.split_halves`), and with 10 + 10 records a blind
#: attacker's MI AP reaches 0.761 one time in twenty (95 % quantile of 20,000 seeded random
#: rankings), so fewer measure next to nothing.
MIN_SIDE = 10
#: Fewest reference records and samples: the suite's own floor for reference records
#: (:data:`audit.cell.membership.MIN_REFERENCE_RECORDS`; DOMIAS's KDE needs more records than its 10
#: PCA dimensions).
MIN_POOL = 20
#: Series values are taken in [-1, 1], the scale the suite's series models and attacks use.
SERIES_RANGE = (-1.0, 1.0)


#: Records within this of each other in every value (their largest absolute difference) are one
#: record to the attacks, so one of them in two of the sets is refused: a quarter of an 8-bit
#: pixel step (1/255 = 0.0039), so that 0..255 pixels never fall within it unless equal, while a
#: copy moved by float rounding (1e-7, which took the worst case from 0.955 to 0.876 unnoticed)
#: or by noise under a quarter step is caught.
DUPLICATE_TOLERANCE = 1e-3
#: Coordinate blocks whose means prefilter the pairs (:func:`near_duplicates`).
_KEY_BLOCKS = 32
#: Values compared at once (pairs times record size) where the pairs are checked exactly.
_CHUNK_VALUES = 1 << 24


def near_duplicates(
    a: np.ndarray, b: np.ndarray, tol: float
) -> tuple[int, tuple[int, int, float] | None]:
    """(how many records of ``b`` lie within ``tol`` of a record of ``a`` in every value, the
    first such (i, j, largest difference)).

    Two records within ``tol`` in every value have block means within ``tol`` too (a mean of
    differences is at most their largest), so the pairs are first narrowed by the means of up
    to 32 blocks of coordinates (sorted on the first) and only those left are compared value by
    value: about linear in the records for data without near-duplicates.
    """
    flat_a = a.reshape(len(a), -1)
    flat_b = b.reshape(len(b), -1)
    width = flat_a.shape[1]
    blocks = np.array_split(np.arange(width), min(width, _KEY_BLOCKS))
    key_a = np.stack([flat_a[:, idx].mean(1, dtype=np.float64) for idx in blocks], 1)
    key_b = np.stack([flat_b[:, idx].mean(1, dtype=np.float64) for idx in blocks], 1)
    slack = tol * (1 + 1e-6) + 1e-12  # the block means' float rounding
    order = np.argsort(key_a[:, 0], kind="stable")
    first = key_a[order, 0]
    lo = np.searchsorted(first, key_b[:, 0] - slack, "left")
    hi = np.searchsorted(first, key_b[:, 0] + slack, "right")
    found = np.zeros(len(b), bool)
    example = None
    step = max(1, _CHUNK_VALUES // max(width, 1))
    for j in np.flatnonzero(hi > lo):
        candidates = order[lo[j] : hi[j]]
        candidates = candidates[np.abs(key_a[candidates] - key_b[j]).max(1) <= slack]
        for start in range(0, len(candidates), step):
            chunk = candidates[start : start + step]
            diff = np.abs(flat_a[chunk] - flat_b[j]).max(1)
            near = np.flatnonzero(diff <= tol)
            if len(near):
                found[j] = True
                if example is None:
                    example = (int(chunk[near[0]]), int(j), float(diff[near[0]]))
                break
    return int(found.sum()), example


class Role(str, Enum):
    """What a set of records is to the release attack (the flag it came from names it in errors)."""

    MEMBERS = "members"
    NON_MEMBERS = "non-members"
    REFERENCE = "reference"
    SAMPLES = "samples"
    TEST = "test"


@dataclass(frozen=True)
class RecordSet:
    """One set of records, validated for its modality.

    Attributes:
        role: which set it is.
        x: (n, *shape) float32: images (n, C, H, W) in [0, 1] or series (n, T, F) in [-1, 1].
        y: (n,) int64 labels, or None where the set carries none.
        stored: how ``X`` was stored (``integer`` 0..255 pixels or ``float``), which every
            attacked set must share.
    """

    role: Role
    x: np.ndarray
    y: np.ndarray | None
    stored: str

    def __len__(self) -> int:
        return int(self.x.shape[0])

    @property
    def record_shape(self) -> tuple[int, ...]:
        return tuple(self.x.shape[1:])

    @classmethod
    def from_arrays(
        cls, role: Role, x: np.ndarray, y: np.ndarray | None, *, modality: Modality
    ) -> RecordSet:
        """The set of ``x`` (and ``y``), checked as an ``npz:`` file's X and y are."""
        role, modality = Role(role), Modality(modality)
        where = f"--{role.value}"
        x = np.asarray(x)
        if modality is Modality.IMAGE:
            values = npz_pixels(npz_images(x, where), where)
        elif modality is Modality.SERIES:
            values = _series(x, where)
        else:
            raise ValueError(
                f"{where}: modality {modality.value!r} is not supported; use image or series"
            )
        stored = "integer" if np.issubdtype(x.dtype, np.integer) else "float"
        return cls(role, values, _labels(y, len(values), where), stored)


def _series(x: np.ndarray, where: str) -> np.ndarray:
    if x.ndim != 3 or min(x.shape) < 1 or not np.issubdtype(x.dtype, np.floating):
        raise DatasetUnavailable(
            f"{where}: series X must be floats of shape (N, T, F) with N, T, F >= 1, got "
            f"{x.dtype} of shape {x.shape}"
        )
    if not np.isfinite(x).all():
        raise DatasetUnavailable(f"{where}: X contains NaN or infinity")
    low, high = float(x.min()), float(x.max())
    if low < SERIES_RANGE[0] or high > SERIES_RANGE[1]:
        raise DatasetUnavailable(
            f"{where}: series X has min {low:.4g} and max {high:.4g}; allowed: values in "
            f"[{SERIES_RANGE[0]:g}, {SERIES_RANGE[1]:g}] (scale each channel by a fixed range)"
        )
    return np.ascontiguousarray(x, dtype=np.float32)


def _labels(y: np.ndarray | None, n: int, where: str) -> np.ndarray | None:
    if y is None:
        return None
    y = np.asarray(y)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer) or (y < 0).any():
        raise DatasetUnavailable(
            f"{where}: y must be a 1-D array of non-negative integer labels, got {y.dtype} of "
            f"shape {y.shape}"
        )
    if len(y) != n:
        raise DatasetUnavailable(f"{where}: X holds {n} records but y {len(y)} labels")
    return y.astype(np.int64)


def read_records(path: Path, role: Role, *, modality: Modality) -> RecordSet:
    """The records of the ``.npz`` at ``path``: ``X`` as an ``npz:`` dataset's (series: floats
    (N, T, F) in [-1, 1]) and ``y`` where present."""
    path, where = Path(path), f"--{Role(role).value} {str(path)!r}"
    check_input_file(path, f"--{Role(role).value}", kind=".npz file")
    try:
        with np.load(path, allow_pickle=False) as data:
            if "X" not in data.files:
                raise DatasetUnavailable(f"{where} lacks array X (found {sorted(data.files)})")
            x = data["X"]
            y = data["y"] if "y" in data.files else None
    except DatasetUnavailable:
        raise
    except NPZ_READ_ERRORS as exc:
        raise DatasetUnavailable(
            f"{where} is not a readable .npz archive ({type(exc).__name__}); write it with "
            "numpy.savez(path, X=..., y=...)"
        ) from None
    try:
        return RecordSet.from_arrays(role, x, y, modality=modality)
    except ValueError as exc:
        raise DatasetUnavailable(str(exc).replace(f"--{Role(role).value}", where, 1)) from None


@dataclass(frozen=True)
class ReleaseRecords:
    """Members, non-members and the optional reference records and samples of one release attack,
    checked against each other: one record shape, one way of storing the attacked sets (integer
    pixels or floats: a set stored otherwise differs in its rounding, which an attack reads as
    membership), labels on both attacked sets or on neither, no record of the members among the
    non-members or the reference records and none of the non-members among the reference
    records (equal within :data:`DUPLICATE_TOLERANCE` in every value), and enough records for
    the attacks and the chance band (:data:`MIN_SIDE`, :data:`MIN_POOL`)."""

    members: RecordSet
    non_members: RecordSet
    reference: RecordSet | None = None
    samples: RecordSet | None = None

    def __post_init__(self) -> None:
        sets = [s for s in (self.members, self.non_members, self.reference, self.samples) if s]
        for expected, found in zip(Role, (self.members, self.non_members), strict=False):
            if found.role is not expected:
                raise ValueError(f"expected the {expected.value} set, got {found.role.value}")
        shapes = {s.role.value: s.record_shape for s in sets}
        if len(set(shapes.values())) > 1:
            raise ValueError(f"the sets' records differ in shape: {_show(shapes)}")
        attacked = [s for s in sets if s.role is not Role.SAMPLES]
        if len({s.stored for s in attacked}) > 1:
            stored = {s.role.value: s.stored for s in attacked}
            raise ValueError(
                f"the sets store X differently ({_show(stored)}); store every set as integer "
                "0..255 pixels or every set as floats, or rounding alone tells them apart"
            )
        if (self.members.y is None) != (self.non_members.y is None):
            raise ValueError("--members and --non-members must both carry labels y, or neither")
        if self.samples is not None and (self.samples.y is None) != (self.members.y is None):
            raise ValueError(
                "--samples and the attacked sets must both carry labels y, or neither (the "
                "Monte-Carlo attack compares a record with the samples of its label)"
            )
        self._check_counts()
        self._check_series_scale()
        self._check_disjoint(self.members, self.non_members)
        if self.reference is not None:
            self._check_disjoint(self.members, self.reference)
            self._check_disjoint(self.non_members, self.reference)

    def _check_counts(self) -> None:
        for s, least in ((self.members, MIN_SIDE), (self.non_members, MIN_SIDE)):
            if len(s) < least:
                raise ValueError(
                    f"--{s.role.value} holds {len(s)} records; the attacks, the held-out worst "
                    f"case and the chance band need at least {least}"
                )
        for s in (self.reference, self.samples):
            if s is not None and len(s) < MIN_POOL:
                raise ValueError(
                    f"--{s.role.value} holds {len(s)} records; at least {MIN_POOL} are needed "
                    "(DOMIAS's and the PCA features' density estimates), or leave it out"
                )

    def _check_series_scale(self) -> None:
        """Series are scaled to [-1, 1], each channel by a fixed range whose middle goes to 0;
        attacked series none of whose values is below 0 are images or unscaled data, which
        the attacks would read on the wrong scale."""
        if len(self.members.record_shape) != 2:
            return
        low = min(float(self.members.x.min()), float(self.non_members.x.min()))
        if low >= 0:
            raise ValueError(
                f"--modality series, but no value of --members and --non-members is below 0 "
                f"(min {low:.4g}): series are scaled to [{SERIES_RANGE[0]:g}, "
                f"{SERIES_RANGE[1]:g}], each channel by a fixed range; images (N, H, W) in "
                "[0, 1] need --modality image"
            )

    @staticmethod
    def _check_disjoint(a: RecordSet, b: RecordSet) -> None:
        count, example = near_duplicates(b.x, a.x, DUPLICATE_TOLERANCE)
        if count:
            j, i, diff = example
            raise ValueError(
                f"{count} record(s) of --{a.role.value} also appear in --{b.role.value} (equal "
                f"within {DUPLICATE_TOLERANCE:g} in every value, e.g. {a.role.value}[{i}] and "
                f"{b.role.value}[{j}], largest difference {diff:.3g}); a record is either a "
                "member or not: remove them from one of the sets"
            )

    @property
    def labelled(self) -> bool:
        """Whether the attacked records carry labels (else every record reads as label 0)."""
        return self.members.y is not None

    def attack_data(self) -> AttackData:
        """D_atk: the members, then the non-members (labels 0 where the sets carry none)."""
        x = np.concatenate([self.members.x, self.non_members.x])
        is_member = np.concatenate(
            [np.ones(len(self.members), bool), np.zeros(len(self.non_members), bool)]
        )
        return AttackData(
            torch.from_numpy(x), _label_tensor(self.members, self.non_members), is_member
        )

    def pool_labels(self) -> np.ndarray:
        """The labels of every attacked record, members and non-members together (0 where the
        sets carry none): their counts are those of the pool of candidates, whichever of them
        are members, so what is drawn from them does not depend on the membership coins."""
        return _label_tensor(self.members, self.non_members).numpy()

    def records(self, role: Role) -> Records | None:
        """The reference records or the samples as the attacks take them (None if absent)."""
        found = self.reference if Role(role) is Role.REFERENCE else self.samples
        if found is None:
            return None
        return Records(torch.from_numpy(found.x), _label_tensor(found))


def _label_tensor(*sets: RecordSet) -> torch.Tensor:
    parts = [s.y if s.y is not None else np.zeros(len(s), np.int64) for s in sets]
    return torch.from_numpy(np.concatenate(parts))


def _show(values: dict[str, object]) -> str:
    return ", ".join(f"{k} {v}" for k, v in values.items())
