"""The rows of audited releases as ``runs.csv`` holds them: collected from the cells as a sweep's
are (:func:`audit.results.collect_rows`), with the columns a release fills from its own
measurements rather than from a non-private baseline it does not have.

A sweep's ``utility_valid`` asks whether the row's *baseline* classifies above chance; a release
has no baseline, so its ``utility_valid`` asks the same of the release itself: the classifier
trained on its samples, scored on the user's ``--test`` records
(:func:`utility_valid`). This module restores that value after the
collection's derived columns (:mod:`audit.derived`) filled the sweep's.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from audit import io
from audit.results import CELLS_DIR, MANIFEST, RUNS_CSV, cell_configs, collect_rows, locked
from audit.tradeoff import UTILITY_ALPHA, above_chance, chance_accuracy

#: The ``mech`` column of a release audited from outside the suite.
EXTERNAL = "external"
#: The ``profile`` column of such rows (what the report groups by).
RELEASE_PROFILE = "release"
#: Where an audit writes its DCR baseline, beside the cell's rows.
DCR_FILE = "dcr.json"


def release_dir_kind(run_dir: Path) -> str:
    """``release`` where every readable cell of ``run_dir`` is an audited release (mech
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
            f"--out {str(out)!r} holds a sweep's results; audit a release into a folder of its "
            "own (a new --out)"
        )


def utility_valid(
    *, acc: float, acc_base: float, acc_majority: float, n_test: float
) -> bool | None:
    """Whether a release's accuracy ``acc`` (the classifier trained on its samples, scored on
    ``n_test`` labelled test records) is above chance = max(1/#classes, the test records'
    majority share) by the one-sided exact binomial test at :data:`UTILITY_ALPHA`
    (:func:`audit.tradeoff.above_chance`, the sweep's test); None where no accuracy was
    measured (no ``--test``)."""
    if not math.isfinite(acc):
        return None
    chance = chance_accuracy(acc_base, acc_majority)
    return above_chance(acc, n_test=n_test, chance=chance, alpha=UTILITY_ALPHA)


def with_release_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``utility_valid`` of its release rows (mech :data:`EXTERNAL`) set from the
    release's own accuracy (:func:`utility_valid`: None where no test set was given); other
    rows untouched."""
    if frame.empty or "mech" not in frame:
        return frame
    external = frame["mech"] == EXTERNAL
    if not external.any():
        return frame
    frame = frame.copy()
    frame["utility_valid"] = frame["utility_valid"].astype(object)
    for index in frame.index[external]:
        row = frame.loc[index]
        frame.at[index, "utility_valid"] = utility_valid(
            acc=float(row["acc"]),
            acc_base=float(row["acc_base"]),
            acc_majority=float(row.get("acc_majority", float("nan"))),
            n_test=float(row["n_test"]),
        )
    return frame


def release_rows(out: Path) -> pd.DataFrame:
    """Every finished cell's rows under ``out`` (:func:`collect_rows`), release columns set."""
    return with_release_columns(collect_rows(Path(out)))


def write_release_csv(out: Path) -> tuple[Path, pd.DataFrame]:
    """Rebuild ``out/runs.csv`` from the cells as :func:`audit.results.write_csv` does (under its
    lock, atomically), with the release columns set."""
    path = Path(out) / RUNS_CSV
    with locked(Path(out) / f".{RUNS_CSV}.lock"):
        frame = release_rows(out)
        io.write_text(path, frame.to_csv(index=False))
    return path, frame


def dcr_file(out: Path, config_hash: str) -> Path:
    """Where the DCR baseline of release ``config_hash`` in ``out`` lies (it may not exist)."""
    return Path(out) / CELLS_DIR / config_hash / DCR_FILE
