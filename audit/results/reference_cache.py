"""Reference models on disk: where a cell's reference models are cached, loading and saving them."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch

from audit import io
from audit.cell.reference_training import ReferenceSet
from audit.cell.references import REFERENCE_DIR, SPEC_FILE, ReferenceModel, ReferenceSpec
from audit.results.integrity import file_problem, record_file, recorded_files

log = logging.getLogger(__name__)


def cache_dir(out: Path, spec: ReferenceSpec) -> Path:
    """``out/reference-models/<key>``."""
    return Path(out) / REFERENCE_DIR / spec.key


def _model_path(out: Path, spec: ReferenceSpec, index: int) -> Path:
    return cache_dir(out, spec) / f"model_{index}.pt"


def load_cached(out: Path, spec: ReferenceSpec) -> dict[int, ReferenceModel]:
    """The models of ``spec`` cached under ``out``, by index; a file that does not match the
    digest ``out/run.json`` recorded of it (edited, or not recorded), does not load, or holds
    another key or index, is skipped with a warning (that model is trained again)."""
    found: dict[int, ReferenceModel] = {}
    files = recorded_files(out)
    for index in range(spec.n_models):
        path = _model_path(out, spec, index)
        if not path.is_file():
            continue
        problem = file_problem(out, path, files)
        if problem is not None:
            log.warning("not using reference model file %s (%s)", path, problem)
            continue
        try:
            payload = io.load_state(path)
            if payload.get("schema_version") != io.SCHEMA_VERSION:
                raise ValueError(f"schema_version {payload.get('schema_version')!r}")
            if payload["key"] != spec.key or payload["index"] != index:
                raise ValueError(f"holds model {payload['index']} of key {payload['key']}")
            model = ReferenceModel(
                key=spec.key,
                index=index,
                state=dict(payload["model"]),
                records=payload["records"].numpy().astype(np.int64),
                seconds=float(payload["seconds"]),
            )
        except Exception as exc:  # noqa: BLE001 - any unreadable file: train that model again
            log.warning("not using reference model file %s (%s: %s)", path, type(exc).__name__, exc)
            continue
        found[index] = model
    return found


def save_models(out: Path, spec: ReferenceSpec, models: Iterable[ReferenceModel]) -> None:
    """Write ``models`` of ``spec`` under ``out`` (each atomically), then ``reference.json``
    describing every model of the spec found there; each file's digest is recorded in
    ``out/run.json`` once written."""
    for model in models:
        if model.key != spec.key:
            raise ValueError(f"model {model.index} belongs to key {model.key}, not {spec.key}")
        io.save_state(
            _model_path(out, spec, model.index),
            {
                "key": model.key,
                "index": model.index,
                "model": model.state,
                "records": torch.from_numpy(model.records),
                "seconds": model.seconds,
            },
        )
        record_file(out, _model_path(out, spec, model.index))
    present = load_cached(out, spec)
    io.write_json(
        cache_dir(out, spec) / SPEC_FILE,
        {
            "key": spec.key,
            "spec": spec.canonical(),
            "models": [
                {"index": m.index, "records": int(m.records.size), "seconds": m.seconds}
                for m in sorted(present.values(), key=lambda m: m.index)
            ],
        },
    )
    record_file(out, cache_dir(out, spec) / SPEC_FILE)


def cached_models(out: Path, spec: ReferenceSpec | None) -> tuple[ReferenceModel, ...]:
    """:func:`load_cached` as a tuple in index order; empty for no spec."""
    if spec is None:
        return ()
    return tuple(m for _, m in sorted(load_cached(out, spec).items()))


def save_trained(out: Path, references: ReferenceSet | None) -> None:
    """Cache the models ``references`` trained (nothing where it trained none)."""
    if references is None or not references.trained:
        return
    save_models(out, references.spec, references.new_models)
