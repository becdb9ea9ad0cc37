"""The latent-search attack (GAN-Leaks, Chen et al. 2020) on decoders whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attacks.attack import AttackData, ResultKey, Variant
from attacks.distances import Distance
from attacks.latent_search import LatentSearchAttack
from attacks.reconstruction import record_noise_rng
from attacks.threat import Release
from tests.attacks.fakes import (
    MemberSpanDecoder,
    RandomLinearModel,
    difficulty_case,
    uniform_records,
)
from tests.attacks.null_band import inside_band
from tests.attacks.test_reconstruction import small_vae

SHAPE = (1, 8, 8)
RAW = ResultKey(Distance.MSE, Variant.RAW)
CALIBRATED = ResultKey(Distance.MSE, Variant.CALIBRATED)


def attack_data(n_members: int, n_non_members: int, *, seed: int) -> AttackData:
    x, y = uniform_records(n_members + n_non_members, SHAPE, seed=seed, n_classes=3)
    return AttackData(x=x, y=y, is_member=np.arange(x.shape[0]) < n_members)


def test_decoder_that_can_output_its_members_exactly_is_caught() -> None:
    data = attack_data(20, 20, seed=0)
    decoder = MemberSpanDecoder(data.x[data.is_member])
    attack = LatentSearchAttack(seed=0, n_steps=60, lr=0.1)
    result = attack.run_release(Release(decoder=decoder), data)[RAW]
    assert result.metrics().mi_ap > 0.95
    assert not inside_band(result.scores, result.is_member)


def test_oracle_is_caught_by_the_calibrated_variant() -> None:
    """Reference decoders that can output other records (reference records) exactly."""
    data = attack_data(20, 20, seed=0)
    target = MemberSpanDecoder(data.x[data.is_member])
    references = [MemberSpanDecoder(uniform_records(20, SHAPE, seed=50 + r)[0]) for r in range(2)]
    attack = LatentSearchAttack(seed=0, n_steps=60, lr=0.1)
    result = attack.run_release(Release(decoder=target, reference_models=references), data)
    calibrated = result[CALIBRATED]
    assert calibrated.metrics().mi_ap > 0.95
    assert not inside_band(calibrated.scores, calibrated.is_member)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_calibration_beats_the_raw_score_where_records_differ_in_difficulty(seed: int) -> None:
    """Known case (fakes.difficulty_case): a record's raw search error is mostly its own size,
    which the reference decoders share; what the target learnt of its members is the rest."""
    x, is_member, target, references = difficulty_case(50, 50, dim=256, n_references=2, seed=seed)
    data = AttackData(x=x, y=torch.zeros(len(x), dtype=torch.int64), is_member=is_member.numpy())
    attack = LatentSearchAttack(seed=0, n_steps=100, n_starts=4, norm_penalty=0.0)
    results = attack.run_release(Release(decoder=target, reference_models=references), data)
    raw, calibrated = (results[key].metrics().mi_ap for key in (RAW, CALIBRATED))
    assert raw < 0.75
    assert calibrated > 0.95 and calibrated > raw + 0.2


@pytest.mark.statistical
def test_decoder_independent_of_both_sets_scores_inside_the_null_band() -> None:
    data = attack_data(100, 100, seed=10)
    decoder = RandomLinearModel(record_shape=SHAPE, latent_dim=4, seed=11)
    reference = RandomLinearModel(record_shape=SHAPE, latent_dim=4, seed=12)
    release = Release(decoder=decoder, reference_models=[reference])
    results = LatentSearchAttack(seed=0, n_steps=20, n_starts=4).run_release(release, data)
    assert set(results) == {RAW, CALIBRATED}
    for result in results.values():
        assert inside_band(result.scores, result.is_member), result.key


def test_calibrated_score_subtracts_the_reference_searches() -> None:
    data = attack_data(4, 4, seed=1)
    target, ref_a, ref_b = (small_vae(s) for s in (0, 1, 2))
    attack = LatentSearchAttack(seed=3, n_steps=5, n_starts=3)
    release = Release(decoder=target, reference_models=(ref_a, ref_b))
    results = attack.run_release(release, data)
    errors = [attack.search_errors(m, data) for m in (target, ref_a, ref_b)]
    np.testing.assert_allclose(results[RAW].scores, -errors[0], rtol=1e-6)
    expected = (errors[1] + errors[2]) / 2 - errors[0]
    np.testing.assert_allclose(results[CALIBRATED].scores, expected, rtol=1e-6, atol=1e-9)


def test_a_nonprivate_reference_set_gives_its_own_labelled_variant() -> None:
    """The mechanism-copying set scores ``calibrated``; the non-private set beside it scores
    ``calibrated-nonprivate``, each against its own models only."""
    data = attack_data(4, 4, seed=1)
    target, copying, plain = (small_vae(s) for s in (0, 1, 2))
    attack = LatentSearchAttack(seed=3, n_steps=5, n_starts=3)
    release = Release(
        decoder=target, reference_models=(copying,), nonprivate_reference_models=(plain,)
    )
    results = attack.run_release(release, data)
    labelled = ResultKey(Distance.MSE, Variant.CALIBRATED_NONPRIVATE)
    assert set(results) == {RAW, CALIBRATED, labelled}
    errors = [attack.search_errors(m, data) for m in (target, copying, plain)]
    np.testing.assert_allclose(results[CALIBRATED].scores, errors[1] - errors[0], rtol=1e-6)
    np.testing.assert_allclose(results[labelled].scores, errors[2] - errors[0], rtol=1e-6)
    assert results[labelled].to_row()["variant"] == "calibrated-nonprivate"


@pytest.mark.parametrize("n", [1, 5])
def test_start_is_the_best_prior_draw_of_a_naive_loop(n: int) -> None:
    x, y = uniform_records(n, SHAPE, seed=n, n_classes=3)
    vae = small_vae(4).eval()
    attack = LatentSearchAttack(seed=9, n_starts=6, norm_penalty=0.01)
    with torch.no_grad():
        starts = attack.starts(vae, x, y, first_index=7)
        for i in range(n):
            draws = record_noise_rng(9, 7 + i).standard_normal((6, vae.latent_dim), np.float32)
            values = []
            for z in torch.from_numpy(draws):
                err = (x[i] - vae.decode(z[None], y[i : i + 1])[0]).pow(2).sum()
                values.append(float(err + 0.01 * (z.pow(2).sum() - vae.latent_dim) ** 2))
            np.testing.assert_array_equal(starts[i].numpy(), draws[int(np.argmin(values))])


@pytest.mark.parametrize("batch_size", [1, 3, 100])
def test_scores_do_not_depend_on_batching(batch_size: int) -> None:
    data = attack_data(4, 3, seed=2)
    vae = small_vae(5)
    whole = LatentSearchAttack(seed=1, n_steps=8, n_starts=3, batch_size=7)
    batched = LatentSearchAttack(seed=1, n_steps=8, n_starts=3, batch_size=batch_size)
    expected = whole.run_release(Release(decoder=vae), data)[RAW].scores
    actual = batched.run_release(Release(decoder=vae), data)[RAW].scores
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-7)


def test_same_seed_gives_identical_scores_and_model_mode_is_restored() -> None:
    data = attack_data(3, 3, seed=3)
    vae = small_vae(6).train(True)

    def run(seed: int) -> np.ndarray:
        attack = LatentSearchAttack(seed=seed, n_steps=4, n_starts=2)
        return attack.run_release(Release(decoder=vae), data)[RAW].scores

    first, again, other = run(5), run(5), run(6)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    assert vae.training
    assert all(p.grad is None for p in vae.parameters())  # the search leaves the model alone


def test_search_lowers_the_objective() -> None:
    data = attack_data(3, 3, seed=4)
    vae = small_vae(7)
    short = LatentSearchAttack(seed=0, n_steps=1, n_starts=1, lr=0.01)
    long = LatentSearchAttack(seed=0, n_steps=60, n_starts=1, lr=0.01)
    assert np.all(long.search_errors(vae, data) < short.search_errors(vae, data))


def test_release_without_a_decoder_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'latent-search' needs decoder"):
        LatentSearchAttack(seed=0).run_release(Release(), attack_data(1, 1, seed=0))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seed": 0, "n_steps": 0}, "n_steps must be a positive integer, got 0"),
        ({"seed": 0, "lr": 0.0}, "lr must be positive, got 0.0"),
        ({"seed": 0, "norm_penalty": -1.0}, "norm_penalty must be non-negative, got -1.0"),
        ({"seed": None}, "seed must be a non-negative integer, got None"),
    ],
)
def test_bad_configuration_is_refused(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        LatentSearchAttack(**kwargs)


def test_adam_matches_torch_optim() -> None:
    """The hand-written elementwise Adam against torch.optim.Adam on a quadratic."""
    from attacks.latent_search import _Adam

    target = torch.tensor([[1.0, -2.0], [0.5, 3.0]])
    z0 = torch.zeros(2, 2)
    ours, adam = z0.clone(), _Adam(z0, lr=0.1)
    theirs = z0.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([theirs], lr=0.1)
    for _ in range(5):
        ours = adam.step(ours, 2 * (ours - target))
        optimizer.zero_grad()
        (theirs - target).pow(2).sum().backward()
        optimizer.step()
    torch.testing.assert_close(ours, theirs.detach())
