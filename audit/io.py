"""Atomic, schema-versioned persistence: write to a temporary file, then ``os.replace``."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

SCHEMA_VERSION = 1


def _atomic(path: Path, write: Callable[[Path], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_writable_dir(path: Path) -> Path:
    """Create directory ``path`` if needed and prove a file can be written in it.

    Raises ValueError naming the path when it is an existing file or cannot be written (checked
    by writing, since permission bits do not tell for root or read-only mounts).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"output {str(path)!r} is an existing file; give a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(
            f"output directory {str(path)!r} is not writable ({exc.strerror or exc}); "
            "choose another --out"
        ) from None
    return path


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        return _jsonable(value.item())
    return value


def json_text(payload: dict[str, Any]) -> str:
    """What :func:`write_json` writes for ``payload``: the text, so its digest can be known
    before the file exists."""
    return json.dumps({"schema_version": SCHEMA_VERSION, **_jsonable(payload)}, indent=2) + "\n"


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` and ``schema_version`` as JSON, atomically (non-finite floats as text)."""
    body = json_text(payload)
    _atomic(Path(path), lambda tmp: tmp.write_text(body))


def read_json(path: Path) -> dict[str, Any]:
    data = json.loads(Path(path).read_text())
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {version!r}, this code reads {SCHEMA_VERSION}")
    return data


def write_with(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` to fill a temporary file, then move it onto ``path`` atomically."""
    _atomic(Path(path), write)


def write_text(path: Path, text: str) -> None:
    _atomic(Path(path), lambda tmp: tmp.write_text(text, encoding="utf-8"))


def save_state(path: Path, state: dict[str, Any]) -> None:
    """Save a state dict (tensors) with ``torch.save``, atomically."""
    _atomic(Path(path), lambda tmp: torch.save({"schema_version": SCHEMA_VERSION, **state}, tmp))


def save_npz(path: Path, arrays: dict[str, Any]) -> None:
    """Save numpy arrays (plus ``schema_version``) as .npz, atomically."""

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.savez(fh, schema_version=SCHEMA_VERSION, **arrays)

    _atomic(Path(path), write)


def load_state(path: Path) -> dict[str, Any]:
    return torch.load(Path(path), map_location="cpu", weights_only=True)
