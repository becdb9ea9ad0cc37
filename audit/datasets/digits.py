"""scikit-learn's handwritten digits: 1797 8x8 greyscale images of ten classes, embedded in the
package (no download)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from audit.datasets.dataset import Dataset, DatasetSpec, to_float_images
from dpvae_core.records import Modality

NAME = "digits"


def load_digits_dataset(data_home: Path | None = None) -> Dataset:
    """scikit-learn's 1797 8x8 digits (16 grey levels), scaled to [0, 1]."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = to_float_images(bunch.images[:, None] / 16.0)
    names = tuple(str(n) for n in bunch.target_names)
    return Dataset(NAME, x, bunch.target.astype(np.int64), names)


SPEC = DatasetSpec(name=NAME, modality=Modality.IMAGE, loader=load_digits_dataset)
