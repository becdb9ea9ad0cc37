"""What a one-run audit is asked (:class:`OneRunSettings`) and what it found
(:class:`OneRunAudit`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from audit.empirical.bounds import CONFIDENCE, OneRunBound
from audit.empirical.guesses import GuessRule, design_guesses, quarter_guesses
from audit.empirical.input_canaries import InputDesign
from audit.privacy.claim import PrivacyClaim

#: Tag that separates every seed of the audit run from the cell's own.
ONE_RUN_TAG = "one-run-audit"


class CanaryKind(str, Enum):
    GRADIENT = "gradient"
    INPUT = "input"


class Broken(str, Enum):
    """Test-only broken mechanisms (never used by a real cell)."""

    NONE = "none"
    NO_NOISE = "no-noise"  # trains with z = 0; the claim keeps the run's z
    NO_CLIP = "no-clip"  # records' gradients are not clipped; the noise std stays z*C


@dataclass(frozen=True)
class OneRunSettings:
    """m canaries, the guesses, and the audit's seed.

    Guesses: ``k_plus`` / ``k_minus`` where given (the other then m/4), else ``guess_rule``
    (:mod:`audit.empirical.guesses`: ``design``, the default, fixes them from m, delta and the
    claim before any score is seen; ``quarter``, m/4 each).

    ``canary_norm``: a gradient canary's norm before clipping, in units of C (> 1, so that the
    clipping is exercised: a clipped canary has norm C). ``input_design``: what input canaries
    are (:mod:`audit.empirical.input_canaries`); ``reference``: input canaries' scores minus
    their scores on a model trained without canaries (one more training; the adversary of DP
    knows every other record, so may train that model). ``copies``: each included input canary
    goes into D_train that many times (one coin per canary), so the datasets with and without a
    canary differ in ``copies`` records and the audit compares with the group claim
    (:func:`group_claim`), never the single-record one.
    """

    kind: CanaryKind = CanaryKind.GRADIENT
    canaries: int = 1000
    k_plus: int | None = None
    k_minus: int | None = None
    seed: int = 0
    canary_norm: float = 10.0
    confidence: float = CONFIDENCE
    broken: Broken = Broken.NONE
    guess_rule: GuessRule = GuessRule.DESIGN
    input_design: InputDesign = InputDesign.UNIFORM_NOISE
    reference: bool = False
    copies: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", CanaryKind(self.kind))
        object.__setattr__(self, "guess_rule", GuessRule(self.guess_rule))
        object.__setattr__(self, "input_design", InputDesign(self.input_design))
        object.__setattr__(self, "broken", Broken(self.broken))
        m = self.canaries
        if isinstance(m, bool) or not isinstance(m, int) or m < 2:
            raise ValueError(f"canaries must be an integer >= 2, got {m!r}")
        k_plus, k_minus = self.explicit_guesses() or (1, 1)
        if min(k_plus, k_minus) < 0 or k_plus + k_minus > m or k_plus + k_minus == 0:
            raise ValueError(
                f"need k_plus, k_minus >= 0 with 0 < k_plus + k_minus <= canaries ({m}), "
                f"got {k_plus} and {k_minus}"
            )
        c = self.copies
        if isinstance(c, bool) or not isinstance(c, int) or c < 1:
            raise ValueError(f"copies must be an integer >= 1, got {c!r}")
        if c > 1 and self.kind is not CanaryKind.INPUT:
            raise ValueError("copies > 1 applies to input canaries only")
        if not (math.isfinite(self.canary_norm) and self.canary_norm >= 1):
            raise ValueError(f"canary_norm must be >= 1 (units of C), got {self.canary_norm!r}")

    def explicit_guesses(self) -> tuple[int, int] | None:
        if self.k_plus is None and self.k_minus is None:
            return None
        default, _ = quarter_guesses(self.canaries)
        return (
            default if self.k_plus is None else self.k_plus,
            default if self.k_minus is None else self.k_minus,
        )

    def guesses(self, *, claim_epsilon: float, delta: float) -> tuple[int, int]:
        """(k+, k-): the explicit ones, else the rule's (from m, delta and the claim only)."""
        explicit = self.explicit_guesses()
        if explicit is not None:
            return explicit
        if self.guess_rule is GuessRule.QUARTER:
            return quarter_guesses(self.canaries)
        return design_guesses(
            m=self.canaries, claim_epsilon=claim_epsilon, delta=delta, confidence=self.confidence
        )


@dataclass(frozen=True)
class OneRunAudit:
    """The bound, the claim it is compared with, and how both were obtained.

    ``bound`` is Steinke et al.'s (the ``one-run`` estimator, ``epsilon``); ``fdp_epsilon`` the
    f-DP bound of Mahloujifar et al. over the same guesses (``one-run-fdp``, which assumes a
    Gaussian-shaped trade-off curve). ``scores`` and ``included`` are the raw canary scores and
    the truth; ``extra`` holds
    secondary facts (e.g. the parameter-move bound of gradient canaries, which is NOT combined
    with the main one: taking the better of two would need a multiple-testing correction).
    """

    kind: CanaryKind
    score: str
    claim: PrivacyClaim
    bound: OneRunBound
    fdp_epsilon: float
    k_plus: int
    k_minus: int
    broken: Broken
    guess_rule: str
    train_seconds: float
    seconds: float
    scores: np.ndarray = field(repr=False)
    included: np.ndarray = field(repr=False)
    extra: dict[str, float | str] = field(default_factory=dict)

    @property
    def epsilon(self) -> float:
        return self.bound.epsilon


def count_correct(
    scores: np.ndarray, included: np.ndarray, *, k_plus: int, k_minus: int
) -> tuple[int, int]:
    """(r, v): guess the ``k_plus`` highest scores in and the ``k_minus`` lowest out (ties by
    index, which is independent of inclusion), count the right guesses."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    guessed_in, guessed_out = order[:k_plus], order[len(order) - k_minus :]
    v = int(included[guessed_in].sum()) + int((~included[guessed_out]).sum())
    return k_plus + k_minus, v
