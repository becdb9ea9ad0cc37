"""The pinwheel generator (Johnson et al. 2016), against a transcription of their SVAE code."""

from __future__ import annotations

import numpy as np
import pytest

from audit.datasets.pinwheel_data import PAPER_N, PAPER_SPIRALS, pinwheel


def johnson_reference(
    n: int, seed: int, radial_std: float, tangential_std: float, num_classes: int, rate: float
) -> tuple[np.ndarray, np.ndarray]:
    """``make_pinwheel_data`` of mattjj/svae (experiments/gmm_svae_synth.py), with its global
    ``npr`` calls replaced by the same draws from one default_rng, labels permuted alongside."""
    rng = np.random.default_rng(seed)
    rads = np.linspace(0, 2 * np.pi, num_classes, endpoint=False)
    labels = np.repeat(np.arange(num_classes), n // num_classes)
    features = rng.standard_normal((n, 2)) * np.array([radial_std, tangential_std])
    features[:, 0] += 1.0
    angles = rads[labels] + rate * np.exp(features[:, 0])
    rotations = np.stack([np.cos(angles), -np.sin(angles), np.sin(angles), np.cos(angles)])
    rotations = np.reshape(rotations.T, (-1, 2, 2))
    order = rng.permutation(n)
    return 10 * np.einsum("ti,tij->tj", features, rotations)[order], labels[order]


def test_shapes_dtypes_and_balanced_arms():
    x, y = pinwheel(seed=0)
    assert x.shape == (PAPER_N, 2) and x.dtype == np.float32
    assert y.shape == (PAPER_N,) and y.dtype == np.int64
    assert np.bincount(y).tolist() == [PAPER_N // PAPER_SPIRALS] * PAPER_SPIRALS
    assert np.isfinite(x).all()


def test_uneven_n_spreads_the_remainder():
    _, y = pinwheel(7, seed=1, num_classes=3)
    assert np.bincount(y).tolist() == [3, 2, 2]


def test_matches_johnson_et_al():
    x, y = pinwheel(400, seed=5, radial_std=0.3, tangential_std=0.05, num_classes=4, rate=0.25)
    ref_x, ref_y = johnson_reference(400, 5, 0.3, 0.05, 4, 0.25)
    np.testing.assert_array_equal(y, ref_y)
    np.testing.assert_allclose(x, ref_x.astype(np.float32), rtol=1e-6, atol=1e-5)


def test_seeded_and_no_global_state():
    state = np.random.get_state()[1].copy()
    a, b = pinwheel(seed=3), pinwheel(seed=3)
    c = pinwheel(seed=4)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])
    np.testing.assert_array_equal(np.random.get_state()[1], state)


def test_without_spread_points_lie_on_the_scaled_circle_at_the_arm_angles():
    x, y = pinwheel(8, seed=0, radial_std=0.0, tangential_std=0.0, rate=0.0, scale=2.0)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 2.0, rtol=1e-6)
    # Row vector (1, 0) times the rotation by a: (cos a, -sin a).
    angles = -np.arctan2(x[:, 1], x[:, 0]) % (2 * np.pi)
    np.testing.assert_allclose(angles, 2 * np.pi * y / 4, atol=1e-5)


def test_arms_are_separable_by_angle_at_the_default_spread():
    # The spirals turn by rate * exp(r); at the mean radius each arm keeps its own sector.
    x, y = pinwheel(seed=0)
    centres = np.stack([x[y == k].mean(0) for k in range(4)])
    nearest = np.argmin(((x[:, None] - centres[None]) ** 2).sum(-1), axis=1)
    assert (nearest == y).mean() > 0.9


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n": 0, "seed": 0},
        {"seed": None},
        {"seed": -1},
        {"seed": 0, "radial_std": -0.1},
        {"seed": 0, "num_classes": 0},
        {"seed": 0, "scale": 0.0},
    ],
)
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        pinwheel(**kwargs)
