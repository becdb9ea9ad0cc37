"""Reconstruction distances (MSE, SSIM) for the reconstruction attack, behind one registry.

Two layouts share one implementation per distance:

* pairwise: reconstructions ``recon`` and targets ``target``, both (K, *shape) -> (K,);
* to records: S reconstructions of each of R records, ``recon`` (R, S, *shape) and the records
  (R, *shape) -> (R, S). The attack's layout: a record's statistics are computed once for its S
  samples instead of once per pair, and the records are never repeated in memory.

Values are float64 tensors on the inputs' device. A :class:`Distance` also knows its orientation:
:meth:`Distance.score` turns mean distances into membership scores where higher means "more likely
a member" (the trade-off paper, Eq. 1: -mean MSE, or mean SSIM).

Modules: :mod:`~attacks.distances.distance` (the registry), :mod:`~attacks.distances.squared_error`
(MSE), :mod:`~attacks.distances.structural_similarity` (SSIM, choosing a path),
:mod:`~attacks.distances.ssim_numba` (the compiled CPU kernel), :mod:`~attacks.distances.ssim_torch`
(float64 torch operations), :mod:`~attacks.distances.ssim_window` (SSIM's constants) and
:mod:`~attacks.distances.batching` (shape checks, blocks, CPU threads). Tuning constants are read
from the module that defines them; set them there.
"""

from attacks.distances.distance import (
    MODALITY_DISTANCES,
    Distance,
    DistanceFn,
    available_distances,
    distances_for,
    get_distance,
)
from attacks.distances.squared_error import mse, mse_to_records
from attacks.distances.structural_similarity import ssim, ssim_to_records

__all__ = [
    "MODALITY_DISTANCES",
    "Distance",
    "DistanceFn",
    "available_distances",
    "distances_for",
    "get_distance",
    "mse",
    "mse_to_records",
    "ssim",
    "ssim_to_records",
]
