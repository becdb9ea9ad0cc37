"""The held-out worst case over attacks: unbiased under the null, unlike the naive maximum."""

from __future__ import annotations

import numpy as np
import pytest

from attacks.attack import AttackData, AttackResult, Measure, Variant
from attacks.domias import DomiasAttack
from attacks.latent_search import LatentSearchAttack
from attacks.likelihood import LikelihoodAttack
from attacks.monte_carlo import MonteCarloAttack
from attacks.reconstruction import ReconstructionAttack
from attacks.threat import Records, Release, applicable
from attacks.worst_case import held_out_count, held_out_worst_case, split_halves
from tests.attacks.fakes import RandomLinearModel, uniform_records
from tests.attacks.null_band import average_precision_many, inside_band

SHAPE = (1, 8, 8)


def null_result(name: str, scores: np.ndarray, is_member: np.ndarray) -> AttackResult:
    return AttackResult(
        attack=name,
        distance=Measure.PIXEL_L2,
        variant=Variant.RAW,
        scores=scores,
        is_member=is_member,
        n_samples=1,
    )


@pytest.mark.statistical
def test_held_out_worst_case_is_unbiased_where_the_naive_maximum_is_not() -> None:
    """k = 8 independent null attacks on n = 100 records, 100 seeded repetitions.

    Null AP means come from 4000 permutations at the same sizes (n = 100, and n = 50 for the
    evaluation half). The held-out mean must lie within 4 standard errors of the null mean; the
    naive maximum's mean must exceed the null mean by more than 10 standard errors (measured:
    about 0.60 against 0.52, some 30 standard errors).
    """
    n, k, reps = 100, 8, 100
    is_member = np.arange(n) < n // 2
    rng = np.random.default_rng(0)
    naive, held = np.empty(reps), np.empty(reps)
    for rep in range(reps):
        scores = rng.normal(size=(k, n))
        naive[rep] = max(average_precision_many(row, is_member[None]).item() for row in scores)
        results = [null_result(f"null-{j}", row, is_member) for j, row in enumerate(scores)]
        held[rep] = held_out_worst_case(results, seed=rep).metrics.mi_ap
    perms = np.random.default_rng(1)
    null_full = average_precision_many(
        perms.normal(size=n), perms.permuted(np.tile(is_member, (4000, 1)), axis=1)
    )
    half = np.arange(n // 2) < n // 4
    null_half = average_precision_many(
        perms.normal(size=n // 2), perms.permuted(np.tile(half, (4000, 1)), axis=1)
    )
    assert abs(held.mean() - null_half.mean()) <= 4 * held.std() / np.sqrt(reps)
    assert naive.mean() - null_full.mean() > 10 * naive.std() / np.sqrt(reps)


def test_a_leaking_attack_among_null_ones_is_chosen_and_confirmed() -> None:
    is_member = np.arange(80) < 40
    rng = np.random.default_rng(2)
    results = [null_result(f"null-{j}", rng.normal(size=80), is_member) for j in range(5)]
    results.insert(3, null_result("leaky", is_member + 0.1 * rng.normal(size=80), is_member))
    worst = held_out_worst_case(results, seed=0)
    assert worst.attack == "leaky" and worst.metrics.mi_ap > 0.95
    assert results[worst.index].attack == "leaky" and worst.seed == 0
    assert len(worst.scores) == len(worst.is_member) == 40 and worst.is_member.sum() == 20


@pytest.mark.statistical
def test_worst_case_over_all_attacks_on_independent_models_is_at_chance() -> None:
    """Every attack against models and D_gen independent of both sets; the held-out AP of the one
    chosen lies inside the permutation band of the evaluation half (99.8 %)."""
    x, y = uniform_records(120, SHAPE, seed=20, n_classes=3)
    data = AttackData(x=x, y=y, is_member=np.arange(120) % 2 == 0)
    model = RandomLinearModel(record_shape=SHAPE, latent_dim=4, seed=21)
    refs = [RandomLinearModel(record_shape=SHAPE, latent_dim=4, seed=s) for s in (22, 23)]
    gen_x, gen_y = uniform_records(200, SHAPE, seed=24, n_classes=3)
    ref_x, ref_y = uniform_records(200, SHAPE, seed=25, n_classes=3)
    release = Release(
        model=model,
        samples=Records(gen_x, gen_y),
        reference=Records(ref_x, ref_y),
        reference_models=refs,
    )
    attacks = [
        ReconstructionAttack(seed=1, n_samples=4),
        MonteCarloAttack(seed=1),
        LatentSearchAttack(seed=1, n_steps=5, n_starts=4),
        LikelihoodAttack(seed=1, n_importance=4),
        DomiasAttack(seed=1),
    ]
    results = []
    for attack in attacks:
        assert applicable(attack, release)
        results += attack.run_release(release, data).values()
    assert len(results) == 1 + 6 + 2 + 3 + 1
    worst = held_out_worst_case(results, seed=3)
    assert inside_band(worst.scores, worst.is_member)


def test_split_is_seeded_stratified_and_disjoint() -> None:
    is_member = np.arange(11) < 5
    select, evaluate = split_halves(is_member, seed=4)
    assert np.array_equal(np.sort(np.concatenate([select, evaluate])), np.arange(11))
    assert is_member[select].sum() in (2, 3) and (~is_member[select]).sum() == 3
    assert is_member[evaluate].sum() == held_out_count(5) and (~is_member[evaluate]).sum() == 3
    again, _ = split_halves(is_member, seed=4)
    other, _ = split_halves(is_member, seed=5)
    np.testing.assert_array_equal(select, again)
    assert not np.array_equal(select, other)


@pytest.mark.parametrize(
    ("is_member", "kwargs", "message"),
    [
        (np.array([True, False, False]), {}, "cannot split 1 members"),
        (np.arange(8) < 4, {"select_fraction": 1.0}, r"select_fraction must lie in \(0, 1\)"),
    ],
)
def test_bad_split_is_refused(is_member, kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        split_halves(is_member, seed=0, **kwargs)


def test_results_from_different_attack_sets_are_refused() -> None:
    a = null_result("a", np.zeros(4), np.array([True, False, True, False]))
    b = null_result("b", np.zeros(4), np.array([False, True, True, False]))
    with pytest.raises(ValueError, match="same D_atk; b"):
        held_out_worst_case([a, b], seed=0)
    with pytest.raises(ValueError, match="at least one attack result"):
        held_out_worst_case([], seed=0)
