"""The reconstruction attack (the trade-off paper, Eq. 1) on models whose answer is known.

An oracle that memorised its members must be detected; a model that never saw either set must
score at chance (a seeded statistical test whose band comes from the null distribution); the latent
noise must follow q(z | x); and scores must be reproducible and independent of the chunking.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attacks.attack import AttackData
from attacks.distances import Distance
from attacks.metrics import AttackMetrics
from attacks.reconstruction import ChunkPlan, ReconstructionAttack, record_noise_rng
from models.vae import ConditionalConvVAE
from tests.attacks.fakes import GaussianIdentityModel, MemorisingModel, RandomLinearModel

IMAGE_SHAPE = (1, 8, 8)
BOTH = (Distance.MSE, Distance.SSIM)


def uniform_data(n_members: int, n_non_members: int, *, seed: int) -> AttackData:
    """Members and non-members drawn from the same uniform distribution, alternating."""
    n = n_members + n_non_members
    gen = torch.Generator().manual_seed(seed)
    is_member = np.zeros(n, dtype=bool)
    is_member[:n_members] = True
    return AttackData(
        x=torch.rand(n, *IMAGE_SHAPE, generator=gen),
        y=torch.zeros(n, dtype=torch.int64),
        is_member=is_member,
    )


def small_vae(seed: int) -> ConditionalConvVAE:
    """An untrained 8x8 VAE, initialised without touching the global RNG state."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return ConditionalConvVAE(channels=1, height=8, width=8, num_classes=3, latent_dim=8)


def vae_data(n: int = 12) -> AttackData:
    gen = torch.Generator().manual_seed(3)
    return AttackData(
        x=torch.rand(n, *IMAGE_SHAPE, generator=gen),
        y=torch.arange(n) % 3,
        is_member=np.arange(n) % 2 == 0,
    )


def permutation_ap(
    scores: np.ndarray, is_member: np.ndarray, *, n_permutations: int, seed: int
) -> np.ndarray:
    """AP of ``scores`` under random relabelings that keep the number of members (distinct scores).

    AP = mean over members of the precision at the member's rank, which is sklearn's
    ``average_precision_score`` when no scores are tied.
    """
    order = np.argsort(-scores)
    rng = np.random.default_rng(seed)
    labels = rng.permuted(np.tile(is_member, (n_permutations, 1)), axis=1)[:, order]
    precision = np.cumsum(labels, axis=1) / np.arange(1, scores.size + 1)
    return (labels * precision).sum(axis=1) / is_member.sum()


def at_chance(scores: np.ndarray, is_member: np.ndarray) -> bool:
    """Whether AP and AUC lie within 4 standard deviations of their null distributions.

    AP's null (scores independent of membership) is computed by permutation; AUC's is the
    Mann-Whitney statistic's, mean 1/2 and sd sqrt((n1 + n2 + 1) / (12 n1 n2)).
    """
    metrics = AttackMetrics.from_scores(scores, is_member)
    null_ap = permutation_ap(scores, is_member, n_permutations=4000, seed=0)
    n1, n2 = int(is_member.sum()), int((~is_member).sum())
    auc_sd = np.sqrt((n1 + n2 + 1) / (12 * n1 * n2))
    return bool(
        abs(metrics.mi_ap - null_ap.mean()) <= 4 * null_ap.std()
        and abs(metrics.mi_auc - 0.5) <= 4 * auc_sd
    )


def test_oracle_that_memorised_its_members_is_caught() -> None:
    data = uniform_data(40, 40, seed=0)
    model = MemorisingModel(data.x[data.is_member], seed=1)
    results = ReconstructionAttack(seed=0, n_samples=5, distances=BOTH).run(model, data)
    for result in results.values():
        assert result.metrics().mi_ap > 0.95
        assert not at_chance(result.scores, result.is_member)


@pytest.mark.statistical
def test_model_that_saw_neither_set_scores_at_chance() -> None:
    """Members and non-members are exchangeable here, so AP and AUC follow their null laws.

    Can fail: under the null each 4-sigma check fails with probability about 6e-5 (normal
    approximation), so a failure with these fixed seeds means the attack leaks membership through
    something other than the model, e.g. noise streams keyed on membership or on sorted data.
    The oracle test above shows the same band rejecting a leaky model.
    """
    data = uniform_data(150, 150, seed=10)
    model = RandomLinearModel(record_shape=IMAGE_SHAPE, latent_dim=4, seed=11)
    results = ReconstructionAttack(seed=12, n_samples=4, distances=BOTH).run(model, data)
    for result in results.values():
        assert np.unique(result.scores).size == data.n_records  # no ties: permutation AP is exact
        assert at_chance(result.scores, result.is_member)


def test_permutation_ap_equals_sklearn_without_ties() -> None:
    rng = np.random.default_rng(5)
    scores, is_member = rng.normal(size=60), np.arange(60) % 3 == 0
    null_ap = permutation_ap(scores, is_member, n_permutations=3, seed=1)
    relabeled = np.random.default_rng(1).permuted(np.tile(is_member, (3, 1)), axis=1)
    expected = [AttackMetrics.from_scores(scores, labels).mi_ap for labels in relabeled]
    np.testing.assert_allclose(null_ap, expected, rtol=1e-12)


@pytest.mark.statistical
def test_latents_are_drawn_from_the_encoder_posterior() -> None:
    """With q(z | x) = N(x, s^2 I) and D(z) = z, every sample's MSE is s^2 * mean(eps^2).

    The mean over n records x N samples x D = 64 values of s^2 eps^2 has mean s^2 and sd
    s^2 sqrt(2 / (n N D)) = 0.56 % of s^2; a 4-sigma band rejects e.g. std = exp(logvar) (MSE s^4).
    """
    std, n, n_samples = 0.1, 20, 50
    data = uniform_data(n // 2, n // 2, seed=4)
    model = GaussianIdentityModel(std=std, record_shape=IMAGE_SHAPE)
    scores = ReconstructionAttack(seed=5, n_samples=n_samples).run(model, data)[Distance.MSE].scores
    sd = std**2 * np.sqrt(2 / (n * n_samples * 64))
    assert abs(-scores.mean() - std**2) <= 4 * sd
    assert np.unique(scores).size == n  # every record has its own noise stream


def test_same_seed_gives_bit_identical_scores() -> None:
    model, data = small_vae(0), vae_data()
    first = ReconstructionAttack(seed=7, n_samples=6, distances=BOTH).run(model, data)
    again = ReconstructionAttack(seed=7, n_samples=6, distances=BOTH).run(model, data)
    other = ReconstructionAttack(seed=8, n_samples=6, distances=BOTH).run(model, data)
    for distance in BOTH:
        np.testing.assert_array_equal(first[distance].scores, again[distance].scores)
        assert not np.array_equal(first[distance].scores, other[distance].scores)


def test_scores_equal_a_naive_loop_over_samples() -> None:
    """The obviously correct slow path: each record's own noise stream, one sample at a time."""
    model, data, n_samples = small_vae(2), vae_data(5), 4
    attack = ReconstructionAttack(seed=3, n_samples=n_samples, distances=BOTH, max_decoded=6)
    results = attack.run(model, data)
    with torch.inference_mode():
        mu, logvar = model.eval().encode(data.x, data.y)
        for i in range(data.n_records):
            stream = record_noise_rng(3, i)
            noise = torch.from_numpy(stream.standard_normal((n_samples, 8), dtype=np.float32))
            std = torch.exp(0.5 * logvar[i : i + 1])
            recon = [model.decode(mu[i : i + 1] + std * eps, data.y[i : i + 1]) for eps in noise]
            for distance in BOTH:
                values = [distance.pairwise(sample, data.x[i : i + 1]).item() for sample in recon]
                expected = distance.score(np.array([np.mean(values)]))[0]
                assert results[distance].scores[i] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("max_decoded", [1, 3, 4, 13, 1000])
def test_scores_do_not_depend_on_chunking(max_decoded: int) -> None:
    model, data = small_vae(0), vae_data()
    reference = ReconstructionAttack(seed=7, n_samples=7, distances=BOTH, max_decoded=7)
    chunked = ReconstructionAttack(seed=7, n_samples=7, distances=BOTH, max_decoded=max_decoded)
    expected, actual = reference.run(model, data), chunked.run(model, data)
    for distance in BOTH:
        np.testing.assert_allclose(
            actual[distance].scores, expected[distance].scores, rtol=0, atol=1e-6
        )


def test_record_noise_does_not_depend_on_how_it_is_split() -> None:
    whole = record_noise_rng(3, 17).standard_normal((5, 8), dtype=np.float32)
    stream = record_noise_rng(3, 17)
    parts = [stream.standard_normal((n, 8), dtype=np.float32) for n in (2, 1, 2)]
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    other = record_noise_rng(3, 18).standard_normal((5, 8), dtype=np.float32)
    assert not np.array_equal(other, whole)


@pytest.mark.parametrize(
    ("n_samples", "max_decoded", "expected"),
    [(300, 256, ChunkPlan(1, 150)), (30, 256, ChunkPlan(8, 30)), (7, 3, ChunkPlan(1, 3))],
)
def test_chunk_plan_respects_the_budget(n_samples, max_decoded, expected) -> None:
    plan = ChunkPlan.from_budget(n_samples=n_samples, max_decoded=max_decoded)
    assert plan == expected
    assert plan.records_per_chunk * plan.samples_per_chunk <= max_decoded
    assert sum(plan.sample_chunks(n_samples)) == n_samples


def test_results_align_with_data_and_report_progress() -> None:
    model, data = small_vae(1), vae_data(12)
    done: list[int] = []
    attack = ReconstructionAttack(seed=0, n_samples=5, distances=BOTH, max_decoded=20)
    results = attack.run(model, data, progress=done.append)
    assert list(results) == list(BOTH)
    for distance, result in results.items():
        assert result.distance is distance and result.attack == "reconstruction"
        assert result.scores.shape == (12,) and result.n_samples == 5
        np.testing.assert_array_equal(result.is_member, data.is_member)
    assert done == [4, 4, 4]  # increments, as tqdm's update expects
    assert np.all(results[Distance.MSE].scores <= 0)
    assert np.all(np.abs(results[Distance.SSIM].scores) <= 1)


def test_model_runs_in_eval_mode_and_gets_its_mode_back() -> None:
    seen: list[bool] = []

    class Recording(GaussianIdentityModel):
        def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            seen.append(self.training)
            return super().decode(z, y)

    model = Recording(std=0.1, record_shape=IMAGE_SHAPE).train(True)
    ReconstructionAttack(seed=0, n_samples=2).run(model, uniform_data(2, 2, seed=0))
    assert seen and not any(seen)
    assert model.training


def test_mse_attack_runs_on_sensor_series() -> None:
    gen = torch.Generator().manual_seed(0)
    series = AttackData(
        x=torch.rand(6, 50, 3, generator=gen) * 2 - 1,
        y=torch.zeros(6, dtype=torch.int64),
        is_member=np.arange(6) < 3,
    )
    model = GaussianIdentityModel(std=0.05, record_shape=(50, 3))
    result = ReconstructionAttack(seed=0, n_samples=3).run(model, series)[Distance.MSE]
    assert result.scores.shape == (6,)


def test_ssim_on_sensor_series_is_refused_before_decoding() -> None:
    series = AttackData(
        x=torch.zeros(4, 50, 3), y=torch.zeros(4, dtype=torch.int64), is_member=np.arange(4) < 2
    )
    model = GaussianIdentityModel(std=0.05, record_shape=(50, 3))
    attack = ReconstructionAttack(seed=0, n_samples=3, distances=("mse", "ssim"))
    with pytest.raises(ValueError, match="SSIM applies to images only"):
        attack.run(model, series)


def test_decoder_output_of_the_wrong_shape_is_refused() -> None:
    model = GaussianIdentityModel(std=0.1, record_shape=(64,))
    with pytest.raises(
        ValueError, match=r"decode returned shape \(4, 64\), expected .*\(4, 1, 8, 8\)"
    ):
        ReconstructionAttack(seed=0, n_samples=2).run(model, uniform_data(1, 1, seed=0))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seed": -1}, "seed must be a non-negative integer, got -1"),
        ({"seed": None}, "seed must be a non-negative integer, got None"),
        ({"seed": True}, "seed must be a non-negative integer, got True"),
        ({"seed": 0, "n_samples": 0}, "n_samples must be a positive integer, got 0"),
        ({"seed": 0, "max_decoded": 0}, "max_decoded must be a positive integer, got 0"),
        ({"seed": 0, "distances": ()}, "non-empty and without repeats"),
        ({"seed": 0, "distances": "mse"}, r"a sequence, e.g. \('mse', 'ssim'\), got 'mse'"),
        ({"seed": 0, "distances": ("mse", Distance.MSE)}, "without repeats"),
        ({"seed": 0, "distances": ("l2",)}, "unknown distance 'l2'; valid distances: mse, ssim"),
    ],
)
def test_bad_configuration_is_refused(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        ReconstructionAttack(**kwargs)
