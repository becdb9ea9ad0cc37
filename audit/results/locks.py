"""The locks around a run directory: one per cell, the manifest's, ``runs.csv``'s, and the
shared lock every running sweep holds (which decides who may clean a killed sweep's files)."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from audit.results.layout import CELLS_DIR, TEMP_FILE

log = logging.getLogger(__name__)


@contextlib.contextmanager
def locked(path: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold an ``fcntl.flock`` on ``path`` (created if absent); the kernel drops it if the
    process dies, so a ``kill -9`` never leaves a stale lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cell_lock(out: Path, config_hash: str) -> contextlib.AbstractContextManager[None]:
    """The lock a sweep holds while it computes cell ``config_hash`` of ``out``."""
    return locked(Path(out) / CELLS_DIR / config_hash / ".lock")


@contextlib.contextmanager
def sweep_session(out: Path) -> Iterator[None]:
    """Mark a sweep as running in ``out`` (a shared lock) for the duration of the block.

    A sweep that finds no other one running first removes the temporary files a killed writer
    left (:data:`TEMP_FILE` in ``out``, ``out/cells/*``, ``out/cache`` and
    ``out/reference-models/*``, older than the moment
    it got the lock); with another sweep running it leaves them, as they may be that one's.
    """
    path = Path(out) / ".sweep.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            clean_orphans(out, before=time.time())
        except BlockingIOError:
            log.info("another sweep is running in %s; leaving temporary files alone", out)
        fcntl.flock(fh, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def clean_orphans(out: Path, *, before: float) -> list[Path]:
    """Remove ``io``'s temporary files under ``out`` last modified before ``before`` (epoch s)."""
    out = Path(out)
    folders = [
        out,
        out / "cache",
        *(p for p in (out / CELLS_DIR).glob("*") if p.is_dir()),
        *(p for p in (out / "reference-models").glob("*") if p.is_dir()),
    ]
    removed = [path for folder in folders for path in clean_temp_files(folder, before=before)]
    if removed:
        log.warning("removed %d temporary file(s) a killed sweep left in %s", len(removed), out)
    return removed


def clean_temp_files(
    folder: Path, *, before: float, targets: Callable[[str], bool] | None = None
) -> list[Path]:
    """Remove ``io``'s temporary files (:data:`TEMP_FILE`) directly in ``folder`` last modified
    before ``before`` (epoch s); with ``targets``, only those whose destination file name
    (``.NAME.XXXXXXXX.tmp`` -> ``NAME``) it accepts."""
    removed = []
    for path in Path(folder).glob(".*.tmp"):
        if not TEMP_FILE.match(path.name):
            continue
        if targets is not None and not targets(path.name[1:].rsplit(".", 2)[0]):
            continue
        if path.is_file() and path.stat().st_mtime < before:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


@contextlib.contextmanager
def locked_dir(path: Path) -> Iterator[None]:
    """Hold an exclusive ``fcntl.flock`` on directory ``path`` itself (no lock file in it); the
    kernel drops it if the process dies."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
