"""Every attack is an audit: an epsilon lower bound from an attack's own scores on D_atk.

An (eps, delta)-DP training run bounds every membership test on its records. Steinke, Nasr and
Jagielski (2023, Algorithm 1 and Theorem 3) turn one run into such a test when m records are
each included independently with probability 1/2: guess "in" for high scores, "out" for low
ones, abstain otherwise; v right of r guesses gives a bound at 95 % confidence
(:func:`audit.empirical.bounds.one_run_epsilon_bound`).

Here the m records are D_atk, whose membership the sweep draws that way
(:func:`audit.cell.membership.cell_data`: each D_atk candidate goes to D_train on its own fair
coin). D_atk is halved (seeded): on the selection half the guess thresholds are chosen (the counts
k+ and k- of the grid :data:`GUESS_SHARES` that give the largest bound there), and on the
other half those score thresholds make the guesses that are counted, with m = that half's
size. Conditional on the selection half's coins the other half's are still independent fair
coins, and its guesses are a function of the release alone (plus those fixed coins), which
is all the theorem asks.

Notes:
    The bound is at the claim's delta, computed for every m and delta: the theorem holds for any
    delta, and the computation decides whether an epsilon is rejected. Its delta term is ``2 m
    delta`` times a probability that can be tiny (a perfect attack on m = 200 records at delta
    1e-3 proves 3.566), so there is no blanket rule on ``2 m delta``. What does hold for every
    outcome is that the p-value is at least ``2 delta`` (:func:`audit.empirical.bounds.
    one_run_epsilon_bound`), so at ``2 delta >= 1 - confidence`` the bound and its ceiling are 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from audit.empirical.bounds import CONFIDENCE, one_run_epsilon_bound, one_run_p_value

GUESS_SHARES = (0.05, 0.1, 0.2, 0.35, 0.5)
"""Shares of the selection half guessed "in" (top scores) and, separately, "out" (bottom)."""


@dataclass(frozen=True)
class AttackBound:
    """``epsilon``: the lower bound at ``confidence`` (NaN where none could be computed, with
    ``note`` saying why); ``ceiling``: the bound had every guess been right; m, r, v: records
    of the evaluation half, guesses made there, guesses right; ``p_value``: the p-value of the
    claim's epsilon given the same guesses (Steinke et al.'s, :func:`~audit.empirical.bounds.
    one_run_p_value`; NaN without a bound or a finite claim), which the gate compares with a
    family-wise corrected level."""

    epsilon: float
    ceiling: float
    m: int
    r: int
    v: int
    note: str
    p_value: float = math.nan

    def columns(self) -> dict[str, object]:
        return {
            "epsilon_lower_attack": self.epsilon,
            "epsilon_lower_attack_ceiling": self.ceiling,
            "epsilon_lower_attack_note": self.note,
            "epsilon_lower_attack_p": self.p_value,
        }


def _not_computed(note: str, m: int = 0) -> AttackBound:
    return AttackBound(math.nan, math.nan, m, 0, 0, note)


def _counts(scores, is_member, high, low) -> tuple[int, int]:
    guess_in, guess_out = scores >= high, scores <= low
    right = int((guess_in & is_member).sum() + (guess_out & ~is_member).sum())
    return int(guess_in.sum() + guess_out.sum()), right


def _thresholds(scores: np.ndarray, share_in: float, share_out: float) -> tuple[float, float]:
    """(high, low): guess "in" at scores >= high (the top share_in), "out" at <= low."""
    ranked = np.sort(scores)[::-1]
    k_in, k_out = round(share_in * scores.size), round(share_out * scores.size)
    high = ranked[k_in - 1] if k_in else math.inf
    low = ranked[-k_out] if k_out else -math.inf
    if low >= high:  # the two groups met: guess "out" strictly below the "in" threshold
        low = np.nextafter(high, -math.inf)
    return float(high), float(low)


def attack_epsilon_bound(
    scores: np.ndarray,
    is_member: np.ndarray,
    *,
    delta: float,
    seed: int,
    independent: bool,
    confidence: float = CONFIDENCE,
    claim_epsilon: float = math.nan,
) -> AttackBound:
    """The attack's epsilon lower bound (module docstring), or NaN and why.

    ``independent``: whether each record's membership was an independent fair coin (the
    theorem's premise); False gives NaN. ``claim_epsilon``: the claim whose p-value the bound
    carries (NaN: none).
    """
    scores = np.asarray(scores, dtype=np.float64)
    is_member = np.asarray(is_member, dtype=bool)
    if not independent:
        return _not_computed(
            "not computed: D_atk's membership was not drawn by independent fair coins, which "
            "the one-run analysis needs"
        )
    if not (math.isfinite(delta) and 0 <= delta < 1):
        return _not_computed(f"not computed: delta {delta!r} is not in [0, 1)")
    rng = np.random.default_rng(seed)
    select = np.zeros(scores.size, bool)
    select[rng.permutation(scores.size)[: scores.size // 2]] = True
    evaluate = ~select
    m = int(evaluate.sum())
    if m < 1 or select.sum() < 1:
        return _not_computed("not computed: too few records to halve", m)
    best, chosen = -1.0, (math.inf, -math.inf)
    s_sel, member_sel = scores[select], is_member[select]
    for share_in in GUESS_SHARES:
        for share_out in (0.0, *GUESS_SHARES):
            if share_in + share_out > 1:
                continue
            high, low = _thresholds(s_sel, share_in, share_out)
            r, v = _counts(s_sel, member_sel, high, low)
            if r == 0:
                continue
            eps = one_run_epsilon_bound(m=s_sel.size, r=r, v=v, delta=delta, tol=1e-2).epsilon
            if eps > best:
                best, chosen = eps, (high, low)
    r, v = _counts(scores[evaluate], is_member[evaluate], *chosen)
    if r == 0:
        p = 1.0 if math.isfinite(claim_epsilon) else math.nan
        return AttackBound(0.0, 0.0, m, 0, 0, "no guesses on the evaluation half", p)
    bound = one_run_epsilon_bound(m=m, r=r, v=v, delta=delta, confidence=confidence, tol=1e-3)
    note = (
        f"one-run analysis (Steinke et al. 2023) of this attack's scores: {v} of r = {r} "
        f"guesses right on m = {m} held-out D_atk records, thresholds fixed on the other "
        f"{int(select.sum())}, delta {delta:.3g}"
    )
    if bound.ceiling == 0:
        note += "; even all r right would prove nothing at this delta"
    p = (
        one_run_p_value(m=m, r=r, v=v, epsilon=claim_epsilon, delta=delta)
        if math.isfinite(claim_epsilon) and claim_epsilon >= 0
        else math.nan
    )
    return AttackBound(bound.epsilon, bound.ceiling, m, r, v, note, p)
