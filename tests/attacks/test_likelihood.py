"""The likelihood attack (IWAE bound, offline LiRA) on models whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attacks.attack import AttackData, Measure, ResultKey, Variant
from attacks.likelihood import (
    LIRA_PER_RECORD_MIN_MODELS,
    Likelihood,
    LikelihoodAttack,
    lira_offline,
)
from attacks.reconstruction import record_noise_rng
from attacks.threat import Release
from tests.attacks.fakes import (
    LinearGaussianModel,
    RandomLinearModel,
    ScaledMemorisingModel,
    difficulty_case,
    uniform_records,
)
from tests.attacks.null_band import inside_band
from tests.attacks.test_reconstruction import small_vae

SHAPE = (1, 8, 8)


def attack_data(n_members: int, n_non_members: int, *, seed: int) -> AttackData:
    x, y = uniform_records(n_members + n_non_members, SHAPE, seed=seed, n_classes=3)
    return AttackData(x=x, y=y, is_member=np.arange(x.shape[0]) < n_members)


@pytest.mark.parametrize("likelihood", ["bernoulli", "gaussian"])
def test_model_whose_likelihood_is_high_on_members_is_caught(likelihood: str) -> None:
    data = attack_data(40, 40, seed=0)
    model = ScaledMemorisingModel(data.x[data.is_member], seed=1)
    attack = LikelihoodAttack(seed=0, n_importance=4, likelihood=likelihood, gaussian_std=0.1)
    results = attack.run_release(Release(model=model), data)
    (result,) = results.values()
    assert result.key == ResultKey(Likelihood(likelihood).measure, Variant.RAW)
    assert result.metrics().mi_ap > 0.95
    assert not inside_band(result.scores, result.is_member)


@pytest.mark.statistical
def test_model_independent_of_both_sets_scores_inside_the_null_band() -> None:
    data = attack_data(100, 100, seed=10)

    def linear(seed: int) -> RandomLinearModel:
        return RandomLinearModel(record_shape=SHAPE, latent_dim=4, seed=seed)

    references = [linear(seed) for seed in range(12, 12 + LIRA_PER_RECORD_MIN_MODELS)]
    release = Release(model=linear(11), reference_models=references)
    results = LikelihoodAttack(seed=0, n_importance=8).run_release(release, data)
    assert {key.variant for key in results} == {Variant.RAW, Variant.CALIBRATED, Variant.LIRA}
    for result in results.values():
        assert inside_band(result.scores, result.is_member), result.key


@pytest.mark.parametrize("n_references", [2, LIRA_PER_RECORD_MIN_MODELS])
def test_oracle_is_caught_by_the_calibrated_variants(n_references: int) -> None:
    """Reference VAEs that memorised other records (reference records) score D_atk alike."""
    data = attack_data(40, 40, seed=0)
    target = ScaledMemorisingModel(data.x[data.is_member], seed=1)
    references = [
        ScaledMemorisingModel(uniform_records(40, SHAPE, seed=100 + r)[0], seed=200 + r)
        for r in range(n_references)
    ]
    attack = LikelihoodAttack(seed=0, n_importance=4)
    results = attack.run_release(Release(model=target, reference_models=references), data)
    for variant in (Variant.CALIBRATED, Variant.LIRA):
        result = results[ResultKey(Measure.IWAE_BERNOULLI, variant)]
        assert result.metrics().mi_ap > 0.95, variant
        assert not inside_band(result.scores, result.is_member), variant


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_calibration_beats_the_raw_score_where_records_differ_in_difficulty(seed: int) -> None:
    """Known case (fakes.difficulty_case): a record's raw log-likelihood is mostly its own size,
    which the reference models share; what the target learnt of its members is the rest."""
    x, is_member, target, references = difficulty_case(
        50, 50, dim=256, n_references=LIRA_PER_RECORD_MIN_MODELS, seed=seed
    )
    data = AttackData(x=x, y=torch.zeros(len(x), dtype=torch.int64), is_member=is_member.numpy())
    attack = LikelihoodAttack(seed=0, n_importance=4, likelihood="gaussian")
    results = attack.run_release(Release(model=target, reference_models=references), data)
    ap = {key.variant: result.metrics().mi_ap for key, result in results.items()}
    assert ap[Variant.RAW] < 0.75
    for variant in (Variant.CALIBRATED, Variant.LIRA):
        assert ap[variant] > 0.95 and ap[variant] > ap[Variant.RAW] + 0.2, ap


@pytest.mark.parametrize("n_importance", [1, 7])
def test_exact_posterior_gives_the_exact_log_likelihood(n_importance: int) -> None:
    """Known value (closed form): with q(z | x) = p(z | x) every importance weight is p(x)."""
    model = LinearGaussianModel(dim=6, latent_dim=2, scale=1.5, noise_std=0.5)
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    data = AttackData(x=x, y=torch.zeros(5, dtype=torch.int64), is_member=np.arange(5) < 2)
    attack = LikelihoodAttack(
        seed=1, n_importance=n_importance, likelihood="gaussian", gaussian_std=0.5
    )
    np.testing.assert_allclose(
        attack.log_likelihoods(model, data), model.log_marginal(x).numpy(), rtol=1e-6
    )


def naive_iwae(model, x, y, *, seed: int, first_index: int, k: int) -> float:
    """One sample at a time with torch.distributions, Bernoulli likelihood."""
    mu, logvar = model.encode(x[None], y[None])
    std = torch.exp(0.5 * logvar.double())[0]
    noise = record_noise_rng(seed, first_index).standard_normal((k, mu.shape[1]), np.float32)
    prior = torch.distributions.Normal(0.0, 1.0)
    post = torch.distributions.Normal(mu.double()[0], std)
    log_w = []
    for eps in torch.from_numpy(noise).double():
        z = mu.double()[0] + std * eps
        m = model.decode(z[None].float(), y[None])[0].double().clamp(1e-6, 1 - 1e-6)
        log_px = (x.double() * m.log() + (1 - x.double()) * (1 - m).log()).sum()
        log_w.append(float(log_px + prior.log_prob(z).sum() - post.log_prob(z).sum()))
    return float(torch.logsumexp(torch.tensor(log_w), 0)) - math.log(k)


@pytest.mark.parametrize("max_decoded", [1, 3, 1000])
def test_scores_equal_a_naive_loop_whatever_the_chunking(max_decoded: int) -> None:
    data = attack_data(3, 2, seed=2)
    vae = small_vae(3)
    attack = LikelihoodAttack(seed=4, n_importance=5, max_decoded=max_decoded)
    scores = attack.log_likelihoods(vae, data)
    vae.eval()
    with torch.no_grad():
        for i in range(data.n_records):
            expected = naive_iwae(vae, data.x[i], data.y[i], seed=4, first_index=i, k=5)
            assert scores[i] == pytest.approx(expected, abs=1e-4)


def test_same_seed_gives_identical_scores() -> None:
    data = attack_data(3, 3, seed=3)
    vae = small_vae(1)
    first = LikelihoodAttack(seed=2, n_importance=6).log_likelihoods(vae, data)
    again = LikelihoodAttack(seed=2, n_importance=6).log_likelihoods(vae, data)
    other = LikelihoodAttack(seed=3, n_importance=6).log_likelihoods(vae, data)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_lira_offline_statistics() -> None:
    target = np.array([1.0, 5.0, -2.0])
    reference = np.random.default_rng(1).normal(size=(LIRA_PER_RECORD_MIN_MODELS, 3))
    stats = lira_offline(target, reference)
    mean, std = reference.mean(0), reference.std(0, ddof=1)
    np.testing.assert_allclose(stats[Variant.CALIBRATED], target - mean)
    np.testing.assert_allclose(stats[Variant.LIRA], (target - mean) / std)
    few = reference[: LIRA_PER_RECORD_MIN_MODELS - 1]  # one pooled variance
    pooled = np.sqrt(np.mean(few.var(0, ddof=1)))
    np.testing.assert_allclose(
        lira_offline(target, few)[Variant.LIRA], (target - few.mean(0)) / pooled
    )
    only = lira_offline(target, reference[:1])
    assert list(only) == [Variant.CALIBRATED]
    np.testing.assert_allclose(only[Variant.CALIBRATED], target - reference[0])


def test_lira_offline_with_few_models_ranks_as_the_calibrated_variant() -> None:
    rng = np.random.default_rng(0)
    target, reference = rng.normal(size=30), rng.normal(size=(2, 30))
    stats = lira_offline(target, reference)
    np.testing.assert_array_equal(
        np.argsort(stats[Variant.LIRA]), np.argsort(stats[Variant.CALIBRATED])
    )


def test_calibrated_variants_use_the_reference_vaes() -> None:
    data = attack_data(3, 3, seed=5)
    target, refs = small_vae(0), [small_vae(1), small_vae(2)]
    attack = LikelihoodAttack(seed=1, n_importance=3)
    results = attack.run_release(Release(model=target, reference_models=refs), data)
    raw = attack.log_likelihoods(target, data)
    ref = np.stack([attack.log_likelihoods(m, data) for m in refs])
    key = ResultKey(Measure.IWAE_BERNOULLI, Variant.LIRA)
    np.testing.assert_allclose(results[key].scores, lira_offline(raw, ref)[Variant.LIRA])
    assert results[key].to_row()["variant"] == "lira-offline"


def test_a_nonprivate_reference_set_gives_its_own_labelled_variants() -> None:
    data = attack_data(3, 3, seed=5)
    target, copying, plain = small_vae(0), [small_vae(1), small_vae(2)], [small_vae(3)]
    attack = LikelihoodAttack(seed=1, n_importance=3)
    release = Release(model=target, reference_models=copying, nonprivate_reference_models=plain)
    results = attack.run_release(release, data)
    raw = attack.log_likelihoods(target, data)
    for models, calibrated, lira in (
        (copying, Variant.CALIBRATED, Variant.LIRA),
        (plain, Variant.CALIBRATED_NONPRIVATE, Variant.LIRA_NONPRIVATE),
    ):
        expected = lira_offline(raw, np.stack([attack.log_likelihoods(m, data) for m in models]))
        for variant, own in ((calibrated, Variant.CALIBRATED), (lira, Variant.LIRA)):
            if own in expected:
                key = ResultKey(Measure.IWAE_BERNOULLI, variant)
                np.testing.assert_allclose(results[key].scores, expected[own])
    assert {k.variant.value for k in results} == {
        "raw", "calibrated", "lira-offline", "calibrated-nonprivate"  # one plain model: no LiRA
    }


def test_decoder_only_release_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'likelihood' needs encoder, which this release lacks"):
        LikelihoodAttack(seed=0).run_release(
            Release(decoder=small_vae(0)), attack_data(1, 1, seed=0)
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seed": 0, "likelihood": "poisson"}, "unknown likelihood 'poisson'; valid likelihoods"),
        ({"seed": 0, "n_importance": 0}, "n_importance must be a positive integer, got 0"),
        ({"seed": 0, "gaussian_std": 0.0}, "gaussian_std must be positive, got 0.0"),
    ],
)
def test_bad_configuration_is_refused(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        LikelihoodAttack(**kwargs)
