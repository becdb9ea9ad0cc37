"""The rows of attacked releases as ``runs.csv`` holds them, collected from the cells as a
sweep's are (:func:`audit.results.collect_rows`), and what an ``--out`` folder holds.

A sweep's ``utility_valid`` asks whether the row's *baseline* classifies above chance; a release
has no baseline (``baseline_hash`` empty), so the derived columns (:mod:`audit.rows.derived`) ask
the same of the release itself: the classifier trained on its samples, scored on the user's
``--test`` records.
"""

from __future__ import annotations

from pathlib import Path

from audit.results import CELLS_DIR, MANIFEST, cell_configs

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


def check_release_out(out: Path) -> None:
    """ValueError (one line) where ``out`` holds a sweep (its ``run.json`` or cells of a
    mechanism): a release's rows, ``runs.csv`` and report would mix with the sweep's. Reads
    only; an absent ``out`` is fine."""
    out = Path(out)
    if (out / MANIFEST).exists() or release_dir_kind(out) in ("sweep", "mixed"):
        raise ValueError(
            f"--out {str(out)!r} holds a sweep's results; attack a release into a folder of its "
            "own (a new --out)"
        )


def dcr_file(out: Path, config_hash: str) -> Path:
    """Where the DCR baseline of release ``config_hash`` in ``out`` lies (it may not exist)."""
    return Path(out) / CELLS_DIR / config_hash / DCR_FILE
