"""Checks of the paths a command reads and writes, made before any work: each raises a ValueError
in one line naming the flag, the path and what is allowed, and none leaves anything behind (where
only writing tells whether a folder is writable, a probe file is created there and removed at
once)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _text(path: Path | str) -> str:
    return repr(str(path))


def _given(path: Path | str | None, flag: str, kind: str) -> Path:
    if path is None or str(path) == "":
        raise ValueError(f"{flag} is empty; give a {kind}")
    return Path(path)


def check_input_file(path: Path | str, flag: str, *, kind: str = "file") -> Path:
    """``path`` if it is a non-empty regular file this process can read."""
    path = _given(path, flag, kind)
    if path.is_dir():
        raise ValueError(f"{flag} {_text(path)} is a directory; give the {kind} itself")
    if not path.exists():
        raise ValueError(f"{flag} {_text(path)} does not exist")
    if not path.is_file():
        raise ValueError(f"{flag} {_text(path)} is not a regular file; give the {kind} itself")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{flag} {_text(path)} cannot be read (permission denied)")
    if path.stat().st_size == 0:
        raise ValueError(f"{flag} {_text(path)} is an empty file; give the {kind} itself")
    return path


def check_input_dir(path: Path | str, flag: str, *, kind: str = "directory") -> Path:
    """``path`` if it is an existing directory."""
    path = _given(path, flag, kind)
    if not path.exists():
        raise ValueError(f"{flag} {_text(path)} does not exist")
    if not path.is_dir():
        raise ValueError(f"{flag} {_text(path)} is a file; give a {kind}")
    return path


def _nearest_existing(path: Path) -> Path:
    """The nearest ancestor of ``path`` that exists (``path`` itself if it does)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _probe(folder: Path) -> str | None:
    """None if a file can be created in ``folder``, else why not (the probe is removed)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=folder)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    os.close(fd)
    os.unlink(probe)
    return None


def _check_creatable(path: Path, flag: str, kind: str) -> None:
    """A missing ``path`` can be created: its nearest existing ancestor is a writable folder."""
    ancestor = _nearest_existing(path.parent)
    if not ancestor.is_dir():
        raise ValueError(
            f"{flag} {_text(path)} cannot be created: {_text(ancestor)} is a file, not a "
            f"directory; give a {kind} path under a directory"
        )
    why = _probe(ancestor)
    if why is not None:
        raise ValueError(
            f"{flag} {_text(path)} cannot be created: {_text(ancestor)} is not writable ({why})"
        )


def check_output_dir(path: Path | str, flag: str) -> Path:
    """``path`` if it is a writable directory or could be created as one; creates nothing."""
    path = _given(path, flag, "directory")
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"{flag} {_text(path)} is an existing file; give a directory")
        why = _probe(path)
        if why is not None:
            raise ValueError(f"{flag} {_text(path)} is not writable ({why}); choose another")
        return path
    _check_creatable(path, flag, "directory")
    return path


def check_output_file(path: Path | str, flag: str) -> Path:
    """``path`` if a file can be written there (an existing writable file is replaced); creates
    nothing."""
    path = _given(path, flag, "file")
    if path.is_dir():
        raise ValueError(f"{flag} {_text(path)} is a directory; give the file to write")
    if path.exists():
        if not path.is_file():
            raise ValueError(f"{flag} {_text(path)} is not a regular file")
        why = _probe(path.parent)
        if why is not None:
            raise ValueError(
                f"{flag} {_text(path)} cannot be replaced: its folder is not writable ({why})"
            )
        return path
    _check_creatable(path, flag, "file")
    return path
