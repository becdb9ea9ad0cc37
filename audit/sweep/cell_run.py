"""One grid cell end to end (the trade-off paper, Figure 1): mechanism -> target VAE -> D_gen ->
classifier accuracy, and every attack of the cell (:attr:`CellConfig.attacks`) against what the
mechanism releases, on unperturbed members vs non-members."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audit import io
from audit.cell.attack_step import Attacked, attack_target
from audit.cell.ensemble_training import train_together
from audit.cell.gen_accuracy import generate_and_classify
from audit.cell.membership import AttackIndex, attack_index
from audit.cell.reference_training import ReferenceSet
from audit.cell.references import ReferenceModel
from audit.cell.target import Measured, TrainedTarget, measure_target, train_target
from audit.config import CellConfig
from audit.empirical.cell_audit import audit_cell
from audit.mechanisms import CellData, Context
from audit.results import begin_cell, finish_cell, scores_key, write_attack_index
from audit.rows.filling import build_cell_rows
from audit.rows.row import Row

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CellOutcome:
    rows: tuple[Row, ...]
    model_state: dict[str, torch.Tensor]
    history: dict[str, Any]
    scores: dict[str, np.ndarray]
    attack_index: AttackIndex | None = None  # what the report's reconstruction grids show
    references: tuple[ReferenceSet, ...] = ()  # the reference models (the driver caches new ones)


def run_cell(
    cell: CellConfig,
    data: CellData,
    ctx: Context,
    *,
    acc_real: float,
    code_version: str,
    baseline_hash: str,
    cached_references: tuple[ReferenceModel, ...] = (),
) -> CellOutcome:
    """Run one cell; returns one row per result of each of its attacks (keyed by attack,
    distance and variant), the target model's state and its history. ``baseline_hash``: the
    config hash of the cell's non-private baseline, recorded in every row.
    ``cached_references``: reference models trained before (:func:`calibration_models` uses
    those of this cell's specs and trains the others; the outcome carries them). Where an
    ensemble pays (CUDA), the target and the reference models it would train train together
    first (:func:`audit.cell.ensemble_training.train_together`)."""
    start = time.perf_counter()
    together = train_together(cell, data, ctx, cached=cached_references)  # on CUDA
    target = together.target or train_target(cell, data, ctx, start=together.started)
    measured = measure_target(cell, data, target)
    generated = generate_and_classify(cell, data, target, ctx)
    attacked = attack_target(
        cell,
        data,
        target,
        generated,
        ctx,
        cached=cached_references,
        fresh=together.references,
    )
    audited = audit_cell(cell, data, ctx, target.claim)
    facts = {
        "acc_real": acc_real,
        "wall_s": time.perf_counter() - start,
        "code_version": code_version,
        "baseline_hash": baseline_hash,
    }
    rows = build_cell_rows(cell, data, target, measured, generated, attacked, audited, facts=facts)
    return CellOutcome(
        rows=rows,
        model_state=target.model.state_dict(),
        history=_history(target, measured),
        scores=scores_of(attacked),
        attack_index=attack_index(data, cell),
        references=attacked.references,
    )


def _history(target: TrainedTarget, measured: Measured) -> dict[str, Any]:
    history = target.trained.history
    return {
        "train_loss": history.train_loss,
        "val_loss": history.val_loss,
        "dp_run": None if history.dp is None else _plain(asdict(history.dp)),
        "train_notes": dict(target.trained.notes),
        "loss_train_real": measured.loss_train,
        "loss_test_real": measured.loss_test,
    }


def _plain(value: Any) -> Any:
    """``value`` with Enums as their values (for JSON)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value.value if isinstance(value, Enum) else value


def save_outcome(cell_dir: Path, cell: CellConfig, outcome: CellOutcome, metadata: dict) -> None:
    """Write the cell's files in ``OUT/cells/<hash>``: an earlier computation's removed first,
    then the new ones, their digests recorded in ``OUT/run.json``, and ``rows.json`` last (it
    marks the cell finished; :func:`audit.results.finish_cell`)."""
    begin_cell(cell_dir)
    io.write_json(cell_dir / "config.json", {"config": cell.canonical(), "hash": cell.config_hash})
    io.write_json(cell_dir / "metadata.json", metadata)
    io.write_json(cell_dir / "history.json", outcome.history)
    io.save_state(cell_dir / "model.pt", {"model": outcome.model_state})
    io.save_npz(cell_dir / "scores.npz", outcome.scores)
    if outcome.attack_index is not None:
        write_attack_index(cell_dir, outcome.attack_index)
    rows = {"rows": [row.to_dict() for row in outcome.rows]}
    finish_cell(Path(cell_dir).parents[1], cell_dir, rows)


def scores_of(attacked: Attacked) -> dict[str, np.ndarray]:
    """The cell's ``scores.npz`` arrays: each result's scores and D_atk's membership."""
    scores = {
        scores_key(r.attack, r.distance.value, r.variant.value): r.scores for r in attacked.results
    }
    scores["is_member"] = attacked.data.is_member
    return scores
