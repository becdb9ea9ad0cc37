"""The privacy-accuracy trade-off score phi of the trade-off paper (Eq. 2), and chance accuracy."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

ATK_BASE = 0.5  # MI AP of a coin flip on a balanced D_atk
PHI_MAX = 2.0


def phi_score(
    *,
    atk_orig: float,
    atk: float,
    acc_orig: float,
    acc: float,
    acc_base: float,
    atk_base: float = ATK_BASE,
) -> float:
    """phi = min(2, max(0, (ATK_o - ATK_e)(ACC_o - ACC_b))
    / max(0, (ACC_o - ACC_e)(ATK_o - ATK_b))).

    The relative privacy gained per relative accuracy lost, against the same dataset's
    non-private run (``*_orig``); ``acc_base`` = 1/#classes, ``atk_base`` = 0.5.

    Notes
    -----
    The trade-off paper leaves the degenerate cases open; we define them so that phi is total:
    - numerator 0 (no privacy gained, including 0/0): phi = 0, a setting that buys no privacy
      earns no credit whatever it costs;
    - denominator 0 with a positive numerator (privacy gained for free, or a baseline attack
      no better than chance): phi = 2, the cap.
    Any NaN input gives NaN.
    """
    values = (atk_orig, atk, acc_orig, acc, acc_base, atk_base)
    if any(math.isnan(v) for v in values):
        return math.nan
    num = max(0.0, (atk_orig - atk) * (acc_orig - acc_base))
    den = max(0.0, (acc_orig - acc) * (atk_orig - atk_base))
    if num == 0.0:
        return 0.0
    if den == 0.0:
        return PHI_MAX
    return min(PHI_MAX, num / den)


def chance_accuracy(acc_base: float | None, acc_majority: float | None = math.nan) -> float:
    """Chance accuracy, what a classifier scores without learning anything: the larger of
    1/#classes (``acc_base``) and D_test's majority-class share (``acc_majority``: what always
    answering the commonest class scores; LFW20: 0.278). Either alone where the other is unknown
    (None or NaN); NaN where neither is known. The one definition the rows, report, release
    summary and CI gate use."""
    given = (float(v) for v in (acc_base, acc_majority) if v is not None)
    known = [v for v in given if math.isfinite(v)]
    return max(known) if known else math.nan


def majority_share(labels: Sequence[int] | np.ndarray) -> float:
    """The share of the most common label among integer ``labels`` (a row's ``acc_majority``;
    NaN for no labels)."""
    labels = np.asarray(labels)
    if labels.size == 0:
        return math.nan
    return float(np.bincount(labels).max() / labels.size)


def phi_clipped(
    *,
    atk_orig: float,
    atk: float,
    acc_orig: float,
    acc: float,
    chance: float,
) -> float:
    """The phi a reader sees: :func:`phi_score` after clipping each MI AP at :data:`ATK_BASE`
    (an attack below chance is at chance) and each accuracy at ``chance``
    (:func:`chance_accuracy`), with ``acc_base`` = ``chance``.

    Notes
    -----
    With both clips, a setting whose accuracy is at or below chance has
    phi = (ATK_o - ATK_e) / (ATK_o - 0.5) <= 1: it cannot earn more than a setting that keeps
    its utility, whatever privacy it buys. The trade-off paper's raw formula (:func:`phi_score` with
    ``acc_base`` = 1/#classes, no clips) rewards such a setting (phi 1.31 at accuracy 0.098 on
    digits, whose majority rate is 0.102); it is kept as ``phi_paper`` for comparison with the
    paper's figures. Whether phi means anything at all (the baseline's attack beyond its chance
    band, its utility above chance) is the caller's check (:mod:`audit.rows.derived`).
    """
    return phi_score(
        atk_orig=max(atk_orig, ATK_BASE),
        atk=max(atk, ATK_BASE),
        acc_orig=max(acc_orig, chance),
        acc=max(acc, chance),
        acc_base=chance,
    )


#: Significance level of :func:`above_chance`.
UTILITY_ALPHA = 0.01


def above_chance(acc: float, *, n_test: int, chance: float, alpha: float = UTILITY_ALPHA) -> bool:
    """Whether accuracy ``acc`` on ``n_test`` test records is above ``chance`` (1 / #classes).

    One-sided exact binomial test: k = round(acc * n_test) correct answers, H0 accuracy = chance;
    True when P(X >= k | n_test, chance) < ``alpha``. A NaN accuracy or test size is not above
    chance. At n_test = 100 and chance 0.5 this needs 63 correct (0.63); at n_test = 60
    (lfw-subset's D_test), 40 (0.667); at n_test = 540 and chance 0.1 (digits), 72 (0.133).
    """
    from scipy.stats import binomtest

    if not (math.isfinite(acc) and math.isfinite(n_test) and n_test >= 1):
        return False
    k = round(acc * n_test)
    return bool(binomtest(k, int(n_test), chance, alternative="greater").pvalue < alpha)
