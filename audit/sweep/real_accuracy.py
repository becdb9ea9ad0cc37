"""The classifier's accuracy on real data (``acc_real``), computed once per (dataset, seed) and
cached."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from audit import io
from audit.cell.gen_accuracy import classifier_accuracy, classifier_settings
from audit.config import CellConfig
from audit.datasets import Dataset
from audit.mechanisms import CellData, Context
from audit.results import file_problem
from dpvae_core.digests import short_digest

log = logging.getLogger(__name__)


def _acc_real_key(dataset: Dataset, cell: CellConfig, device: str) -> str:
    """The cache key of the real-data classifier's accuracy: the data's content, the seed, the
    training-set cap, the classifier's settings and (windowed data) the stride."""
    settings = classifier_settings(cell, device, "real")
    stride = cell.option("window_stride")  # other windows are other records
    extra = [] if stride is None else [["window_stride", stride]]
    content = ["data_sha256", dataset.content_hash]  # the data's content, not its name
    p = cell.profile
    if p.balanced_train or p.classifier is not None:  # unset: the key older caches had
        extra.append(["balanced_train", p.balanced_train, "classifier", p.classifier])
    if settings.precision != "float32":  # not in the settings' repr
        extra.append(["precision", settings.precision])
    return json.dumps([dataset.name, content, cell.seed, p.max_train, repr(settings), *extra])


def _acc_real_path(out: Path, key: str) -> Path:
    return out / "cache" / f"acc_real-{short_digest(key)}.json"


def _cached_acc_real(out: Path, key: str) -> float | None:
    """The cached accuracy of ``key``; None (computed again) where there is none, or where the
    file does not match the digest ``run.json`` recorded of it (with a warning naming it)."""
    path = _acc_real_path(out, key)
    if not path.exists():
        return None
    problem = file_problem(out, path)
    if problem is not None:
        log.warning("computing the cached acc_real again: %s", problem)
        return None
    try:
        return float(io.read_json(path)["acc_real"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("recomputing damaged cache file %s (%s)", path, exc)
        return None


def _compute_acc_real(data: CellData, cell: CellConfig, ctx: Context) -> float:
    """Classifier trained on real D_train (early stop on D_val), tested on D_test."""
    return classifier_accuracy(
        data.train,
        data.val,
        data.test,
        num_classes=data.num_classes,
        settings=classifier_settings(cell, ctx.device, "real"),
        ctx=ctx,
        desc="classifier on real D_train",
        kind=cell.profile.classifier,
    )
