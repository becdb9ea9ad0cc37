"""The cell's reference records and its worst case over attacks (audit.sweep.cell_run)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from attacks.attack import AttackResult, Variant
from attacks.distances import Distance
from audit.cell.attack_step import reference_note
from audit.cell.membership import (
    MIN_REFERENCE_RECORDS,
    _attack_positions,
    attack_data,
    reference_positions,
    reference_records,
)
from audit.cell.references import cell_reference_specs, cell_spec
from audit.config import CellConfig
from audit.mechanisms import CellData
from audit.profiles import PROFILES, ProfileName
from audit.rows.filling import worst_case_columns


def _data(n_train: int, n_test: int) -> CellData:
    """Records whose first pixel is their dataset row (train 0.., val 1000.., test 2000..)."""

    def pair(start: int, n: int):
        x = torch.zeros(n, 1, 4, 4)
        x[:, 0, 0, 0] = torch.arange(start, start + n, dtype=torch.float32)
        return x, torch.arange(n) % 2

    return CellData(pair(0, n_train), pair(1000, 10), pair(2000, n_test), 2, n_train + n_test + 10)


def _cell(seed: int = 0) -> CellConfig:
    return CellConfig(
        dataset="digits",
        mech="none",
        param_name="none",
        param_value=None,
        seed=seed,
        profile=PROFILES[ProfileName.QUICK],
    )


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_reference_records_are_in_neither_d_train_nor_d_atk(seed):
    data, cell = _data(n_train=50, n_test=90), _cell(seed)
    reference = reference_records(data, cell)
    ids = set(reference.x[:, 0, 0, 0].int().tolist())
    attacked = set(attack_data(data, cell).x[:, 0, 0, 0].int().tolist())
    train = set(data.train[0][:, 0, 0, 0].int().tolist())
    assert not ids & attacked and not ids & train
    _, nonmembers = _attack_positions(data, cell)
    assert len(ids) == 90 - len(nonmembers) == 40  # every other D_test record, no cap
    assert ids | {2000 + int(i) for i in nonmembers} == set(range(2000, 2090))
    assert torch.equal(reference.y, data.test[1][reference_positions(data, cell)])


def test_too_few_reference_records_give_none():
    data = _data(n_train=50, n_test=50 + MIN_REFERENCE_RECORDS - 1)
    assert reference_records(data, _cell()) is None


def test_reference_models_follow_the_cells_recipe_on_its_reference_records():
    data = _data(n_train=50, n_test=90)
    cell = replace(_cell(3), attacks=("latent-search", "likelihood"))
    (spec,) = cell_reference_specs(cell, data)  # mech none: one set, non-private
    profile = cell.profile
    assert spec.n_models == profile.reference_models == 2 and spec.seed == 3
    assert spec.n_reference == 40 and spec.recipe.records_per_model == 20  # half of 40 < 50
    recipe = spec.recipe
    assert (recipe.latent_dim, recipe.epochs, recipe.batch_size, recipe.lr, recipe.beta) == (
        profile.latent_dim,
        profile.epochs,
        profile.batch_size,
        profile.lr,
        profile.beta,
    )
    assert recipe.nonprivate and spec.copied is None
    assert recipe.describe().endswith("non-private Adam")
    assert spec.key != cell_reference_specs(replace(cell, seed=4), data)[0].key


def _private(cell: CellConfig, mech: str, name: str, value: float) -> CellConfig:
    return replace(cell, mech=mech, param_name=name, param_value=value)


def test_a_private_cells_reference_models_copy_its_mechanism_beside_a_nonprivate_set():
    data = _data(n_train=50, n_test=90)
    base = replace(_cell(3), attacks=("latent-search", "likelihood"))
    (plain,) = cell_reference_specs(base, data)
    cdp = _private(base, "cdp", "noise_multiplier", 1.0)
    copying, nonprivate = cell_reference_specs(cdp, data)
    assert nonprivate.key == plain.key  # every private cell of the seed shares the plain set
    assert copying.recipe.mechanism == "cdp" and copying.copied == cdp
    assert "the cell's mechanism, cdp noise_multiplier=1" in copying.recipe.describe()
    assert copying.recipe.batch_size == min(cdp.profile.batch_size, 20)
    # the key holds what the training depends on: the mechanism, its grid value, its options
    others = (
        _private(base, "cdp", "noise_multiplier", 2.0),
        _private(base, "ldp", "eps_i", 1.0),
        replace(cdp, profile=replace(cdp.profile, epochs=3)),
    )
    keys = {copying.key, *(cell_reference_specs(c, data)[0].key for c in others)}
    assert len(keys) == 4
    # not on what does not touch training: the attack list
    other = replace(cdp, attacks=("likelihood",))
    assert cell_reference_specs(other, data)[0].key == copying.key


def test_no_reference_models_without_records_r_or_a_calibrating_attack():
    data = _data(n_train=50, n_test=90)
    calibrating = replace(_cell(), attacks=("likelihood",))
    few = _data(n_train=50, n_test=50 + MIN_REFERENCE_RECORDS - 1)
    assert cell_reference_specs(calibrating, few) == ()
    assert "fewer than 20" in reference_note(few, calibrating, None)
    assert "calibrated variants not run" in reference_note(few, calibrating, None)
    off = replace(calibrating, profile=replace(calibrating.profile, reference_models=0))
    reference = reference_records(data, off)
    assert cell_spec(off, data, reference) is None
    assert "reference-models 0" in reference_note(data, off, reference)
    plain = _cell()  # the reconstruction attack alone
    assert cell_spec(plain, data, reference) is None
    assert "no attack of the cell calibrates" in reference_note(data, plain, reference)


def _result(attack: str, scores: np.ndarray, is_member: np.ndarray, variant=Variant.MEAN):
    return AttackResult(
        attack=attack,
        distance=Distance.MSE,
        variant=variant,
        scores=scores,
        is_member=is_member,
        n_samples=1,
    )


def test_worst_case_marks_exactly_the_leaking_attack_with_held_out_metrics():
    rng = np.random.default_rng(0)
    is_member = np.repeat([True, False], 100)
    leaky = is_member + rng.normal(0, 0.3, 200)  # separates members well
    results = [
        _result("reconstruction", rng.normal(size=200), is_member),
        _result("likelihood", leaky, is_member, Variant.RAW),
        _result("domias", rng.normal(size=200), is_member, Variant.LOG_RATIO),
    ]
    columns = worst_case_columns(results, seed=3)
    assert [c["worst_case"] for c in columns] == [False, True, False]
    assert len({(c["worst_mi_ap"], c["worst_tpr_at_fpr_1pct"]) for c in columns}) == 1
    assert columns[0]["worst_mi_ap"] > 0.9
    assert worst_case_columns(results, seed=3) == columns  # seeded


def test_worst_case_of_chance_attacks_is_still_exactly_one_row():
    rng = np.random.default_rng(1)
    is_member = np.repeat([True, False], 50)
    results = [_result(f"a{k}", rng.normal(size=100), is_member) for k in range(4)]
    for seed in range(5):
        columns = worst_case_columns(results, seed=seed)
        assert sum(c["worst_case"] for c in columns) == 1
        assert 0.2 < columns[0]["worst_mi_ap"] < 0.8  # held out: near chance, not max-biased


def test_a_d_atk_too_small_to_halve_has_no_worst_case():
    is_member = np.array([True, False, False])
    columns = worst_case_columns([_result("reconstruction", np.zeros(3), is_member)], seed=0)
    assert columns == [{"worst_case": None}]


def test_training_divergence_is_detected_from_the_epoch_losses():
    from audit.cell.target import DIVERGENCE_FACTOR, training_diverged

    healthy = [8430.2, 8337.6, 8213.2, 7571.7]
    assert not training_diverged(healthy)
    assert not training_diverged([100.0, 104.0, 99.0, 101.0])  # DP noise wobbles by percents
    # LFW20, quick profile, seed 1 (measured): an exploding posterior variance at epoch 11
    assert training_diverged([8432.5, 8220.1, 9389.5, 4.4e13, 4.28e27])
    assert training_diverged([8432.5, float("nan")])
    assert training_diverged([10.0, 10.0 * DIVERGENCE_FACTOR * 1.01])
    assert not training_diverged([])
