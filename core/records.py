"""What a record is: its modality, read from its shape."""

from __future__ import annotations

from enum import Enum


class Modality(str, Enum):
    """What a record is: an image (C, H, W) or a multichannel sensor series (T, F)."""

    IMAGE = "image"
    SERIES = "series"


RECORD_DIMS = {Modality.IMAGE: 3, Modality.SERIES: 2}


def record_modality(shape: tuple[int, ...]) -> Modality:
    """The modality of records of ``shape``: (C, H, W) is an image, (T, F) a series."""
    for modality, dims in RECORD_DIMS.items():
        if len(shape) == dims:
            return modality
    raise ValueError(
        f"records of shape {tuple(shape)} are neither images (C, H, W) nor series (T, F)"
    )
