"""The distances of the reconstruction attack behind one registry: the :class:`Distance` enum,
lookup by name, and the distances that apply to each record modality."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum

import numpy as np
import torch

from attacks.distances.squared_error import mse, mse_to_records
from attacks.distances.ssim_window import check_images
from attacks.distances.structural_similarity import ssim, ssim_to_records
from dpvae_core.records import Modality

DistanceFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class Distance(Enum):
    """Reconstruction distances of the reconstruction attack (the trade-off paper, Section 2.2)."""

    MSE = "mse"
    SSIM = "ssim"

    def pairwise(self, recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-pair values (K,) float64 for (K, *shape) inputs; see :func:`mse`, :func:`ssim`."""
        return _PAIRWISE[self](recon, target)

    def to_records(self, recon: torch.Tensor, records: torch.Tensor) -> torch.Tensor:
        """Values (R, S) float64 of S reconstructions (R, S, *shape) of each record (R, *shape).

        See :func:`mse_to_records`,
        :func:`ssim_to_records`.
        """
        return _TO_RECORDS[self](recon, records)

    def check_records(self, records: torch.Tensor) -> None:
        """Raise ValueError early if records (n, *shape) cannot be compared with this distance."""
        if self is Distance.SSIM:
            check_images(records)

    @property
    def higher_is_closer(self) -> bool:
        """True for similarities (SSIM), False for distances (MSE)."""
        return self is Distance.SSIM

    def score(self, mean_values: np.ndarray) -> np.ndarray:
        """Membership scores from per-record mean values: higher = more likely a member.

        The trade-off paper, Eq. 1: score = -mean MSE, or mean SSIM.
        """
        values = np.asarray(mean_values, dtype=np.float64)
        return values if self.higher_is_closer else -values


_PAIRWISE: dict[Distance, DistanceFn] = {Distance.MSE: mse, Distance.SSIM: ssim}


_TO_RECORDS: dict[Distance, DistanceFn] = {
    Distance.MSE: mse_to_records,
    Distance.SSIM: ssim_to_records,
}


def available_distances() -> list[str]:
    """Names accepted by :func:`get_distance`."""
    return [distance.value for distance in Distance]


def get_distance(name: str | Distance) -> Distance:
    """Look up a distance by name (``"mse"``, ``"ssim"``); a :class:`Distance` passes through."""
    if isinstance(name, Distance):
        return name
    try:
        return Distance(name)
    except ValueError:
        raise ValueError(
            f"unknown distance {name!r}; valid distances: {', '.join(available_distances())}"
        ) from None


#: The distances the reconstruction attack uses per record modality: SSIM is an image measure
#: (the trade-off paper uses MSE and SSIM on images, MSE on sensor series; points take MSE).
MODALITY_DISTANCES: dict[Modality, tuple[Distance, ...]] = {
    Modality.IMAGE: (Distance.MSE, Distance.SSIM),
    Modality.SERIES: (Distance.MSE,),
    Modality.POINTS: (Distance.MSE,),
}


def distances_for(
    modality: Modality, requested: Sequence[Distance | str] | None = None
) -> tuple[Distance, ...]:
    """The distances for records of ``modality``: ``requested`` (validated) or all that apply."""
    allowed = MODALITY_DISTANCES[Modality(modality)]
    if requested is None:
        return allowed
    chosen = tuple(get_distance(d) for d in requested)
    refused = [d.value for d in chosen if d not in allowed]
    if refused:
        raise ValueError(
            f"distance(s) {refused} do not apply to {Modality(modality).value} records; "
            f"choose from: {', '.join(d.value for d in allowed)}"
        )
    return chosen
