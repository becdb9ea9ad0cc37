from __future__ import annotations

import math

import numpy as np
import pytest

from audit.rows.tradeoff import chance_accuracy, majority_share, phi_score


def test_phi_matches_equation_2_by_hand():
    # the trade-off paper, Eq. 2: privacy gained 0.9-0.8 = 0.1 of 0.4 possible; accuracy lost 0.1 of
    # 0.5
    value = phi_score(atk_orig=0.9, atk=0.8, acc_orig=0.8, acc=0.7, acc_base=0.3)
    assert value == pytest.approx((0.1 * 0.5) / (0.1 * 0.4))
    assert phi_score(atk_orig=0.9, atk=0.8, acc_orig=0.8, acc=0.6, acc_base=0.3) == pytest.approx(
        (0.1 * 0.5) / (0.2 * 0.4)
    )


def test_phi_is_capped_at_two():
    assert phi_score(atk_orig=0.9, atk=0.7, acc_orig=0.8, acc=0.7, acc_base=0.3) == 2.0


def test_phi_zero_when_no_privacy_is_gained_including_zero_over_zero():
    assert phi_score(atk_orig=0.9, atk=0.9, acc_orig=0.8, acc=0.8, acc_base=0.1) == 0.0
    assert phi_score(atk_orig=0.9, atk=0.95, acc_orig=0.8, acc=0.5, acc_base=0.1) == 0.0


def test_phi_two_when_privacy_comes_for_free():
    assert phi_score(atk_orig=0.9, atk=0.6, acc_orig=0.8, acc=0.85, acc_base=0.1) == 2.0


def test_phi_nan_propagates():
    assert math.isnan(phi_score(atk_orig=math.nan, atk=0.6, acc_orig=0.8, acc=0.7, acc_base=0.1))


@pytest.mark.parametrize(
    ("correct", "n", "chance", "valid"),
    [  # smallest counts with P(X >= k | n, chance) < 0.01 (scipy.stats.binom.sf(k - 1, n, p))
        (62, 100, 0.5, False),
        (63, 100, 0.5, True),
        (39, 60, 0.5, False),  # lfw-subset's D_test: 0.65 is not enough
        (40, 60, 0.5, True),
        (71, 540, 0.1, False),  # digits' D_test
        (72, 540, 0.1, True),
    ],
)
def test_above_chance_is_a_one_sided_binomial_test_at_1pct(correct, n, chance, valid):
    from scipy.stats import binom

    from audit.rows.tradeoff import above_chance

    assert above_chance(correct / n, n_test=n, chance=chance) is valid
    assert bool(binom.sf(correct - 1, n, chance) < 0.01) is valid
    assert above_chance(math.nan, n_test=n, chance=chance) is False


def test_majority_share_is_the_most_common_labels_share():
    import torch

    assert majority_share(torch.tensor([0, 1, 1, 2])) == 0.5
    assert majority_share(np.array([3, 3, 0])) == 2 / 3
    assert math.isnan(majority_share(torch.tensor([], dtype=torch.int64)))


def test_chance_accuracy_is_the_larger_of_the_known_levels():
    assert chance_accuracy(0.05, 0.278) == 0.278  # LFW20: the majority share
    assert chance_accuracy(0.5, 0.3) == 0.5
    assert chance_accuracy(0.1) == chance_accuracy(0.1, None) == 0.1
    assert chance_accuracy(math.nan, 0.3) == chance_accuracy(None, 0.3) == 0.3
    assert math.isnan(chance_accuracy(None, math.nan))
