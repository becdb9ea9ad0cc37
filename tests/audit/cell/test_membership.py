"""D_atk's membership by independent coins (audit.cell.membership.membership_by_coins,
cell_data)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from audit.cell.membership import independent_membership, membership_by_coins
from audit.config import CellConfig
from audit.profiles import PROFILES, ProfileName


def _cell(seed: int, mech="none", value=None) -> CellConfig:
    return CellConfig(
        dataset="digits",
        mech=mech,
        param_name="none" if value is None else "noise_multiplier",
        param_value=value,
        seed=seed,
        profile=PROFILES[ProfileName.QUICK],
    )


def test_candidates_keep_the_rest_of_the_split_and_cells_of_a_seed_agree():
    train_idx, test_idx = np.arange(0, 300), np.arange(1000, 1090)
    train, test, members, others = membership_by_coins(train_idx, test_idx, _cell(3))
    assert len(members) + len(others) == 2 * 90  # n = min(|D_train|, |D_test|) from each side
    assert not set(train) & set(test) and set(train) | set(test) == set(train_idx) | set(test_idx)
    same = membership_by_coins(train_idx, test_idx, _cell(3, "cdp", 1.0))
    mine = (train, test, members, others)
    assert all(np.array_equal(a, b) for a, b in zip(mine, same, strict=True))


@pytest.mark.statistical
def test_each_candidate_is_a_member_on_a_fair_coin_whatever_its_side():
    """Over 200 seeds, members among the candidates drawn from the split's D_train and from its
    D_test are each Binomial(n, 1/2): both shares within 4 standard errors of 1/2 (a balanced
    draw keeping the split's sides would give 1 and 0)."""
    train_idx, test_idx = np.arange(0, 40), np.arange(1000, 1040)
    from_train = from_test = total = 0
    for seed in range(200):
        train, _, members, _ = membership_by_coins(train_idx, test_idx, _cell(seed))
        chosen = train[members]
        from_train += int((chosen < 1000).sum())
        from_test += int((chosen >= 1000).sum())
        total += 40
    se = np.sqrt(0.25 / total)
    assert abs(from_train / total - 0.5) < 4 * se and abs(from_test / total - 0.5) < 4 * se
    assert stats.norm.sf(4) < 1e-4


def test_cell_data_draws_d_atk_by_coins_and_says_so():
    from dataclasses import replace

    from audit.cell.membership import attack_data, cell_data
    from audit.datasets import load_dataset, stratified_split

    balanced = _cell(0)
    cell = replace(balanced, profile=replace(balanced.profile, membership_coins=True))
    dataset = load_dataset("digits")
    split = stratified_split(dataset.y, fractions=dataset.split_fractions, seed=0)
    data = cell_data(dataset, split, cell)
    assert independent_membership(data) and "fair coin" in data.notes["attack_membership"]
    atk = attack_data(data, cell)
    n_members = int(atk.is_member.sum())
    # quick caps D_train at 50: 50 + 50 candidates, Binomial(100, 1/2) of them members
    assert atk.n_records == 100 and n_members == len(data.train[0])
    plain = cell_data(dataset, split, balanced)  # the default: balanced, no bound claimed
    assert not independent_membership(plain) and "attack_membership" not in plain.notes
    assert int(attack_data(plain, balanced).is_member.sum()) == 50
    assert "membership_coins" not in balanced.canonical()["profile"]  # old hashes kept
    assert cell.config_hash != balanced.config_hash
