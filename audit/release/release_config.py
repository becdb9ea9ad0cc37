"""What a user's release attack is asked: the release's name, the config and its checks."""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass

from attacks.attack import check_positive_ints, check_seed
from audit.attack_plan import check_requested
from audit.profiles import SIZE_LIMIT_REASON, SIZE_LIMITS
from audit.release.record_sets import SERIES_RANGE
from dpvae_core.records import Modality
from dpvae_core.validation import check_at_most, parse_enum

#: The longest release name (it titles the report and names its figure files).
NAME_MAX = 80


def check_name(name: object) -> str:
    """``name`` if it can name a release (the rows' ``dataset`` column, the report's title, its
    figure files): one line of at most :data:`NAME_MAX` printable characters, not blank, no
    ``/`` or ``\\``; else ValueError in one line."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"--name must be a non-blank name, got {name!r}")
    bad = [c for c in name if unicodedata.category(c).startswith(("C", "Z")) and c != " "]
    if bad or "/" in name or "\\" in name or name != name.strip():
        raise ValueError(
            f"--name must be one line of printable characters without '/', '\\' or "
            f"leading/trailing spaces, got {name!r}"
        )
    if len(name) > NAME_MAX:
        raise ValueError(f"--name must be at most {NAME_MAX} characters, got {len(name)}")
    return name


@dataclass(frozen=True, kw_only=True)
class ReleaseAttackConfig:
    """How to attack a release.

    Attributes:
        name: the ``dataset`` column of the rows (names the report's section; one line,
            :func:`check_name`).
        modality: what the records are (images in [0, 1], series in [-1, 1]).
        attacks: the attacks to run (registered names of the sweep's list); None: every one
            the release allows.
        attack_samples: N, the samples behind each score (as a profile's ``attack_samples``).
        seed: the root seed; attacks and the worst case are seeded from it as a cell's are
            from the cell's seed, so a cell exported with its seed gives the cell's rows.
        epsilon, delta: the privacy the user claims for the release (NaN: none stated).
        gen_records: samples the released decoder draws where no samples are given (None:
            half of members plus non-members, which the membership coins do not change).
        device: where the models and attacks run.
        membership_coins: the user states that each record of members + non-members was put
            into the training set by its own fair coin (the premise of the one-run analysis);
            only then, with a claim, is ``epsilon_lower_attack`` computed from each attack's
            scores (Steinke, Nasr and Jagielski 2023; else NaN, with why).
        classifier_epochs: the utility classifiers' epoch budget where a labelled test set is
            given (:mod:`audit.release.utility`; early stopping on a holdout of their own
            training records).
    """

    name: str = "release"
    modality: Modality = Modality.IMAGE
    attacks: tuple[str, ...] | None = None
    attack_samples: int = 100
    seed: int = 0
    epsilon: float = math.nan
    delta: float = math.nan
    gen_records: int | None = None
    device: str = "cpu"
    membership_coins: bool = False
    classifier_epochs: int = 40

    def __post_init__(self) -> None:
        object.__setattr__(self, "modality", parse_enum(Modality, self.modality, "modality"))
        if self.modality not in (Modality.IMAGE, Modality.SERIES):
            raise ValueError(f"modality must be image or series, got {self.modality.value!r}")
        check_name(self.name)
        if self.attacks is not None:
            object.__setattr__(self, "attacks", check_requested(list(self.attacks)))
        check_seed(self.seed)
        check_positive_ints(
            attack_samples=self.attack_samples, classifier_epochs=self.classifier_epochs
        )
        for name in ("attack_samples", "classifier_epochs"):
            check_at_most(name, getattr(self, name), SIZE_LIMITS[name], SIZE_LIMIT_REASON)
        if self.gen_records is not None and self.gen_records < 1:
            raise ValueError(f"gen_records must be a positive integer, got {self.gen_records!r}")
        _check_claim(self.epsilon, self.delta)

    @property
    def value_range(self) -> tuple[float, float]:
        return SERIES_RANGE if self.modality is Modality.SERIES else (0.0, 1.0)


def _check_claim(epsilon: float, delta: float) -> None:
    if math.isnan(epsilon) != math.isnan(delta):
        raise ValueError(
            f"--epsilon and --delta go together, got epsilon {epsilon} and delta {delta}"
        )
    if not math.isnan(epsilon) and not (epsilon > 0 and math.isfinite(epsilon) and 0 <= delta < 1):
        raise ValueError(
            f"the claim needs a finite epsilon > 0 and 0 <= delta < 1, got epsilon {epsilon} "
            f"and delta {delta}"
        )
