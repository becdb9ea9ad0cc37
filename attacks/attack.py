"""The attack interface: the model it attacks, its input data, its result, and the abstract attack.

Data flows through typed objects: a :class:`~attacks.threat.Release` (what the attacker holds) and
:class:`AttackData` (records and membership labels) -> :meth:`Attack.run_release` -> one
:class:`AttackResult` per (distance, variant), raw scores kept ->
:class:`~attacks.metrics.AttackMetrics` -> a flat row for the results table.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from enum import Enum
from typing import ClassVar, NamedTuple

import numpy as np
import torch

from attacks.distances import Distance
from attacks.metrics import AttackMetrics, PrecisionRecallCurve, RocCurve
from attacks.metrics import precision_recall_curve as _precision_recall_curve
from attacks.metrics import roc_curve as _roc_curve
from attacks.threat import Capability, Release, require
from dpvae_core.records import Modality

log = logging.getLogger(__name__)

ProgressFn = Callable[[int], None]
"""Called after each chunk with the number of records it just finished (an increment, so that
``tqdm(total=n).update`` can be passed as is); the increments sum to n."""


def _check_membership(is_member: np.ndarray, n_records: int) -> None:
    if not isinstance(is_member, np.ndarray) or is_member.dtype != np.bool_:
        raise ValueError(
            f"is_member must be a boolean numpy array, got {type(is_member).__name__} "
            f"of dtype {getattr(is_member, 'dtype', None)}"
        )
    if is_member.shape != (n_records,):
        raise ValueError(
            f"is_member must have shape ({n_records},) to match the records, got {is_member.shape}"
        )


@dataclass(frozen=True)
class AttackData:
    """D_atk, the attacked records: members (from D_train) and non-members (from D_test),
    unperturbed.

    Attributes:
        x: (n, *shape) floating records: images (n, C, H, W) in [0, 1] or series (n, T, F).
        y: (n,) int64 labels.
        is_member: (n,) boolean numpy array, True for training records.
    """

    x: torch.Tensor
    y: torch.Tensor
    is_member: np.ndarray

    def __post_init__(self) -> None:
        if self.x.dim() < 2 or not self.x.is_floating_point():
            raise ValueError(
                f"x must be a floating tensor (n, *shape), got dtype {self.x.dtype} "
                f"and shape {tuple(self.x.shape)}"
            )
        n_records = self.x.shape[0]
        if self.y.shape != (n_records,) or self.y.dtype != torch.int64:
            raise ValueError(
                f"y must be an int64 tensor of shape ({n_records},) to match x, got dtype "
                f"{self.y.dtype} and shape {tuple(self.y.shape)}"
            )
        _check_membership(self.is_member, n_records)
        n_members = int(self.is_member.sum())
        if n_members in (0, n_records):
            raise ValueError(
                "D_atk needs at least one member and one non-member, got "
                f"{n_members} members and {n_records - n_members} non-members"
            )
        if not bool(torch.isfinite(self.x).all()):
            n_bad = int((~torch.isfinite(self.x)).sum())
            raise ValueError(f"x must be finite, got {n_bad} NaN or infinite values")

    @property
    def n_records(self) -> int:
        """Number of records n (members plus non-members)."""
        return int(self.x.shape[0])


class Measure(Enum):
    """What an attack other than reconstruction compares (the row's ``distance`` column).

    The reconstruction and latent-search attacks use :class:`~attacks.distances.Distance`.
    """

    PIXEL_L2 = "pixel-l2"
    """Euclidean distance between records, on raw values (Monte-Carlo)."""
    PCA_L2 = "pca-l2"
    """Euclidean distance in a PCA embedding fitted on the reference records (Monte-Carlo)."""
    PCA_KDE = "pca-kde"
    """Gaussian kernel densities in a PCA embedding fitted on the reference records (DOMIAS)."""
    IWAE_BERNOULLI = "iwae-bernoulli"
    """Importance-weighted log-likelihood bound, Bernoulli decoder (likelihood attack)."""
    IWAE_GAUSSIAN = "iwae-gaussian"
    """Importance-weighted log-likelihood bound, Gaussian decoder (likelihood attack)."""


class Variant(Enum):
    """How an attack turns its measurements into a score (the row's ``variant`` column)."""

    MEAN = "mean"
    """Mean over latent samples (reconstruction, the trade-off paper's Eq. 1)."""
    SHARE = "share"
    """Share of generated samples within the eps-ball (Monte-Carlo)."""
    LOG_DISTANCE = "log-distance"
    """Mean of log(eps / d) over the samples inside the eps-ball (Monte-Carlo)."""
    NEAREST = "nearest"
    """Minus the distance to the nearest generated sample (Monte-Carlo)."""
    RAW = "raw"
    """The attack's statistic under the target model alone."""
    CALIBRATED = "calibrated"
    """Target statistic minus the mean statistic under the reference models (GAN-Leaks; for the
    likelihood attack, offline LiRA with one variance for all records, in ranking)."""
    LIRA = "lira-offline"
    """Offline LiRA: (s - mean_ref) / std_ref, per-record std where there are enough reference
    models (Carlini et al. 2022)."""
    LOG_RATIO = "log-ratio"
    """log p_gen(x) - log p_ref(x) (DOMIAS)."""
    CALIBRATED_NONPRIVATE = "calibrated-nonprivate"
    """``calibrated`` against reference models trained without the target's privacy mechanism
    (:attr:`attacks.threat.Release.nonprivate_reference_models`)."""
    LIRA_NONPRIVATE = "lira-offline-nonprivate"
    """``lira-offline`` against reference models trained without the target's privacy
    mechanism."""


NONPRIVATE_VARIANTS: dict[Variant, Variant] = {
    Variant.CALIBRATED: Variant.CALIBRATED_NONPRIVATE,
    Variant.LIRA: Variant.LIRA_NONPRIVATE,
}
"""A calibrated variant's label when its reference models were trained without the target's
privacy mechanism."""


def calibration_variant(variant: Variant, *, nonprivate: bool) -> Variant:
    """``variant``, or its :data:`NONPRIVATE_VARIANTS` label for a non-private reference set."""
    return NONPRIVATE_VARIANTS[variant] if nonprivate else variant


class ResultKey(NamedTuple):
    """Key of one result of :meth:`Attack.run_release`: what was compared and how it was scored."""

    distance: Distance | Measure
    variant: Variant


@dataclass(frozen=True)
class AttackResult:
    """Raw scores of one attack with one distance; metrics and curves derive from them.

    Attributes:
        attack: the attack's registry name, e.g. ``"reconstruction"``.
        distance: the distance the scores were computed with: a :class:`Distance` for the
            reconstruction and latent-search attacks, a :class:`Measure` for the others.
        scores: (n,) float64 membership scores, higher = more likely a member.
        is_member: (n,) boolean ground truth, aligned with ``scores``.
        n_samples: samples behind each score: latent samples per record (N in the trade-off
            paper's Eq. 1; K importance samples for the likelihood attack), generated records
            (Monte-Carlo, DOMIAS), or prior draws (latent search).
        variant: how the scores were formed (default: the mean over samples, the trade-off paper).
        nonfinite: how many of the attack's raw scores were NaN or infinite before
            :meth:`with_finite_scores` ranked them (0 for an attack on a healthy model).
    """

    attack: str
    distance: Distance | Measure
    scores: np.ndarray
    is_member: np.ndarray
    n_samples: int
    variant: Variant = Variant.MEAN
    nonfinite: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.scores, np.ndarray) or self.scores.ndim != 1:
            raise ValueError(f"scores must be a 1-D numpy array, got {type(self.scores).__name__}")
        _check_membership(self.is_member, self.scores.shape[0])
        if not isinstance(self.distance, (Distance, Measure)):
            raise ValueError(f"distance must be a Distance or a Measure, got {self.distance!r}")
        if not isinstance(self.variant, Variant):
            raise ValueError(f"variant must be a Variant, got {self.variant!r}")
        if self.n_samples < 1:
            raise ValueError(f"n_samples must be at least 1, got {self.n_samples!r}")

    def with_finite_scores(self) -> AttackResult:
        """This result with every score finite, the order of the finite ones kept.

        A diverged model's outputs can be NaN or infinite for some records, and the metrics
        refuse such scores. The attacker's rule here: +inf ranks above every finite score (the
        attack's own order), NaN and -inf tie below every finite score (no evidence of
        membership). Any fixed rule is a valid attack, so the metrics stay those of an attack
        the release allows; ``nonfinite`` counts the records it touched.
        """
        scores = np.asarray(self.scores, dtype=np.float64)
        finite = np.isfinite(scores)
        if finite.all():
            return self
        low, high = (scores[finite].min(), scores[finite].max()) if finite.any() else (0.0, 0.0)
        ranked = np.where(finite, scores, low - 1.0 - abs(low))  # strictly below, at any scale
        ranked[np.isposinf(scores)] = high + 1.0 + abs(high)
        return replace(self, scores=ranked, nonfinite=int((~finite).sum()))

    @property
    def key(self) -> ResultKey:
        """(distance, variant): this result's key among its attack's results."""
        return ResultKey(self.distance, self.variant)

    def metrics(self) -> AttackMetrics:
        """MI AP, ROC AUC and TPR at FPR 1 % / 0.1 % of these scores."""
        return AttackMetrics.from_scores(self.scores, self.is_member)

    def roc_curve(self) -> RocCurve:
        """The ROC curve (members positive)."""
        return _roc_curve(self.scores, self.is_member)

    def precision_recall_curve(self) -> PrecisionRecallCurve:
        """The precision-recall curve (members positive)."""
        return _precision_recall_curve(self.scores, self.is_member)

    def to_row(self) -> dict[str, object]:
        """A flat dict for the results table.

        Keys: ``attack`` (registry name), ``distance`` (a :class:`Distance` or :class:`Measure`
        value, e.g. ``"mse"``, ``"pixel-l2"``), ``variant`` (a :class:`Variant` value, e.g.
        ``"mean"``, ``"share"``, ``"lira-offline"``), ``attack_samples``, ``attack_members``,
        ``attack_nonmembers``, then the :class:`AttackMetrics` fields. A row is identified by
        (attack, distance, variant).
        """
        return {
            "attack": self.attack,
            "distance": self.distance.value,
            "variant": self.variant.value,
            "attack_samples": self.n_samples,
            "attack_members": int(self.is_member.sum()),
            "attack_nonmembers": int((~self.is_member).sum()),
            "attack_nonfinite": self.nonfinite,
            **self.metrics().to_dict(),
        }


@dataclass(frozen=True, kw_only=True)
class AttackSettings:
    """The knobs a benchmark profile sets for every attack; each attack maps them onto its own
    fields (:meth:`Attack.from_settings`) and keeps its defaults for the rest.

    Attributes:
        attack_samples: samples behind each score where an attack draws some (the reconstruction
            attack's N latent samples per record, the trade-off paper's Eq. 1), >= 1.
            The likelihood attack's K importance samples and the latent search's Adam steps
            are mapped from it too, so a profile's N sets every attack's sample budget.
        distances: the reconstruction distances that apply to the records' modality
            (:func:`attacks.distances.distances_for`), non-empty, stored as a tuple.
        modality: what the records are (images in [0, 1], series in [-1, 1]); the likelihood
            attack picks its decoder likelihood from it.
    """

    attack_samples: int
    distances: tuple[Distance, ...]
    modality: Modality = Modality.IMAGE

    def __post_init__(self) -> None:
        check_positive_ints(attack_samples=self.attack_samples)
        object.__setattr__(self, "modality", Modality(self.modality))
        if isinstance(self.distances, (str, Distance)) or not self.distances:
            raise ValueError(f"distances must be a non-empty sequence, got {self.distances!r}")
        object.__setattr__(self, "distances", tuple(Distance(d) for d in self.distances))


class Attack(ABC):
    """A membership-inference attack: what it needs from a release, and how it scores D_atk.

    Subclasses are frozen, keyword-only dataclasses whose fields are the attack's settings
    (``seed``, ``device`` and the attack's own knobs, all but ``seed`` with defaults), validated
    at construction. They declare ``needs`` (capabilities without which the attack cannot run)
    and ``uses`` (optional capabilities that add variants, e.g. calibration with reference models).
    Every registered attack is built the same way from a profile's :class:`AttackSettings`
    (:meth:`from_settings`, :func:`attacks.registry.build_attack`).
    """

    name: ClassVar[str]
    """Registry name (see :mod:`attacks.registry`)."""
    needs: ClassVar[frozenset[Capability]]
    """Capabilities the release must provide (see :mod:`attacks.threat`)."""
    uses: ClassVar[frozenset[Capability]] = frozenset()
    """Capabilities read when present, adding variants; never required."""
    in_sweep: ClassVar[bool] = True
    """Whether the audit's sweeps run it by default (its plan entry): the sweep's attack list is
    every registered attack that sets this, in registration order
    (:func:`attacks.registry.sweep_attacks`)."""

    @classmethod
    def from_settings(
        cls, settings: AttackSettings, *, seed: int, device: torch.device | str
    ) -> Attack:
        """This attack with ``seed`` and ``device``, its fields mapped from ``settings``.

        The default reads none of ``settings`` (the attack's own defaults apply); an attack
        whose fields a profile sets overrides it.
        """
        return cls(seed=seed, device=device)  # type: ignore[call-arg]  # dataclass subclasses

    def run_release(
        self,
        release: Release,
        data: AttackData,
        *,
        progress: ProgressFn | None = None,
    ) -> dict[ResultKey, AttackResult]:
        """Score every record of ``data`` with what ``release`` provides.

        Raises ValueError naming the missing capabilities when the release lacks something in
        ``needs``. Returns one result per (distance, variant), scores aligned with ``data``.
        """
        require(self, release)
        results = [result.with_finite_scores() for result in self._run(release, data, progress)]
        for result in results:
            if result.nonfinite:
                log.warning(
                    "attack %s (%s, %s): %d of %d scores were NaN or infinite (a diverged "
                    "model?); +inf ranks first, the others last",
                    self.name,
                    result.distance.value,
                    result.variant.value,
                    result.nonfinite,
                    result.scores.size,
                )
        return {result.key: result for result in results}

    @abstractmethod
    def _run(
        self, release: Release, data: AttackData, progress: ProgressFn | None
    ) -> list[AttackResult]:
        """The attack proper; ``release`` is known to provide ``needs``."""


def check_seed(seed: object) -> None:
    """Refuse anything but a non-negative int (not a bool) as a seed."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")


def check_positive_ints(**values: object) -> None:
    """Refuse any value that is not a positive int, naming it."""
    for label, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")


@contextmanager
def eval_mode(*modules: object) -> Iterator[None]:
    """Switch modules that have ``train(mode)`` to eval mode, restoring each one's mode after."""
    switched = [(m, m.training) for m in modules if hasattr(m, "train") and hasattr(m, "training")]
    for module, _ in switched:
        module.train(False)
    try:
        yield
    finally:
        for module, mode in switched:
            module.train(mode)
