"""User data: an ``.npz`` with images ``X`` and integer labels ``y`` (``--dataset npz:PATH``)."""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import numpy as np

from audit.datasets.dataset import (
    DEFAULT_SPLIT_FRACTIONS,
    Dataset,
    DatasetUnavailable,
    to_float_images,
)
from audit.datasets.split import check_class_counts

#: A dataset name ``npz:PATH`` names the user's file at PATH.
NPZ_PREFIX = "npz:"

#: What reading a damaged .npz raises: a truncated archive ``zipfile.BadZipFile`` (not an OSError)
#: or ``zlib.error``, a file of something else ``ValueError`` (it would need pickle) or ``OSError``.
NPZ_READ_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error)

#: What an .npz's X may hold (see :func:`npz_pixels`).
NPZ_PIXEL_RULE = (
    "X must hold floats in [0, 1] (taken as they are) or integers in [0, 255] with a maximum "
    "above 1 (divided by 255)"
)


def load_npz(path: Path) -> Dataset:
    """User data: an .npz with ``X`` (N, H, W), (N, C, H, W) or (N, H, W, C), C in (1, 3), and
    a 1-D integer ``y`` with at least two classes, each with enough records for the split.

    Pixels (:func:`npz_pixels`): floats must lie in [0, 1]; integers (any integer dtype, e.g.
    uint8) must lie in [0, 255] and are divided by 255. Anything else is refused rather than
    guessed: floats above 1 (0..255 stored as floats: cast to uint8), integers holding only 0
    and 1 (binary images or near-black 0..255 pixels? store floats), values above 255, negative
    values, NaN and infinity.
    """
    path = Path(path)
    where = f"npz dataset {str(path)!r}"
    if path.is_dir():
        raise DatasetUnavailable(f"{where} is a directory; give the .npz file itself")
    if not path.is_file():
        raise DatasetUnavailable(f"{where} does not exist")
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = {"X", "y"} - set(data.files)
            if missing:
                raise DatasetUnavailable(
                    f"{where} lacks array(s) {sorted(missing)}; it must hold X and y"
                )
            x, y = data["X"], data["y"]
    except DatasetUnavailable:
        raise
    except NPZ_READ_ERRORS as exc:
        raise DatasetUnavailable(
            f"{where} is not a readable .npz archive of arrays X and y "
            f"({type(exc).__name__}); write it with numpy.savez(path, X=..., y=...)"
        ) from None
    x = npz_pixels(npz_images(x, where), where)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise DatasetUnavailable(
            f"{where}: y must be a 1-D integer array, got {y.dtype} of shape {y.shape}"
        )
    if len(y) != len(x):
        raise DatasetUnavailable(f"{where}: X holds {len(x)} records but y {len(y)} labels")
    classes, y = np.unique(y, return_inverse=True)
    names = tuple(str(c) for c in classes)
    check_class_counts(y, fractions=DEFAULT_SPLIT_FRACTIONS, class_names=names, source=where)
    return Dataset(f"{NPZ_PREFIX}{path.name}", x, y.astype(np.int64), names)


def npz_images(x: np.ndarray, where: str) -> np.ndarray:
    """X as (N, C, H, W); the error lists the shapes allowed."""
    if x.ndim == 3:
        x = x[:, None]
    elif x.ndim == 4 and x.shape[-1] in (1, 3) and x.shape[1] not in (1, 3):
        x = x.transpose(0, 3, 1, 2)
    if x.ndim != 4 or x.shape[1] not in (1, 3) or min(x.shape) < 1:
        raise DatasetUnavailable(
            f"{where}: X has shape {x.shape}; allowed: (N, H, W), (N, C, H, W) or (N, H, W, C) "
            "with C in (1, 3) and N, H, W >= 1"
        )
    return x


def npz_pixels(x: np.ndarray, where: str) -> np.ndarray:
    """float32 pixels in [0, 1] by :data:`NPZ_PIXEL_RULE`; the error quotes min and max."""
    if np.issubdtype(x.dtype, np.floating):
        if not np.isfinite(x).all():
            raise DatasetUnavailable(f"{where}: X contains NaN or infinity; {NPZ_PIXEL_RULE}")
        low, high = float(x.min()), float(x.max())
        if low < 0 or high > 1:
            raise DatasetUnavailable(
                f"{where}: float X has min {low:.4g} and max {high:.4g}; {NPZ_PIXEL_RULE} "
                "(0..255 pixels stored as floats: cast them to uint8)"
            )
        return to_float_images(x)
    if np.issubdtype(x.dtype, np.integer) and not np.issubdtype(x.dtype, np.bool_):
        low, high = int(x.min()), int(x.max())
        if low < 0 or high > 255 or high <= 1:
            hint = (
                "binary 0/1 images: store them as floats"
                if high <= 1
                else (
                    "more than 8 bits per pixel: scale X to 0..255 (uint8) or to floats in [0, 1]"
                    if low >= 0
                    else "negative pixels: shift and scale X into [0, 1] as floats"
                )
            )
            raise DatasetUnavailable(
                f"{where}: integer X has min {low} and max {high}; {NPZ_PIXEL_RULE} ({hint})"
            )
        return to_float_images(x / 255.0)
    raise DatasetUnavailable(f"{where}: X has dtype {x.dtype}; {NPZ_PIXEL_RULE}")
