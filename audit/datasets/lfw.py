"""Labeled Faces in the Wild: scikit-image's embedded 25x25 face/non-face subset
(``lfw-subset``), and the 20 or 50 LFW identities with the most images (``lfw20``, ``lfw50``)
read through scikit-learn's ``fetch_lfw_people``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np

from audit.datasets.dataset import Dataset, DatasetSpec, DatasetUnavailable, to_float_images
from dpvae_core.records import Modality


def load_lfw_subset(data_home: Path | None = None) -> Dataset:
    """scikit-image's 200 25x25 LFW crops: the first 100 are faces, the rest non-faces."""
    from skimage import data

    images = data.lfw_subset()
    x = to_float_images(images[:, None])
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
    with _removed_on_failure(_sklearn_home(data_home) / "lfw_home"):
        return _read_lfw(name, k, data_home, side)


def _sklearn_home(data_home: Path | None) -> Path:
    """The folder scikit-learn keeps its data in (without creating it, as ``get_data_home``
    does)."""
    if data_home is not None:
        return Path(data_home).expanduser()
    return Path(os.environ.get("SCIKIT_LEARN_DATA", Path.home() / "scikit_learn_data"))


@contextmanager
def _removed_on_failure(path: Path) -> Iterator[None]:
    """Within the block, folders made on the way to ``path`` (scikit-learn makes the data home
    and ``lfw_home`` before it downloads) are removed again if the block fails: a refused load
    leaves nothing behind."""
    top = Path(os.path.abspath(path))
    while not top.parent.exists() and top.parent != top:
        top = top.parent
    made = None if top.exists() else top
    try:
        yield
    except BaseException:
        if made is not None and made.exists():
            shutil.rmtree(made, ignore_errors=True)
        raise


def _read_lfw(name: str, k: int, data_home: Path | None, side: int) -> Dataset:
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
    x = to_float_images(np.clip(x, 0, 1).transpose(0, 3, 1, 2))
    y = np.array([remap[t] for t in bunch.target[mask]], dtype=np.int64)
    return Dataset(name, x, y, tuple(keep_names))


#: Training records per identity of LFW20/LFW50 in the quick and standard profiles. Measured on
#: the real LFW20 (mech none, seed 0, 2 CPU cores under load;
#: ``benchmark.py --dataset lfw20 --data-home DIR --mech none --profile P
#: --max-train N``), reconstruction MI AP (mse) / accuracy on D_gen / on real D_train (chance
#: 0.05) / seconds per cell:
#:   standard, 50 records (2.5 per person): 1.000 / 0.28 / 0.28 / 1620 s
#:   standard, 200 (10 per person):          1.000 / 0.41 / 0.36 / 1873 s
#:   quick,    200 (10 per person):          0.874 / 0.32 / 0.28 / 297 s (all five attacks;
#:             held-out worst case 0.858)
#: (0.28 is the majority-class rate of LFW20's D_test, George W Bush's share: a constant
#: classifier scores it.) 10 per person keeps the non-private VAE leaking clearly (worst case
#: >= 0.8); only the standard profile's classifiers beat the majority rate, and the quick
#: profile's learning rate 2e-3 diverged on seed 1 (docs/lfw20-studies.md).
LFW_TRAIN_PER_CLASS = 10

#: The quick profile's settings LFW20 and LFW50 replace. Learning rate: measured on LFW20 (mech
#: none, quick, 200 records, seeds 0 and 1), 2e-3 diverged on seed 1 (loss 8.4e3 to 4e27 at epoch
#: 11, MI AP 0.49); at 1e-3 neither seed diverged (MI AP 0.881 / 0.854). Epochs: at the image
#: quick setting (40) the conditional decoder barely uses the label (pixel variance across labels
#: for a fixed z is 0.155 of that across z), so D_gen's faces carry no identity: the face-embedding
#: classifier trained on them scored 0.29-0.32 on real D_test, the majority rate 0.278. At 120
#: epochs the ratio is 0.254 and that classifier scores 0.678 (seed 0, 1000 generated faces;
#: ``benchmarks/probe_lfw_generation.py``; docs/lfw20-faces.md).
LFW_QUICK_OVERRIDES = (("lr", 1e-3), ("epochs", 120))

#: What every profile of LFW20 and LFW50 sets (issue 27; measured in docs/lfw20-faces.md):
#: D_train capped per person, evenly (``balanced_train``: 10 per person, not 200 records in
#: proportion to the class sizes, which gave George W Bush 56 and six people 4 each), and the
#: face-embedding classifier (:mod:`models.face_embedding`: dlib's frozen face descriptor and a
#: logistic regression; 0.956 on real D_test from the 200 real D_train faces, where a residual
#: net trained from scratch reached 0.33-0.57). Its epochs and patience settings are unused.
LFW_FACE_SETTINGS = (
    ("balanced_train", True),
    ("classifier", "face-embedding"),
)
LFW_PROFILE_OVERRIDES = (
    ("quick", LFW_FACE_SETTINGS + LFW_QUICK_OVERRIDES),
    ("standard", LFW_FACE_SETTINGS),
    ("paper", LFW_FACE_SETTINGS),
)

#: lfw-subset's quick |D_gen| (the profile's is 1000). The utility classifier on D_gen was 70 %
#: of a quick lfw-subset cell (a cProfile of the none cell: 37.6 of 60.3 s in ``run_cell``, one
#: thread), and the embedded dataset's two classes are learnt as well from 200 generated records
#: as from 1000 (``benchmarks/bench_gen_records.py``, table in ``docs/profiles.md``: 0.867 at 200,
#: 0.800 at 1000, n_test = 60, sd about 0.05), so CI's quick sweep draws 200. The samples-only
#: attacks (Monte-Carlo) see those 200.
LFW_SUBSET_OVERRIDES = (("quick", (("gen_records", 200),)),)

LFW_SPECS = (
    DatasetSpec(
        name="lfw-subset",
        modality=Modality.IMAGE,
        loader=load_lfw_subset,
        profile_overrides=LFW_SUBSET_OVERRIDES,
    ),
    DatasetSpec(
        name="lfw20",
        modality=Modality.IMAGE,
        loader=partial(_lfw_top_identities, "lfw20", 20),
        reads_data_home=True,
        train_per_class=LFW_TRAIN_PER_CLASS,
        classes=20,
        profile_overrides=LFW_PROFILE_OVERRIDES,
    ),
    DatasetSpec(
        name="lfw50",
        modality=Modality.IMAGE,
        loader=partial(_lfw_top_identities, "lfw50", 50),
        reads_data_home=True,
        train_per_class=LFW_TRAIN_PER_CLASS,
        classes=50,
        profile_overrides=LFW_PROFILE_OVERRIDES,
    ),
)
