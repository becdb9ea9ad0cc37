"""D_gen from a cell's target and the accuracy of the classifier trained on it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

import torch

from audit.cell.target import TrainedTarget
from audit.config import CellConfig
from audit.mechanisms import CellData, Context
from dpvae_core.precision import mixed_precision
from dpvae_core.seeding import Purpose, derive_seed
from models.classifier_training import ClassifierSettings, accuracy, holdout_split, train_classifier
from models.face_embedding import FACE_EMBEDDING, embedding_accuracy
from models.factory import CLASSIFIER_RECIPES, model_family
from models.generation import finite_records, gen_labels, generate
from models.training import Pair


@dataclass(frozen=True)
class Generated:
    """D_gen (finite: NaN values zeroed, ``nonfinite`` of them) and the accuracy on real D_test
    of the classifier trained on it."""

    x: torch.Tensor
    y: torch.Tensor
    nonfinite: int
    acc: float


log = logging.getLogger(__name__)


GEN_HOLDOUT = 0.2  # share of D_gen held out for the classifier's early stopping


def classifier_settings(cell: CellConfig, device: str, purpose: str) -> ClassifierSettings:
    """The target classifier's settings: the profile's budget, the kind's recipe, and the
    learning rate and batch size the profile sets (a tuned cell's: :mod:`audit.cell.tuning`)."""
    p = cell.profile
    recipe = dict(CLASSIFIER_RECIPES.get(p.classifier or "", {}))
    if p.classifier_lr is not None:
        recipe["lr"] = p.classifier_lr
    if p.classifier_batch_size is not None:
        recipe["batch_size"] = p.classifier_batch_size
    return ClassifierSettings(
        epochs=p.classifier_epochs,
        patience=p.classifier_patience,
        seed=derive_seed(cell.seed, Purpose.CLASSIFIER, purpose) % 2**31,
        device=device,
        precision=cell.precision,
        **recipe,
    )


def classifier_accuracy(
    train: Pair,
    val: Pair,
    test: Pair,
    *,
    num_classes: int,
    settings: ClassifierSettings,
    ctx: Context,
    desc: str,
    kind: str | None = None,
) -> float:
    """Train the target classifier on ``train`` (early stop on ``val``); accuracy on real ``test``.

    The classifier is the modality's (:func:`models.factory.model_family`): a small CNN for
    images, HAR-CNN for series; ``kind`` names another (the profile's ``classifier``):
    ``face-embedding`` is dlib's frozen face descriptor with a logistic regression chosen on
    ``val`` (:mod:`models.face_embedding`).
    """
    if kind == FACE_EMBEDDING:
        return embedding_accuracy(
            train, val, test, device=settings.device, precision=settings.precision
        )
    family = model_family(train[0].shape[1:], num_classes)
    model = train_classifier(
        partial(family.classifier, kind), train, val, settings, progress=ctx.progress, desc=desc
    )
    with mixed_precision(settings.device, settings.precision):
        return accuracy(model, test)


def generate_and_classify(
    cell: CellConfig, data: CellData, target: TrainedTarget, ctx: Context
) -> Generated:
    """D_gen from the target (NaN values zeroed, with a warning) and the accuracy on real
    D_test of the classifier trained on it (early stopping on a held-out share of D_gen).
    """
    labels = generation_labels(cell, data)
    with mixed_precision(ctx.device, cell.precision):  # the decoders return float32
        gen_x, gen_y = generate(
            target.model,
            labels,
            seed=cell.seed,
            method=target.family.generation,
            source=target.prepared.train,
        )
    gen_x, nonfinite = finite_records(gen_x)
    if nonfinite:
        log.warning(
            "cell %s: %d of %d generated records had NaN or infinite values, set to 0",
            cell.config_hash,
            nonfinite,
            len(gen_x),
        )
    fit, hold = holdout_split(
        len(gen_x),
        fraction=GEN_HOLDOUT,
        seed=derive_seed(cell.seed, Purpose.GENERATE, "holdout") % 2**32,
    )
    acc = classifier_accuracy(
        (gen_x[fit], gen_y[fit]),
        (gen_x[hold], gen_y[hold]),
        data.test,
        num_classes=data.num_classes,
        settings=classifier_settings(cell, ctx.device, "gen"),
        ctx=ctx,
        desc="classifier on D_gen",
        kind=cell.profile.classifier,
    )
    return Generated(gen_x, gen_y, nonfinite, acc)


def generation_labels(cell: CellConfig, data: CellData) -> torch.Tensor:
    """D_gen's labels: ``gen_records`` (None: |D_train|, the old rule) of them with D_val's
    class shares (exact counts, largest remainders), in seeded order.

    Notes:
        D_val's shares, not D_train's: they read no D_train record. With D_train's counts,
        adding a record would change D_gen's label counts deterministically and model plus D_gen
        would have no finite epsilon (:data:`audit.rows.filling.GEN_LABELS_NOTE`).
    """
    n_gen = cell.profile.gen_records or len(data.train[1])
    return gen_labels(data.val[1], n_gen, seed=cell.seed)
