"""Reference models that several cells side by side would each train, trained once first.

Cells run one after another reuse the reference models an earlier cell stored
(:mod:`audit.results.reference_cache`); cells started side by side (``--workers``) would each
train the ones the cache lacks. The non-private reference set of a seed is the same for every
private cell of it and for its baseline (one key), so before the cells start the driver trains
each such set that two or more pending cells need and the cache lacks, and stores it: each cell
then finds it in the cache, as it would one after another. Mechanism-copying sets belong to one
cell each and stay with it; tuned cells (their recipe is chosen in the cell) are left alone.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from attacks import Records
from audit.cell.membership import cell_data, reference_records
from audit.cell.reference_training import train_reference_model
from audit.cell.references import ReferenceSpec, cell_reference_specs
from audit.config import CellConfig
from audit.datasets import Dataset, Split
from audit.results.reference_cache import cached_models, save_models

log = logging.getLogger(__name__)


def train_shared_references(
    out: Path,
    dataset: Dataset,
    splits: dict[int, Split],
    cells: Iterable[CellConfig],
    *,
    device: str,
) -> int:
    """Train and store the non-private reference models two or more of ``cells`` need and
    ``out``'s cache lacks; returns how many were trained."""
    specs: dict[str, tuple[ReferenceSpec, Records | None]] = {}  # key -> spec, its records
    users: Counter[str] = Counter()  # key -> how many of the cells need it
    for cell in cells:
        if cell.option("tune_trials") is not None:
            continue
        data = cell_data(dataset, splits[cell.seed], cell)
        for spec in cell_reference_specs(cell, data):
            if not spec.recipe.nonprivate:
                continue
            if spec.key not in specs:  # the records once per set
                specs[spec.key] = (spec, reference_records(data, cell))
            users[spec.key] += 1
    trained = 0
    for key, (spec, reference) in specs.items():
        have = {m.index for m in cached_models(out, spec)}
        missing = [i for i in range(spec.n_models) if i not in have]
        if users[key] < 2 or not missing or reference is None:
            continue
        log.info(
            "training %d non-private reference VAE(s) once for %d cells (%s)",
            len(missing),
            users[key],
            key,
        )
        models = [train_reference_model(spec, reference, i, device=device) for i in missing]
        save_models(out, spec, models)
        trained += len(models)
    return trained
