"""What a record is: its modality, read from its shape."""

from __future__ import annotations

from enum import Enum


class Modality(str, Enum):
    """What a record is: an image (C, H, W), a multichannel sensor series (T, F), or a point
    (D,) in a low-dimensional space (PriVAE's pinwheel)."""

    IMAGE = "image"
    SERIES = "series"
    POINTS = "points"


RECORD_DIMS = {Modality.IMAGE: 3, Modality.SERIES: 2, Modality.POINTS: 1}


def record_modality(shape: tuple[int, ...]) -> Modality:
    """The modality of records of ``shape``: (C, H, W) is an image, (T, F) a series, (D,) a
    point."""
    for modality, dims in RECORD_DIMS.items():
        if len(shape) == dims:
            return modality
    raise ValueError(
        f"records of shape {tuple(shape)} are neither images (C, H, W), series (T, F) nor "
        "points (D,)"
    )
