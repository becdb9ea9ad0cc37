"""DOMIAS (van Breugel et al. 2023) on sample sets whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attacks.attack import Measure, ResultKey, Variant
from attacks.domias import DomiasAttack, log_density_ratio
from attacks.features import flat_features
from attacks.threat import Records, Release
from tests.attacks.fakes import noisy_copies, uniform_records
from tests.attacks.null_band import inside_band
from tests.attacks.test_monte_carlo import SHAPE, attack_data, null_release

KEY = ResultKey(Measure.PCA_KDE, Variant.LOG_RATIO)


def test_generator_that_memorised_its_members_is_caught() -> None:
    data = attack_data(60, 60, seed=0)
    members = data.x[data.is_member]
    x = noisy_copies(members, copies=4, std=0.05, seed=1)
    ref_x, ref_y = uniform_records(300, SHAPE, seed=2)
    release = Release(
        samples=Records(x, torch.zeros(len(x), dtype=torch.int64)), reference=Records(ref_x, ref_y)
    )
    result = DomiasAttack(seed=0).run_release(release, data)[KEY]
    assert result.metrics().mi_ap > 0.95
    assert not inside_band(result.scores, result.is_member)


@pytest.mark.statistical
def test_generator_independent_of_both_sets_scores_inside_the_null_band() -> None:
    data = attack_data(100, 100, seed=10)
    result = DomiasAttack(seed=0).run_release(null_release(seed=11), data)[KEY]
    assert inside_band(result.scores, result.is_member)


def naive_log_kde(points: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Gaussian KDE with Scott's factor n^(-1/(d+4)) on the data covariance, one point at a time."""
    n, d = data.shape
    cov = np.cov(data.T, ddof=1).reshape(d, d) * n ** (-2.0 / (d + 4))
    inv, (_, logdet) = np.linalg.inv(cov), np.linalg.slogdet(cov)
    out = []
    for p in points:
        quad = np.array([(p - q) @ inv @ (p - q) for q in data])
        log_k = -0.5 * quad - 0.5 * logdet - 0.5 * d * np.log(2 * np.pi)
        out.append(np.logaddexp.reduce(log_k) - np.log(n))
    return np.array(out)


@pytest.mark.parametrize(
    ("n", "dim", "record_chunk"), [(1, 1, 1), (1, 3, 5), (6, 2, 4), (9, 4, 100)]
)
def test_log_ratio_equals_a_naive_kernel_sum(n: int, dim: int, record_chunk: int) -> None:
    rng = np.random.default_rng(n + dim)
    x, gen, ref = rng.normal(size=(n, dim)), rng.normal(size=(30, dim)), rng.normal(size=(25, dim))

    def as_records(a: np.ndarray) -> Records:
        return Records(torch.from_numpy(a), torch.zeros(len(a), dtype=torch.int64))

    scores = log_density_ratio(
        torch.from_numpy(x),
        as_records(gen),
        as_records(ref),
        flat_features,
        record_chunk=record_chunk,
    )
    expected = naive_log_kde(x, gen) - naive_log_kde(x, ref)
    np.testing.assert_allclose(scores, expected, rtol=1e-9, atol=1e-9)


def test_scores_are_deterministic_and_do_not_depend_on_chunking() -> None:
    data = attack_data(10, 10, seed=3)
    release = null_release(seed=4, m=120)
    done: list[int] = []
    first = DomiasAttack(seed=1, record_chunk=3).run_release(release, data, progress=done.append)
    again = DomiasAttack(seed=1, record_chunk=1000).run_release(release, data)
    np.testing.assert_allclose(first[KEY].scores, again[KEY].scores, rtol=0, atol=1e-12)
    assert done == [3] * 6 + [2]
    row = first[KEY].to_row()
    assert (row["attack"], row["distance"], row["variant"]) == ("domias", "pca-kde", "log-ratio")


def test_release_without_reference_records_is_refused_by_name() -> None:
    release = Release(samples=null_release(seed=0, m=20).samples)
    with pytest.raises(ValueError, match="'domias' needs reference-records, which this release"):
        DomiasAttack(seed=0).run_release(release, attack_data(2, 2, seed=0))


def test_too_few_samples_for_the_kde_are_refused() -> None:
    x, y = uniform_records(5, SHAPE, seed=0)
    ref_x, ref_y = uniform_records(50, SHAPE, seed=1)
    release = Release(samples=Records(x, y), reference=Records(ref_x, ref_y))
    with pytest.raises(ValueError, match="got 5 records in 10 dimensions; lower pca_components"):
        DomiasAttack(seed=0).run_release(release, attack_data(2, 2, seed=0))


@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")  # PCA
def test_a_collapsed_generator_scores_nan_with_a_warning_not_an_error(caplog) -> None:
    """A diverged model's D_gen (here: one image repeated) has no density; the attack says so
    and returns NaN scores, which the attack ranks last, instead of ending the sweep (it did,
    on a bf16 cell whose training had stalled: scipy's singular-covariance error)."""
    x, y = uniform_records(60, SHAPE, seed=0)
    collapsed = Records(x[:1].repeat(60, *([1] * (x.dim() - 1))), y)
    ref_x, ref_y = uniform_records(50, SHAPE, seed=1)
    release = Release(samples=collapsed, reference=Records(ref_x, ref_y))
    with caplog.at_level("WARNING"):
        result = DomiasAttack(seed=0).run_release(release, attack_data(4, 4, seed=0))[KEY]
    assert result.nonfinite == 8 and np.ptp(result.scores) == 0  # all NaN, ranked as ties
    assert "lower-dimensional subspace" in caplog.text
    degenerate_reference = Release(samples=Records(x, y), reference=collapsed)
    with pytest.raises(np.linalg.LinAlgError):
        DomiasAttack(seed=0).run_release(degenerate_reference, attack_data(4, 4, seed=0))


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="pca_components must be a positive integer, got 0"):
        DomiasAttack(seed=0, pca_components=0)
