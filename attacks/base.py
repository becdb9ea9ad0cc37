"""The attack interface: the model it attacks, its input data, its result, and the abstract attack.

Data flows through typed objects: :class:`AttackData` (records and membership labels) ->
:meth:`Attack.run` -> one :class:`AttackResult` per distance (raw scores kept) ->
:class:`~attacks.metrics.AttackMetrics` -> a flat row for the results table.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np
import torch

from attacks.distances import Distance
from attacks.metrics import AttackMetrics, PrecisionRecallCurve, RocCurve
from attacks.metrics import precision_recall_curve as _precision_recall_curve
from attacks.metrics import roc_curve as _roc_curve

ProgressFn = Callable[[int], None]
"""Called after each chunk with the number of records it just finished (an increment, so that
``tqdm(total=n).update`` can be passed as is); the increments sum to n."""


@runtime_checkable
class LatentGenerativeModel(Protocol):
    """A conditional latent-variable generative model, as the attacks see it (e.g. a VAE).

    ``torch.nn.Module`` subclasses provide ``training`` and ``train``; the attacks switch the
    model to eval mode while they run and restore its mode afterwards.
    """

    training: bool

    def train(self, mode: bool = True) -> object:
        """Set training mode (``nn.Module.train``)."""
        ...

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mu, logvar) of q(z | x, y), each (B, latent_dim), for x (B, *shape) and y (B,)."""
        ...

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Reconstructions (B, *shape) from latents z (B, latent_dim) and labels y (B,) int64."""
        ...


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
    """The attack set D_atk: members (from D_train) and non-members (from D_test), unperturbed.

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
                "the attack set needs at least one member and one non-member, got "
                f"{n_members} members and {n_records - n_members} non-members"
            )
        if not bool(torch.isfinite(self.x).all()):
            n_bad = int((~torch.isfinite(self.x)).sum())
            raise ValueError(f"x must be finite, got {n_bad} NaN or infinite values")

    @property
    def n_records(self) -> int:
        """Number of records n (members plus non-members)."""
        return int(self.x.shape[0])


@dataclass(frozen=True)
class AttackResult:
    """Raw scores of one attack with one distance; metrics and curves derive from them.

    Attributes:
        attack: the attack's registry name, e.g. ``"reconstruction"``.
        distance: the distance the scores were computed with.
        scores: (n,) float64 membership scores, higher = more likely a member.
        is_member: (n,) boolean ground truth, aligned with ``scores``.
        n_samples: latent samples per record (N in paper 003, Eq. 1).
    """

    attack: str
    distance: Distance
    scores: np.ndarray
    is_member: np.ndarray
    n_samples: int

    def __post_init__(self) -> None:
        if not isinstance(self.scores, np.ndarray) or self.scores.ndim != 1:
            raise ValueError(f"scores must be a 1-D numpy array, got {type(self.scores).__name__}")
        _check_membership(self.is_member, self.scores.shape[0])
        if not isinstance(self.distance, Distance):
            raise ValueError(f"distance must be a Distance, got {self.distance!r}")
        if self.n_samples < 1:
            raise ValueError(f"n_samples must be at least 1, got {self.n_samples!r}")

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
        """A flat dict for the results table: attack, distance, sizes, and the metrics."""
        return {
            "attack": self.attack,
            "distance": self.distance.value,
            "attack_samples": self.n_samples,
            "attack_members": int(self.is_member.sum()),
            "attack_nonmembers": int((~self.is_member).sum()),
            **self.metrics().to_dict(),
        }


class Attack(ABC):
    """A membership-inference attack against a :class:`LatentGenerativeModel`."""

    name: ClassVar[str]
    """Registry name (see :mod:`attacks.registry`)."""

    @abstractmethod
    def run(
        self,
        model: LatentGenerativeModel,
        data: AttackData,
        *,
        progress: ProgressFn | None = None,
    ) -> dict[Distance, AttackResult]:
        """Score every record of ``data``; one result per distance, scores aligned with data."""
