"""The worst case over attacks, without the upward bias of a maximum over noisy estimates.

The privacy axis a user reads is the strongest attack. Taking the largest MI AP over k attacks on
one D_atk is biased upward: under the null (no leakage) each AP scatters around chance and
their maximum does not. :func:`held_out_worst_case` splits D_atk in two (seeded, stratified by
membership), picks the attack with the highest MI AP on the selection half, and reports that
attack's metrics on the other half, which played no part in the choice, so that they are an
unbiased estimate of the chosen attack's performance (at half the records).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.metrics import average_precision_score

from attacks.attack import AttackResult
from attacks.metrics import AttackMetrics


@dataclass(frozen=True, eq=False)
class WorstCase:
    """The attack chosen on the selection half and its metrics on the evaluation half.

    Attributes:
        attack, distance, variant: the chosen result's keys (as in ``AttackResult.to_row``).
        index: the chosen result's position among the results given.
        selection_mi_ap: its MI AP on the selection half (biased upward; for the record only).
        metrics: its metrics on the evaluation half (the figure to report).
        scores, is_member: its scores and the membership on the evaluation half, for whatever
            else is measured there (intervals, chance quantiles), with no second split.
        seed: the split's seed.
    """

    attack: str
    distance: str
    variant: str
    index: int
    selection_mi_ap: float
    metrics: AttackMetrics
    scores: np.ndarray
    is_member: np.ndarray
    seed: int


def held_out_count(count: int, select_fraction: float = 0.5) -> int:
    """How many of a class's ``count`` records :func:`split_halves` leaves to the evaluation
    half: ``count - round(select_fraction x count)``."""
    return count - int(round(select_fraction * count))


def split_halves(
    is_member: np.ndarray, *, seed: int, select_fraction: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """(select, evaluate) sorted index arrays: a seeded split stratified by membership.

    Each class (members, non-members) is shuffled with ``default_rng(seed)`` and its first
    round(select_fraction x count) records go to the selection half. Both halves must hold at
    least one member and one non-member.
    """
    if not 0.0 < select_fraction < 1.0:
        raise ValueError(f"select_fraction must lie in (0, 1), got {select_fraction!r}")
    rng = np.random.default_rng(seed)
    select, evaluate = [], []
    for label in (True, False):
        members = np.flatnonzero(is_member == label)
        rng.shuffle(members)
        k = members.size - held_out_count(members.size, select_fraction)
        if k == 0 or k == members.size:
            raise ValueError(
                f"cannot split {members.size} {'members' if label else 'non-members'} into two "
                f"non-empty parts at select_fraction={select_fraction}; the worst case needs at "
                "least two of each"
            )
        select.append(members[:k])
        evaluate.append(members[k:])
    return np.sort(np.concatenate(select)), np.sort(np.concatenate(evaluate))


def held_out_worst_case(
    results: Sequence[AttackResult] | Mapping[object, AttackResult],
    *,
    seed: int,
    select_fraction: float = 0.5,
) -> WorstCase:
    """Pick the attack with the highest MI AP on one half of D_atk; report it on the other.

    Args:
        results: results of several attacks (any mix of attacks, distances and variants) on the
            same D_atk, i.e. identical ``is_member``; a mapping's values are used.
        seed: seeds the split (see :func:`split_halves`).
        select_fraction: share of each class in the selection half.

    Ties on the selection half go to the first result in order.
    """
    results = list(results.values()) if isinstance(results, Mapping) else list(results)
    if not results:
        raise ValueError("held_out_worst_case needs at least one attack result, got none")
    is_member = results[0].is_member
    for result in results[1:]:
        if not np.array_equal(result.is_member, is_member):
            raise ValueError(
                f"all results must come from the same D_atk; {result.attack} "
                f"({result.distance.value}, {result.variant.value}) has other membership labels"
            )
    select, evaluate = split_halves(is_member, seed=seed, select_fraction=select_fraction)
    selection_aps = [  # MI AP as in AttackMetrics, without the curves it does not need
        float(average_precision_score(is_member[select], r.scores[select])) for r in results
    ]
    best = int(np.argmax(selection_aps))
    chosen = results[best]
    return WorstCase(
        attack=chosen.attack,
        distance=chosen.distance.value,
        variant=chosen.variant.value,
        index=best,
        selection_mi_ap=selection_aps[best],
        metrics=AttackMetrics.from_scores(chosen.scores[evaluate], is_member[evaluate]),
        scores=chosen.scores[evaluate],
        is_member=is_member[evaluate],
        seed=seed,
    )
