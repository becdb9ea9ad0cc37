"""The rows of attacked releases as ``runs.csv`` holds them, collected from the cells as a
sweep's are (:func:`audit.results.collect_rows`), and what an ``--out`` folder holds.

A sweep's ``utility_valid`` asks whether the row's *baseline* classifies above chance; a release
has no baseline (``baseline_hash`` empty), so the derived columns (:mod:`audit.rows.derived`) ask
the same of the release itself: the classifier trained on its samples, scored on the user's
``--test`` records.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np

from audit.release.record_sets import RecordSet, ReleaseRecords
from audit.release.release_config import ReleaseAttackConfig
from audit.results import CELLS_DIR, cell_configs
from audit.results.integrity import stored_files
from audit.results.manifest import RELEASE, differences, manifest_lock, read_body, write_body
from dpvae_core.digests import json_digest

#: The ``mech`` column of a release made outside the suite and attacked.
EXTERNAL = "external"
#: The ``profile`` column of such rows (what the report groups by).
RELEASE_PROFILE = "release"
#: Where a release attack writes its DCR baseline, beside the cell's rows.
DCR_FILE = "dcr.json"


def release_dir_kind(run_dir: Path) -> str:
    """``release`` where every readable cell of ``run_dir`` is an attacked release (mech
    :data:`EXTERNAL`), ``sweep`` where none is, ``mixed`` where both are, ``empty`` where there
    is no readable cell."""
    mechs = {str(c.get("mech")) for c in cell_configs(Path(run_dir)).values()}
    if not mechs:
        return "empty"
    if EXTERNAL not in mechs:
        return "sweep"
    return "release" if mechs == {EXTERNAL} else "mixed"


def _records_sha256(records: RecordSet | None) -> str | None:
    """SHA-256 of a record set as read (its values, shape and labels); None where not given."""
    if records is None:
        return None
    h = hashlib.sha256(repr(records.x.shape).encode())
    h.update(np.ascontiguousarray(records.x).tobytes())
    if records.y is not None:
        h.update(np.ascontiguousarray(records.y).tobytes())
    return h.hexdigest()


def _model_sha256(model: Any) -> str | None:
    """SHA-256 of a released model's state (parameter names and values); None without one."""
    if model is None:
        return None
    h = hashlib.sha256()
    for name, value in model.state_dict().items():
        h.update(name.encode())
        h.update(value.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


def release_inputs(
    records: ReleaseRecords,
    config: ReleaseAttackConfig,
    *,
    model: Any = None,
    whole: bool = False,
    test: RecordSet | None = None,
) -> dict[str, Any]:
    """What makes one release attack: the SHA-256 of each record set given (as read, so the same
    arrays in another file are the same input) and of the model's state, what the model is (the
    whole VAE or its decoder), and every option that changes the rows (not ``device``). Two
    commands with equal inputs write the same cell; ``run.json`` records them
    (:func:`claim_release`)."""
    return {
        "records": {
            "members": _records_sha256(records.members),
            "non-members": _records_sha256(records.non_members),
            "reference": _records_sha256(records.reference),
            "samples": _records_sha256(records.samples),
            "test": _records_sha256(test),
        },
        "model": {
            "given": None if model is None else ("vae" if whole else "decoder"),
            "state_sha256": _model_sha256(model),
        },
        "options": {
            "name": config.name,
            "modality": config.modality.value,
            "attacks": list(config.attacks) if config.attacks is not None else None,
            "attack_samples": config.attack_samples,
            "gen_records": config.gen_records,
            "seed": config.seed,
            "epsilon": _number(config.epsilon),
            "delta": _number(config.delta),
            "membership_coins": config.membership_coins,
            "classifier_epochs": config.classifier_epochs if test is not None else None,
        },
    }


def release_hash(inputs: dict[str, Any]) -> str:
    """The release cell's config hash (its directory's name): a digest of its inputs."""
    return json_digest(inputs)


def _input_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two releases' inputs: the record sets and model by name, the
    options with both values."""
    found = [
        f"--{role} differs"
        for role in sorted(set(old.get("records", {})) | set(new["records"]))
        if old.get("records", {}).get(role) != new["records"][role]
    ]
    if old.get("model") != new["model"]:
        found.append("the model differs")
    return found + differences(old.get("options", {}), new["options"])


def _refusal(out: Path, body: dict[str, Any] | None, inputs: dict[str, Any] | None) -> str | None:
    """Why ``out`` cannot take the release attack of ``inputs`` (None: it can)."""
    if (body is not None and "cells" in body) or release_dir_kind(out) in ("sweep", "mixed"):
        return (
            f"--out {str(out)!r} holds a sweep's results; attack a release into a folder of its "
            "own (a new --out)"
        )
    if body is not None and RELEASE in body:
        if inputs is None:
            return None
        changed = _input_differences(body[RELEASE], inputs)
        if not changed:
            return None
        return (
            f"--out {str(out)!r} holds the attack on another release or with other options "
            f"({'; '.join(changed)}; that attack vs this one); one --out holds one release "
            f"attack: choose a new --out, or delete {str(out)!r} to start over"
        )
    held = [c for c in (Path(out) / CELLS_DIR).glob("*/") if stored_files(c)]
    if held or body is not None:
        return (
            f"--out {str(out)!r} holds results without a record of the release they attacked "
            "(no run.json, or one this code did not write); choose a new --out"
        )
    return None


def check_release_out(out: Path, inputs: dict[str, Any] | None = None) -> None:
    """ValueError (one line) where ``out`` cannot take a release attack: it holds a sweep (its
    ``run.json`` or cells of a mechanism), whose rows, ``runs.csv`` and report would mix with
    the release's; it holds the attack of another release or other options (``inputs``:
    :func:`release_inputs`, compared where given); or it holds cells without a record of their
    inputs. The same inputs again are accepted (the attack runs again and replaces its cell).
    Reads only; an absent ``out`` is fine."""
    out = Path(out)
    problem = _refusal(out, read_body(out) if out.is_dir() else None, inputs)
    if problem is not None:
        raise ValueError(problem)


def claim_release(out: Path, inputs: dict[str, Any]) -> None:
    """Record ``inputs`` in ``out``'s manifest (under its lock, checked again as
    :func:`check_release_out` does, in case another attack claimed ``out`` meanwhile)."""
    out = Path(out)
    with manifest_lock(out):
        body = read_body(out)
        problem = _refusal(out, body, inputs)
        if problem is not None:
            raise ValueError(problem)
        write_body(out, {**(body or {}), RELEASE: inputs})


def dcr_file(out: Path, config_hash: str) -> Path:
    """Where the DCR baseline of release ``config_hash`` in ``out`` lies (it may not exist)."""
    return Path(out) / CELLS_DIR / config_hash / DCR_FILE
