"""The Monte-Carlo attack on D_gen (Hilprecht et al. 2019) on sample sets whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attacks.attack import AttackData, Measure, ResultKey, Variant
from attacks.features import flat_features, pca_features
from attacks.monte_carlo import MonteCarloAttack, monte_carlo_scores
from attacks.threat import Records, Release
from tests.attacks.fakes import noisy_copies, uniform_records
from tests.attacks.null_band import inside_band

SHAPE = (1, 8, 8)


def attack_data(n_members: int, n_non_members: int, *, seed: int) -> AttackData:
    x, y = uniform_records(n_members + n_non_members, SHAPE, seed=seed, n_classes=3)
    is_member = np.arange(x.shape[0]) < n_members
    return AttackData(x=x, y=y, is_member=is_member)


def oracle_release(data: AttackData, *, seed: int) -> Release:
    """D_gen made of noisy copies of the members (a generator that memorised them)."""
    members, labels = data.x[data.is_member], data.y[data.is_member]
    x = noisy_copies(members, copies=4, std=0.05, seed=seed)
    ref_x, ref_y = uniform_records(200, SHAPE, seed=seed + 1, n_classes=3)
    return Release(samples=Records(x, labels.repeat_interleave(4)), reference=Records(ref_x, ref_y))


def null_release(*, seed: int, m: int = 600) -> Release:
    """D_gen and reference records independent of both members and non-members."""
    x, y = uniform_records(m, SHAPE, seed=seed, n_classes=3)
    ref_x, ref_y = uniform_records(200, SHAPE, seed=seed + 1, n_classes=3)
    return Release(samples=Records(x, y), reference=Records(ref_x, ref_y))


ALL_KEYS = [
    ResultKey(m, v)
    for m in Measure
    if m.value.endswith("l2")
    for v in (Variant.SHARE, Variant.LOG_DISTANCE, Variant.NEAREST)
]


def test_generator_that_memorised_its_members_is_caught() -> None:
    data = attack_data(60, 60, seed=0)
    results = MonteCarloAttack(seed=0).run_release(oracle_release(data, seed=1), data)
    assert sorted(results, key=str) == sorted(ALL_KEYS, key=str)
    for result in results.values():
        assert result.metrics().mi_ap > 0.95, result.key
        assert not inside_band(result.scores, result.is_member)  # the band can fail


@pytest.mark.statistical
def test_generator_independent_of_both_sets_scores_inside_the_null_band() -> None:
    """Members and non-members are exchangeable: AP follows its permutation law (99.8 % band)."""
    data = attack_data(100, 100, seed=10)
    results = MonteCarloAttack(seed=0).run_release(null_release(seed=11), data)
    for result in results.values():
        assert inside_band(result.scores, result.is_member), result.key


def naive_scores(x, y, gx, gy, *, same_class, percentile):
    """One record and one sample at a time, in numpy."""
    n = x.shape[0]
    d = [
        [
            np.linalg.norm(x[i] - gx[j])
            for j in range(gx.shape[0])
            if not same_class or gy[j] == y[i]
        ]
        for i in range(n)
    ]
    nearest = np.array([min(row) for row in d])
    eps = np.percentile(nearest, percentile)
    if eps <= 0:
        eps = nearest[nearest > 0].min(initial=1.0)
    share = np.array([np.mean([v <= eps for v in row]) for row in d])
    logd = np.array(
        [np.mean([np.log(eps / max(v, eps * 1e-12)) if v <= eps else 0 for v in row]) for row in d]
    )
    return {Variant.SHARE: share, Variant.LOG_DISTANCE: logd, Variant.NEAREST: -nearest}


@pytest.mark.parametrize(
    ("n", "m", "dim", "same_class", "percentile"),
    [
        (1, 1, 1, True, 50),
        (1, 5, 3, False, 50),
        (7, 1, 4, False, 50),
        (9, 13, 5, True, 50),
        (12, 30, 2, False, 90),
        (12, 30, 6, True, 10),
    ],
)
def test_scores_equal_a_naive_loop(n, m, dim, same_class, percentile) -> None:
    rng = np.random.default_rng(n * 100 + m)
    x, gx = rng.normal(size=(n, dim)), rng.normal(size=(m, dim))
    y, gy = np.arange(n) % 2, np.arange(m) % 2
    if same_class and m == 1:
        y[:] = 0
    samples = Records(torch.from_numpy(gx), torch.from_numpy(gy))
    scores = monte_carlo_scores(
        torch.from_numpy(x),
        torch.from_numpy(y),
        samples,
        {Measure.PIXEL_L2: flat_features},
        same_class=same_class,
        eps_percentile=percentile,
        sample_chunk=4,
        record_chunk=3,
        device=torch.device("cpu"),
    )
    expected = naive_scores(x, y, gx, gy, same_class=same_class, percentile=percentile)
    for variant, values in expected.items():
        np.testing.assert_allclose(scores[Measure.PIXEL_L2, variant], values, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(("sample_chunk", "record_chunk"), [(2, 16), (45, 1), (7, 5), (10**6, 3)])
def test_scores_do_not_depend_on_chunking(sample_chunk: int, record_chunk: int) -> None:
    """Memory is set by the chunks, not by m; the scores must not be."""
    data = attack_data(8, 8, seed=3)
    release = null_release(seed=4, m=45)
    reference = MonteCarloAttack(seed=0).run_release(release, data)
    chunked = MonteCarloAttack(seed=0, sample_chunk=sample_chunk, record_chunk=record_chunk)
    for key, result in chunked.run_release(release, data).items():
        np.testing.assert_allclose(result.scores, reference[key].scores, rtol=0, atol=1e-10)


def test_same_seed_gives_identical_scores() -> None:
    data = attack_data(15, 15, seed=5)
    release = null_release(seed=6, m=90)
    first = MonteCarloAttack(seed=3).run_release(release, data)
    again = MonteCarloAttack(seed=3).run_release(release, data)
    for key, result in first.items():
        np.testing.assert_array_equal(result.scores, again[key].scores)


def test_pca_is_fitted_on_the_reference_records_only() -> None:
    from sklearn.decomposition import PCA

    ref_x, ref_y = uniform_records(50, SHAPE, seed=0)
    project = pca_features(Records(ref_x, ref_y), n_components=5, seed=0)
    x, _ = uniform_records(4, SHAPE, seed=1)
    pca = PCA(n_components=5, svd_solver="randomized", random_state=0).fit(
        ref_x.flatten(1).double().numpy()
    )
    np.testing.assert_allclose(
        project(x).numpy(), pca.transform(x.flatten(1).double().numpy()), atol=1e-10
    )


def test_without_reference_records_only_the_pixel_space_runs() -> None:
    data = attack_data(5, 5, seed=0)
    release = Release(samples=null_release(seed=1, m=30).samples)
    results = MonteCarloAttack(seed=0).run_release(release, data, progress=(done := []).append)
    assert {key.distance for key in results} == {Measure.PIXEL_L2}
    assert sum(done) == 10
    row = results[ResultKey(Measure.PIXEL_L2, Variant.SHARE)].to_row()
    assert (row["attack"], row["distance"], row["variant"]) == ("monte-carlo", "pixel-l2", "share")
    assert row["attack_samples"] == 30


def test_release_without_samples_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'monte-carlo' needs samples, which this release lacks"):
        MonteCarloAttack(seed=0).run_release(Release(), attack_data(2, 2, seed=0))


def test_missing_class_in_samples_is_refused() -> None:
    data = attack_data(3, 3, seed=0)
    x, _ = uniform_records(4, SHAPE, seed=1)
    release = Release(samples=Records(x, torch.zeros(4, dtype=torch.int64)))
    with pytest.raises(ValueError, match=r"no samples of labels \[1, 2\]"):
        MonteCarloAttack(seed=0).run_release(release, data)
    MonteCarloAttack(seed=0, same_class=False).run_release(release, data)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seed": -1}, "seed must be a non-negative integer"),
        ({"seed": 0, "eps_percentile": 101}, r"eps_percentile must lie in \[0, 100\], got 101"),
        ({"seed": 0, "sample_chunk": 0}, "sample_chunk must be a positive integer, got 0"),
        ({"seed": 0, "measures": ("pca-kde",)}, "measures must be a non-empty subset"),
        ({"seed": 0, "measures": ()}, "measures must be a non-empty subset"),
    ],
)
def test_bad_configuration_is_refused(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        MonteCarloAttack(**kwargs)
