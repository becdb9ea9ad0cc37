"""``near_duplicates``: the records of one set within a tolerance of a record of another in every
value, found through block-mean keys, are exactly those a comparison of every pair finds."""

from __future__ import annotations

import numpy as np
import pytest

from audit.release.record_sets import DUPLICATE_TOLERANCE, near_duplicates


def _brute_force(a: np.ndarray, b: np.ndarray, tol: float) -> set[int]:
    diff = np.abs(a.reshape(len(a), 1, -1) - b.reshape(1, len(b), -1)).max(2)
    return set(np.flatnonzero((diff <= tol).any(0)).tolist())


@pytest.mark.parametrize("shape", [(1, 8, 8), (3, 5, 5), (20, 3), (7,)])
def test_the_keys_find_what_comparing_every_pair_finds(shape) -> None:
    rng = np.random.default_rng(0)
    a = rng.random((60, *shape)).astype(np.float32)
    b = rng.random((50, *shape)).astype(np.float32)
    moves = {3: 0.0, 10: 1e-7, 17: 9e-4, 24: 1.1e-3, 31: 0.5}  # b[j] = a[j] + a move
    for j, move in moves.items():
        sign = rng.choice([-1.0, 1.0], size=shape).astype(np.float32)
        b[j] = a[j] + sign * np.float32(move)
    b[40] = a[41]
    b[40].flat[0] += 2e-3  # all values equal but one, which is past the tolerance
    count, example = near_duplicates(a, b, DUPLICATE_TOLERANCE)
    expected = _brute_force(a, b, DUPLICATE_TOLERANCE)
    assert expected == {3, 10, 17}
    assert count == len(expected)
    i, j, diff = example
    assert j in expected and diff <= DUPLICATE_TOLERANCE
    assert np.abs(a[i] - b[j]).max() == pytest.approx(diff)


def test_records_of_a_constant_mean_are_still_told_apart() -> None:
    """Every record has the same mean (the first key cannot narrow anything): the other keys
    and the exact comparison still separate them."""
    rng = np.random.default_rng(1)
    a = rng.permuted(np.tile(np.linspace(0, 1, 64, dtype=np.float32), (40, 1)), axis=1)
    b = rng.permuted(np.tile(np.linspace(0, 1, 64, dtype=np.float32), (40, 1)), axis=1)
    b[5] = a[9]
    assert near_duplicates(a, b, DUPLICATE_TOLERANCE) == (1, (9, 5, 0.0))
    assert _brute_force(a, b, DUPLICATE_TOLERANCE) == {5}
