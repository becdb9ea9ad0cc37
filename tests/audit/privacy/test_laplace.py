import numpy as np
import pytest

from audit.datasets.series import windows
from audit.privacy import laplace_claim
from audit.privacy.laplace import max_perturbations_per_window, max_windows_per_measurement


def test_claim_composes_over_the_window():
    claim = laplace_claim(eps_i=0.5, window_length=500, n_features=12, n_records=10)
    assert claim.epsilon == pytest.approx(0.5 * 500 * 12)
    assert claim.extra["eps_per_measurement"] == 0.5
    assert claim.extra["epsilon_dataset_sum"] == pytest.approx(10 * 0.5 * 500 * 12)
    assert claim.delta == 0


@pytest.mark.parametrize("length, stride", [(10, 10), (10, 5), (10, 3), (10, 4), (10, 20), (7, 1)])
def test_overlap_counts_match_the_windows_the_code_cuts(length, stride):
    """Brute force: cut a long recording of row indices with the windows function and count."""
    rows = np.arange(400, dtype=np.float64)[:, None]
    cut = windows(rows, length=length, stride=stride)[..., 0].astype(int)  # (k, length)
    copies = np.bincount(cut.ravel(), minlength=400)
    assert max_windows_per_measurement(window_length=length, stride=stride) == copies.max()
    per_window = copies[cut].sum(axis=1)  # perturbations of each window's time steps, in all
    assert max_perturbations_per_window(window_length=length, stride=stride) == per_window.max()


def test_claim_counts_overlapping_windows():
    # MotionSense at half overlap: 500-sample windows every 250 samples, 12 sensors.
    claim = laplace_claim(eps_i=0.5, window_length=500, n_features=12, window_stride=250)
    assert claim.extra["eps_per_measurement"] == 1.0
    assert claim.extra["windows_per_measurement"] == 2
    assert claim.epsilon == pytest.approx(0.5 * 12 * 1000)
    assert "perturbed in up to 2 windows" in claim.extra["window_overlap"]
    plain = laplace_claim(eps_i=0.5, window_length=500, n_features=12, window_stride=500)
    assert plain.epsilon == pytest.approx(0.5 * 500 * 12) and "window_overlap" not in plain.extra
