"""Utility of a release made outside the suite, where the user asks for it: the modality's
target classifier trained on the released samples (and, as the ceiling, on the members), each
early-stopped on a seeded holdout of its own training records, scored on the user's labelled
real test records — the sweep's ``acc``, ``acc_real``, ``acc_base`` and ``acc_majority``."""

from __future__ import annotations

import numpy as np
import torch

from audit.cell.gen_accuracy import classifier_accuracy
from audit.mechanisms import Context
from audit.release.record_sets import RecordSet, ReleaseRecords, Role
from audit.rows.tradeoff import majority_share
from dpvae_core.progress import ProgressFactory, null_progress
from dpvae_core.seeding import Purpose, derive_seed
from models.classifier_training import ClassifierSettings, holdout_split

#: Share of each classifier's training records held out for its early stopping (as a cell's).
HOLDOUT = 0.2


def check_test_set(test: RecordSet, records: ReleaseRecords) -> None:
    """ValueError unless ``test`` can score a classifier of this release: labelled, labelled
    samples (given, or drawn from a decoder of labelled records), the records' shape, and none
    of the members among them (exact duplicates would score the members' memorisation)."""
    if test.y is None or not records.labelled:
        raise ValueError(
            "--test needs labels (y) on the test records and on --members/--non-members "
            "(the classes a classifier learns)"
        )
    if records.samples is not None and records.samples.y is None:
        raise ValueError("--test needs labels (y) on --samples: the classifier trains on them")
    if test.record_shape != records.members.record_shape:
        raise ValueError(
            f"--test records have shape {test.record_shape}, the members "
            f"{records.members.record_shape}"
        )
    seen = {row.tobytes() for row in records.members.x}
    shared = sum(row.tobytes() in seen for row in test.x)
    if shared:
        raise ValueError(
            f"{shared} of the --test records are also among the members; test on records the "
            "model never saw"
        )
    if len(np.unique(test.y)) < 2:
        raise ValueError("--test needs at least two classes")


def release_utility(
    samples: tuple[torch.Tensor, torch.Tensor],
    members: RecordSet,
    test: RecordSet,
    *,
    epochs: int,
    seed: int,
    device: str = "cpu",
    progress: ProgressFactory = null_progress,
) -> dict[str, float]:
    """``acc`` (classifier trained on the samples), ``acc_real`` (on the members), ``acc_base``
    (1/#classes), ``acc_majority`` (the test records' majority share) and ``n_test``."""
    classes = int(max(test.y.max(), members.y.max(), int(samples[1].max())) + 1)
    test_pair = (torch.from_numpy(test.x), torch.from_numpy(test.y))
    ctx = Context(device=device, progress=progress)

    def trained_on(x: torch.Tensor, y: torch.Tensor, purpose: str) -> float:
        split_seed = derive_seed(seed, Purpose.CLASSIFIER, f"{purpose}-holdout") % 2**32
        fit, hold = holdout_split(len(x), fraction=HOLDOUT, seed=split_seed)
        settings = ClassifierSettings(
            epochs=epochs,
            patience=max(1, epochs // 4),
            seed=derive_seed(seed, Purpose.CLASSIFIER, purpose) % 2**31,
            device=device,
        )
        return classifier_accuracy(
            (x[fit], y[fit]),
            (x[hold], y[hold]),
            test_pair,
            num_classes=classes,
            settings=settings,
            ctx=ctx,
            desc=f"classifier on {purpose}",
        )

    return {
        "acc": trained_on(samples[0], samples[1], Role.SAMPLES.value),
        "acc_real": trained_on(
            torch.from_numpy(members.x), torch.from_numpy(members.y), Role.MEMBERS.value
        ),
        "acc_base": 1.0 / classes,
        "acc_majority": majority_share(test.y),
        "n_test": float(len(test)),
    }
