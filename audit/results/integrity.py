"""Tamper evidence: the SHA-256 of every file a run stores, recorded in its manifest.

``OUT/run.json`` maps each stored file, by its path relative to ``OUT``, to the SHA-256 of its
bytes (``files``); the manifest is sealed by its own SHA-256 (:mod:`audit.results.manifest`).
Recorded are:

- every file of a cell (``config.json``, ``metadata.json``, ``history.json``, ``model.pt``,
  ``scores.npz``, ``attack_index.npz``, a release's ``dcr.json``, and ``rows.json``): the cell's
  old files are removed first (:func:`begin_cell`), the new ones written, their digests and that
  of the ``rows.json`` about to be written recorded, and only then ``rows.json`` written
  (:func:`finish_cell`). So a cell a reader sees finished is always recorded, and a kill between
  the two leaves an unfinished cell (computed again);
- the shared caches: ``cache/acc_real-*.json`` and ``reference-models/<key>/*``, recorded right
  after each is written (:func:`record_file`); one not recorded is not trusted.

Checked: on reuse (a cell or cache file that does not match is named in a warning and computed
again; a sweep removes changed cache files as it starts: :func:`drop_changed_caches`), and by
``report`` and ``check`` (:func:`run_problems`: refused in one line naming the file,
before anything is written). A finished cell without any recorded digest (written by other code,
copied in, or its ``run.json`` deleted) counts as not matching. A cache file that is recorded but
missing is merely computed again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from audit import io
from audit.results.layout import CELLS_DIR, MANIFEST
from audit.results.manifest import FILES, manifest_lock, read_body, write_body
from dpvae_core.digests import bytes_sha256, file_sha256

log = logging.getLogger(__name__)

ROWS_FILE = "rows.json"


def _key(out: Path, path: Path) -> str:
    """``path`` relative to ``out``, as the manifest names it."""
    return Path(path).relative_to(Path(out)).as_posix()


def recorded_files(run_dir: Path) -> dict[str, str]:
    """The digests ``run_dir``'s manifest records, by relative path (empty without one)."""
    body = read_body(run_dir)
    return dict(body.get(FILES, {})) if body is not None else {}


def record(out: Path, digests: Mapping[str, str], *, replacing: str | None = None) -> None:
    """Add ``digests`` (relative path -> SHA-256) to ``out``'s manifest under its lock, first
    dropping every entry under folder ``replacing`` (relative, ending in ``/``). Creates a
    manifest of the files alone where there is none."""
    out = Path(out)
    with manifest_lock(out):
        body = read_body(out) or {}
        files = {
            k: v
            for k, v in dict(body.get(FILES, {})).items()
            if replacing is None or not k.startswith(replacing)
        }
        write_body(out, {**body, FILES: {**files, **digests}})


def record_file(out: Path, path: Path) -> None:
    """Record the digest of the file at ``path`` (under ``out``) as it is now."""
    record_files(out, [path])


def record_files(out: Path, paths: Iterable[Path]) -> None:
    """Record the digests of the files at ``paths`` (under ``out``) as they are now; one that is
    gone (removed by a concurrent sweep as changed) is left unrecorded, so it is computed again."""
    digests = {}
    for path in paths:
        try:
            digests[_key(out, path)] = file_sha256(path)
        except FileNotFoundError:
            continue
    if digests:
        record(out, digests)


def stored_files(folder: Path) -> list[Path]:
    """The files a run stored in ``folder``: every regular file but hidden ones (locks and
    ``io``'s temporary files)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


def record_cell(out: Path, cell_dir: Path, extra: Mapping[str, str] | None = None) -> None:
    """Record the digests of every file of ``cell_dir`` as it is now (and ``extra``, by file
    name), replacing whatever the manifest held for that cell."""
    digests = {_key(out, p): file_sha256(p) for p in stored_files(cell_dir)}
    prefix = _key(out, cell_dir) + "/"
    digests.update({prefix + name: digest for name, digest in (extra or {}).items()})
    record(out, digests, replacing=prefix)


def begin_cell(cell_dir: Path) -> None:
    """Before a cell is written (again): remove its ``rows.json`` first (the cell is unfinished
    from here on), then its other files, so no file of an earlier computation stays behind."""
    cell_dir = Path(cell_dir)
    (cell_dir / ROWS_FILE).unlink(missing_ok=True)
    for path in stored_files(cell_dir):
        path.unlink(missing_ok=True)


def finish_cell(out: Path, cell_dir: Path, payload: dict[str, Any]) -> None:
    """Record the digests of the cell's files and of ``rows.json`` holding ``payload``, then
    write ``rows.json`` (the cell is finished once it exists)."""
    text = io.json_text(payload)
    record_cell(out, cell_dir, {ROWS_FILE: bytes_sha256(text.encode())})
    io.write_text(Path(cell_dir) / ROWS_FILE, text)


def file_problem(out: Path, path: Path, files: Mapping[str, str] | None = None) -> str | None:
    """None where the file at ``path`` matches the digest ``out``'s manifest recorded (``files``:
    that record, read from disk where None); else why not, in a clause naming the file."""
    files = recorded_files(out) if files is None else files
    digest = files.get(_key(out, path))
    if digest is None:
        return f"{path} has no SHA-256 in {Path(out) / MANIFEST} (not written by this code)"
    if not Path(path).is_file():
        return f"{path} is missing (recorded in {Path(out) / MANIFEST})"
    if file_sha256(path) != digest:
        return (
            f"{path} does not match the SHA-256 {Path(out) / MANIFEST} recorded when it was "
            "written (edited or damaged)"
        )
    return None


def cell_problem(out: Path, cell_dir: Path, files: Mapping[str, str] | None = None) -> str | None:
    """None where every file of ``cell_dir`` matches its recorded digest and every recorded file
    is there; else why not, naming the first file that does not."""
    files = recorded_files(out) if files is None else files
    prefix = _key(out, cell_dir) + "/"
    recorded = sorted(k for k in files if k.startswith(prefix))
    if not recorded:
        return (
            f"{cell_dir} has no SHA-256 of its files in {Path(out) / MANIFEST} (written by other "
            "code or copied in)"
        )
    for key in recorded:
        problem = file_problem(out, Path(out) / key, files)
        if problem is not None:
            return problem
    added = [p for p in stored_files(cell_dir) if _key(out, p) not in files]
    if added:
        return f"{added[0]} is not recorded in {Path(out) / MANIFEST} (added after the cell)"
    return None


def finished_cells(out: Path) -> list[Path]:
    """The cell directories of ``out`` holding a ``rows.json`` (finished, whatever it holds)."""
    return sorted(p.parent for p in (Path(out) / CELLS_DIR).glob(f"*/{ROWS_FILE}"))


def cache_problems(out: Path, files: Mapping[str, str] | None = None) -> list[str]:
    """Each recorded file outside the cells (the caches) that is there but does not match."""
    files = recorded_files(out) if files is None else files
    found = []
    for key in sorted(files):
        path = Path(out) / key
        if key.startswith(f"{CELLS_DIR}/") or not path.is_file():
            continue
        problem = file_problem(out, path, files)
        if problem is not None:
            found.append(problem)
    return found


def drop_changed_caches(out: Path) -> list[Path]:
    """Remove each recorded cache file of ``out`` that no longer matches its digest, and its
    entry (a sweep does this as it starts: the file is computed again where a cell needs it);
    returns the files removed, each named in a warning."""
    out = Path(out)
    with manifest_lock(out):
        body = read_body(out)
        if body is None:
            return []
        files = dict(body.get(FILES, {}))
        changed = [
            Path(out) / key
            for key in sorted(files)
            if not key.startswith(f"{CELLS_DIR}/")
            and (out / key).is_file()
            and file_sha256(out / key) != files[key]
        ]
        for path in changed:
            log.warning(
                "removing cache file %s: it does not match the SHA-256 %s recorded (edited or "
                "damaged); it is computed again where a cell needs it",
                path,
                out / MANIFEST,
            )
            path.unlink(missing_ok=True)
            del files[_key(out, path)]
        if changed:
            write_body(out, {**body, FILES: files})
    return changed


def run_problems(out: Path) -> list[str]:
    """Every finished cell of ``out`` that does not match its recorded digests, and every
    recorded cache file that changed: what ``report`` and ``check`` refuse."""
    files = recorded_files(out)
    cells = [cell_problem(out, cell_dir, files) for cell_dir in finished_cells(out)]
    return [p for p in cells if p is not None] + cache_problems(out, files)


def refusal(problems: list[str]) -> str:
    """The one line that refuses a run with ``problems`` (non-empty)."""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return (
        f"{problems[0]}{more}; its rows cannot be trusted: rerun the command that wrote it (a "
        "sweep computes such a cell again) or move it aside"
    )
