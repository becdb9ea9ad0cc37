"""How many guesses (k+, k-) a one-run audit makes: a rule fixed before the evaluation scores are
seen (torch-free).

- ``quarter``: k+ = k- = m/4 (the earlier default);
- ``design``: the guesses that maximise the one-run bound
  (:func:`audit.empirical.bounds.one_run_epsilon_bound`) the audit would reach if its scores
  were what the claim allows at most, modelled as a Gaussian shift: included canaries'
  scores N(mu, 1), excluded N(0, 1), mu the GDP parameter whose curve passes through the claim
  (eps, delta). Under that model the top k scores hold ``k * P(in | score >= t_k)`` included
  canaries, the bottom k as many excluded ones (symmetry); the rule tries one-sided (k, 0) and
  two-sided (k, k) guesses for k on a log grid and keeps the best expected bound. It reads m,
  delta and the claim only (all fixed by the mechanism's parameters before training), never
  a score.
"""

from __future__ import annotations

import math
from enum import Enum
from functools import lru_cache

import numpy as np
from scipy import optimize, stats

from audit.empirical.bounds import CONFIDENCE, one_run_epsilon_bound
from audit.privacy.gaussian import analytic_gaussian_sigma

#: Number of k values the design rule tries (log-spaced from 1 to m/2).
DESIGN_GRID = 24


class GuessRule(str, Enum):
    QUARTER = "quarter"
    DESIGN = "design"


def quarter_guesses(m: int) -> tuple[int, int]:
    k = max(1, m // 4)
    return k, k


def _top_precision(k: float, m: int, mu: float) -> float:
    """P(in | among the top k of m scores), half of them N(mu, 1) and half N(0, 1)."""

    def excess(t: float) -> float:
        return m / 2 * (stats.norm.sf(t - mu) + stats.norm.sf(t)) - k

    t = optimize.brentq(excess, -40.0, 40.0 + mu, xtol=1e-10)
    hit, miss = stats.norm.sf(t - mu), stats.norm.sf(t)
    return float(hit / (hit + miss))


@lru_cache(maxsize=256)
def design_guesses(
    *, m: int, claim_epsilon: float, delta: float, confidence: float = CONFIDENCE
) -> tuple[int, int]:
    """(k+, k-) of the ``design`` rule (module docstring) for m canaries and the claim."""
    if isinstance(m, bool) or not isinstance(m, int) or m < 2:
        raise ValueError(f"m must be an integer >= 2, got {m!r}")
    if not (math.isfinite(claim_epsilon) and claim_epsilon > 0):
        return quarter_guesses(m)
    mu = 1.0 / analytic_gaussian_sigma(epsilon=claim_epsilon, delta=delta)
    best, chosen = -1.0, quarter_guesses(m)
    ks = np.unique(np.round(np.geomspace(1, m // 2, DESIGN_GRID)).astype(int))
    for k in ks:
        precision = _top_precision(float(k), m, mu)
        for guesses in ((int(k), 0), (int(k), int(k))):
            r = sum(guesses)
            v = int(math.floor(r * precision))
            value = one_run_epsilon_bound(m=m, r=r, v=v, delta=delta, confidence=confidence)
            if value.epsilon > best:
                best, chosen = value.epsilon, guesses
    return chosen
