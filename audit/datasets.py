"""Dataset registry, loaders and the seeded stratified split of paper 003 (Figure 1).

Image loaders return float32 images (N, C, H, W) in [0, 1]; series loaders (``motionsense``,
``basicmotions``; see :mod:`audit.motionsense`, :mod:`audit.basicmotions`) float32 series
(N, T, F) in sensor units with fixed per-channel ranges, clipped and scaled to [-1, 1] per
record (:mod:`audit.series`). An ``.npz`` holds images only. Labels are int64 (N,).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from audit.series import ChannelScaler
from core.records import Modality
from core.seeding import Purpose, derive_seed

log = logging.getLogger(__name__)

NPZ_PREFIX = "npz:"


class DatasetUnavailable(ValueError):
    """The data cannot be loaded here (not downloaded, unreachable, malformed)."""


@dataclass(frozen=True)
class Dataset:
    """A labelled dataset of images or sensor series; ``y``: int64 (N,).

    ``x`` is float32: images (N, C, H, W) in [0, 1], or series (N, T, F). A series is either in
    [-1, 1] already, or in sensor units with ``channel_ranges``: fixed per-channel ranges that
    do not depend on the records (:class:`audit.series.ChannelScaler`); the pipeline clips every
    value into its channel's range and maps it to [-1, 1].

    ``content_hash`` (computed here, once per load): SHA-256 of the arrays as loaded (dtype,
    shape and bytes of ``x`` and ``y``) and the class names. It goes into every cell's config and
    every cache key, so replaced data (a new .npz under the same path, other LFW or MotionSense
    files) never reuses results of the old.
    """

    name: str
    x: np.ndarray
    y: np.ndarray
    class_names: tuple[str, ...]
    split_fractions: tuple[float, float, float] = (0.5, 0.2, 0.3)
    modality: Modality = Modality.IMAGE
    channel_ranges: ChannelScaler | None = None
    content_hash: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            modality = Modality(self.modality)
        except ValueError:
            allowed = ", ".join(m.value for m in Modality)
            raise DatasetUnavailable(
                f"dataset {self.name!r}: unknown modality {self.modality!r}; "
                f"choose one of: {allowed}"
            ) from None
        object.__setattr__(self, "modality", modality)
        if modality is Modality.IMAGE:
            self._check_images()
        else:
            self._check_series()
        if len(self.x) != len(self.y):
            raise DatasetUnavailable(
                f"dataset {self.name!r}: {len(self.x)} records but {len(self.y)} labels"
            )
        if self.y.min() < 0 or self.y.max() >= len(self.class_names):
            raise DatasetUnavailable(
                f"dataset {self.name!r}: labels must be 0..{len(self.class_names) - 1}"
            )
        object.__setattr__(self, "content_hash", content_hash(self.x, self.y, self.class_names))

    def _check_images(self) -> None:
        if self.x.ndim != 4:
            raise DatasetUnavailable(
                f"dataset {self.name!r}: images must be (N, C, H, W), got shape {self.x.shape}"
            )
        if self.channel_ranges is not None:
            raise DatasetUnavailable(f"dataset {self.name!r}: channel_ranges apply to series")
        if not np.isfinite(self.x).all():
            raise DatasetUnavailable(f"dataset {self.name!r}: images contain NaN or infinity")
        if self.x.min() < 0 or self.x.max() > 1:
            raise DatasetUnavailable(
                f"dataset {self.name!r}: pixel values must lie in [0, 1], "
                f"got [{self.x.min():.3g}, {self.x.max():.3g}]"
            )

    def _check_series(self) -> None:
        if self.x.ndim != 3 or min(self.x.shape[1:]) < 1:
            raise DatasetUnavailable(
                f"dataset {self.name!r}: series must be (N, T, F), got shape {self.x.shape}"
            )
        if not np.isfinite(self.x).all():
            raise DatasetUnavailable(f"dataset {self.name!r}: series contain NaN or infinity")
        ranges = self.channel_ranges
        if ranges is None and (self.x.min() < -1 or self.x.max() > 1):
            raise DatasetUnavailable(
                f"dataset {self.name!r}: series values must lie in [-1, 1] (or come with fixed "
                f"channel_ranges), got [{self.x.min():.3g}, {self.x.max():.3g}]"
            )
        if ranges is not None and len(ranges.lower) != self.x.shape[2]:
            raise DatasetUnavailable(
                f"dataset {self.name!r}: {len(ranges.lower)} channel ranges for "
                f"{self.x.shape[2]} channels"
            )

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def shape(self) -> tuple[int, ...]:
        """One record's shape: (C, H, W) or (T, F)."""
        return tuple(self.x.shape[1:])


def content_hash(x: np.ndarray, y: np.ndarray, class_names: tuple[str, ...] = ()) -> str:
    """SHA-256 (hex) of arrays' dtypes, shapes and C-order bytes, and of the class names."""
    digest = hashlib.sha256()
    for array in (x, y):
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(memoryview(array).cast("B"))
    digest.update(json.dumps(list(class_names)).encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class Split:
    """Index arrays into a Dataset for D_train, D_val and D_test (disjoint, stratified)."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    sizes: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "sizes", {"train": len(self.train), "val": len(self.val), "test": len(self.test)}
        )


def min_records_per_class(fractions: tuple[float, float, float]) -> int:
    """The fewest records a class needs for :func:`stratified_split` with ``fractions``.

    A class needs at least one record in D_train (``c * f_train >= 1``) and at least two in the
    remainder that is split, stratified again, into D_val and D_test
    (``c * (f_val + f_test) >= 2``): 4 for paper 003's 50/20/30 split, 10 for 10/10/80.
    """
    train, val, test = fractions
    need = max(2.0, 1 / train, 2 / (val + test))
    return math.ceil(round(need, 9))


def check_class_counts(
    y: np.ndarray,
    *,
    fractions: tuple[float, float, float],
    class_names: tuple[str, ...] | None = None,
    source: str = "dataset",
) -> None:
    """Refuse labels the stratified split cannot handle: fewer than two classes, or a class
    with fewer than :func:`min_records_per_class` records; the error names the class."""
    labels, counts = np.unique(y, return_counts=True)

    def name(label: int) -> str:
        return repr(class_names[label]) if class_names is not None else repr(int(label))

    if len(labels) < 2:
        held = name(labels[0]) if len(labels) else "none"
        raise DatasetUnavailable(
            f"{source}: y holds {len(labels)} class(es) ({held}); the utility classifier and "
            "the split need at least 2 classes"
        )
    n_train = math.floor(fractions[0] * len(y))
    n_val = math.floor((len(y) - n_train) * fractions[1] / (fractions[1] + fractions[2]))
    sizes = {"D_train": n_train, "D_val": n_val, "D_test": len(y) - n_train - n_val}
    small = {k: v for k, v in sizes.items() if v < len(labels)}
    if small:
        part, size = next(iter(small.items()))
        raise DatasetUnavailable(
            f"{source}: {len(y)} records are too few for {len(labels)} classes: {part} would "
            f"hold {size} record(s), fewer than the classes the stratified split must put in it"
        )
    need = min_records_per_class(fractions)
    low = int(np.argmin(counts))
    if counts[low] < need:
        shares = "/".join(f"{round(100 * f)}" for f in fractions)
        raise DatasetUnavailable(
            f"{source}: class {name(labels[low])} has {counts[low]} record(s); the stratified "
            f"{shares} split needs at least {need} per class (one in D_train, two to split "
            "into D_val and D_test)"
        )


def stratified_split(
    y: np.ndarray,
    *,
    fractions: tuple[float, float, float],
    seed: int,
    class_names: tuple[str, ...] | None = None,
) -> Split:
    """Seeded stratified split into train/val/test with the given fractions (summing to 1).

    Raises ValueError, naming the class, where a class has too few records for the split
    (:func:`check_class_counts`).
    """
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or not math.isclose(sum(fractions), 1):
        raise ValueError(
            f"split fractions must be three positive numbers summing to 1, got {fractions}"
        )
    check_class_counts(y, fractions=fractions, class_names=class_names)
    idx = np.arange(len(y))
    split_seed = derive_seed(seed, Purpose.SPLIT) % (2**32)
    train, rest = train_test_split(
        idx, train_size=fractions[0], stratify=y, random_state=split_seed
    )
    val_share = fractions[1] / (fractions[1] + fractions[2])
    val, test = train_test_split(
        rest, train_size=val_share, stratify=y[rest], random_state=split_seed + 1
    )
    return Split(train=np.sort(train), val=np.sort(val), test=np.sort(test))


def _to_float_images(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def load_digits_dataset(data_home: Path | None = None) -> Dataset:
    """scikit-learn's 1797 8x8 digits (16 grey levels), scaled to [0, 1]."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = _to_float_images(bunch.images[:, None] / 16.0)
    names = tuple(str(n) for n in bunch.target_names)
    return Dataset("digits", x, bunch.target.astype(np.int64), names)


def load_lfw_subset(data_home: Path | None = None) -> Dataset:
    """scikit-image's 200 25x25 LFW crops: the first 100 are faces, the rest non-faces."""
    from skimage import data

    images = data.lfw_subset()
    x = _to_float_images(images[:, None])
    if x.max() > 1:
        x = x / 255.0
    y = np.repeat(np.array([1, 0], dtype=np.int64), 100)
    return Dataset("lfw-subset", x, y, ("non-face", "face"))


def _lfw_offline_error(name: str, data_home: Path | None, reason: str) -> DatasetUnavailable:
    where = (
        str(data_home) if data_home else "scikit-learn's default data home (~/scikit_learn_data)"
    )
    return DatasetUnavailable(
        f"dataset {name!r} needs LFW, which is not in {where} and could not be downloaded "
        f"({reason}); fetch it where the internet is reachable with "
        f"sklearn.datasets.fetch_lfw_people(data_home=DIR) and pass --data-home DIR, "
        f"or use an embedded dataset (digits, lfw-subset)"
    )


def _lfw_top_identities(name: str, k: int, data_home: Path | None, side: int = 64) -> Dataset:
    """The k LFW identities with the most images, RGB, resized to side x side.

    Notes: loaded through ``fetch_lfw_people`` (funneled, its default face crop 125x94), so the
    layout is scikit-learn's ``lfw_home/lfw_funneled/<Name>/<Name>_NNNN.jpg``. Ties in image count
    at the k-th identity are broken by name.
    """
    from skimage.transform import resize
    from sklearn.datasets import fetch_lfw_people, get_data_home

    folder = Path(get_data_home(data_home)) / "lfw_home" / "lfw_funneled"
    if not folder.is_dir():
        try:  # download once; the impossible filter keeps the load itself empty
            fetch_lfw_people(data_home=data_home, min_faces_per_person=10**9, n_retries=1)
        except ValueError:
            pass  # "min_faces_per_person is too restrictive": the download itself succeeded
        except OSError as exc:  # URLError is an OSError
            raise _lfw_offline_error(name, data_home, type(exc).__name__) from None
    if not folder.is_dir():
        raise _lfw_offline_error(name, data_home, f"{folder} is missing")
    counts = {p.name: sum(1 for _ in p.glob("*.jpg")) for p in folder.iterdir() if p.is_dir()}
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(ranked) < k:
        raise DatasetUnavailable(
            f"dataset {name!r} needs {k} identities but {folder} holds {len(ranked)}"
        )
    chosen = {n.replace("_", " ") for n, _ in ranked[:k]}
    try:
        bunch = fetch_lfw_people(
            data_home=data_home,
            min_faces_per_person=ranked[k - 1][1],
            color=True,
            resize=1.0,
            download_if_missing=False,
        )
    except OSError as exc:
        raise _lfw_offline_error(name, data_home, str(exc)) from None
    keep_names = [n for n in bunch.target_names if n in chosen]
    remap = {
        old: new
        for new, old in enumerate(i for i, n in enumerate(bunch.target_names) if n in chosen)
    }
    mask = np.isin(bunch.target, list(remap))
    images = bunch.images[mask]
    images = images / 255.0 if images.max() > 1 else images
    x = np.stack([resize(im, (side, side), anti_aliasing=True) for im in images])
    x = _to_float_images(np.clip(x, 0, 1).transpose(0, 3, 1, 2))
    y = np.array([remap[t] for t in bunch.target[mask]], dtype=np.int64)
    return Dataset(name, x, y, tuple(keep_names))


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
    except (OSError, ValueError, EOFError) as exc:  # zipfile.BadZipFile is an OSError here too
        raise DatasetUnavailable(
            f"{where} is not a readable .npz archive of arrays X and y "
            f"({type(exc).__name__}); write it with numpy.savez(path, X=..., y=...)"
        ) from None
    x = npz_pixels(_npz_images(x, where), where)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise DatasetUnavailable(
            f"{where}: y must be a 1-D integer array, got {y.dtype} of shape {y.shape}"
        )
    if len(y) != len(x):
        raise DatasetUnavailable(f"{where}: X holds {len(x)} records but y {len(y)} labels")
    classes, y = np.unique(y, return_inverse=True)
    names = tuple(str(c) for c in classes)
    check_class_counts(y, fractions=(0.5, 0.2, 0.3), class_names=names, source=where)
    return Dataset(f"npz:{path.name}", x, y.astype(np.int64), names)


def _npz_images(x: np.ndarray, where: str) -> np.ndarray:
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
        return _to_float_images(x)
    if np.issubdtype(x.dtype, np.integer) and not np.issubdtype(x.dtype, np.bool_):
        low, high = int(x.min()), int(x.max())
        if low < 0 or high > 255 or high <= 1:
            raise DatasetUnavailable(
                f"{where}: integer X has min {low} and max {high}; {NPZ_PIXEL_RULE} "
                "(binary 0/1 images: store them as floats)"
            )
        return _to_float_images(x / 255.0)
    raise DatasetUnavailable(f"{where}: X has dtype {x.dtype}; {NPZ_PIXEL_RULE}")


def load_motionsense(data_home: Path | None = None, *, window_stride: int | None = None) -> Dataset:
    """MotionSense device-motion windows (10 s at 50 Hz, a new one every ``window_stride``
    samples; default 500, non-overlapping) from ``--data-home``, downloaded there if absent."""
    from audit.motionsense import load_motionsense as load

    return load(data_home, stride=window_stride)


def load_basicmotions(data_home: Path | None = None) -> Dataset:
    """BasicMotions (80 real smartwatch series) from an installed sktime or aeon package."""
    from audit.basicmotions import load_basicmotions as load

    return load(data_home)


LOADERS: dict[str, Callable[[Path | None], Dataset]] = {
    "digits": load_digits_dataset,
    "lfw-subset": load_lfw_subset,
    "lfw20": lambda home: _lfw_top_identities("lfw20", 20, home),
    "lfw50": lambda home: _lfw_top_identities("lfw50", 50, home),
    "motionsense": load_motionsense,
    "basicmotions": load_basicmotions,
}
SERIES_DATASETS = frozenset({"motionsense", "basicmotions"})
#: Datasets cut into windows from longer recordings, and their default window stride (samples).
WINDOWED_DATASETS: dict[str, int] = {"motionsense": 500}
WINDOWED_LOADERS: dict[str, Callable[..., Dataset]] = {"motionsense": load_motionsense}


def dataset_names() -> list[str]:
    return [*LOADERS, "npz:PATH"]


def check_dataset_name(name: str) -> str:
    """Validate a dataset name without loading it; returns the name."""
    if name in LOADERS or (name.startswith(NPZ_PREFIX) and len(name) > len(NPZ_PREFIX)):
        return name
    raise ValueError(f"unknown dataset {name!r}; choose one of: {', '.join(dataset_names())}")


def dataset_modality(name: str) -> Modality:
    """The modality of a dataset's records, known from its name without loading it."""
    check_dataset_name(name)
    return Modality.SERIES if name in SERIES_DATASETS else Modality.IMAGE


def resolve_window_stride(name: str, stride: int | None) -> int | None:
    """The window stride a dataset is loaded with: ``stride`` or the dataset's default for a
    windowed dataset (:data:`WINDOWED_DATASETS`), None for the others.

    Raises ValueError for a stride that is not a positive integer, or one given for a dataset
    whose records are not cut into windows.
    """
    check_dataset_name(name)
    if stride is None:
        return WINDOWED_DATASETS.get(name)
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise ValueError(f"window stride must be a positive integer, got {stride!r}")
    if name not in WINDOWED_DATASETS:
        raise ValueError(
            f"--window-stride applies to datasets cut into windows "
            f"({', '.join(WINDOWED_DATASETS)}), not to {name!r}"
        )
    return stride


def load_dataset(
    name: str, *, data_home: Path | None = None, window_stride: int | None = None
) -> Dataset:
    """Load a dataset by registry name (see :data:`LOADERS`, or ``npz:PATH``).

    ``window_stride``: for a windowed dataset (:data:`WINDOWED_DATASETS`), the step between the
    starts of consecutive windows of one recording (default: the dataset's); refused otherwise.
    """
    stride = resolve_window_stride(name, window_stride)
    if name.startswith(NPZ_PREFIX):
        return load_npz(Path(name[len(NPZ_PREFIX) :]))
    log.info("loading dataset %s", name)
    if stride is not None:
        return WINDOWED_LOADERS[name](data_home, window_stride=stride)
    return LOADERS[name](data_home)
