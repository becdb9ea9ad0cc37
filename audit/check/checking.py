"""A run's rows against the thresholds: violations, unchecked rows and missing rows (rules:
:mod:`audit.check`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from audit import results
from audit.check.thresholds import LIMITED_COLUMNS, Threshold, check_acc_floor, load_thresholds
from audit.mechanisms import BASELINE, param_symbol
from audit.rows import derived
from audit.rows.row import COLUMNS, GRID_POINT
from audit.rows.tradeoff import chance_accuracy

#: The columns of ``runs.csv`` the gate reads, in :class:`audit.rows.row.Row`'s order: a row's grid
#: point, the (attack, distance) thresholds are keyed by, and the metrics they limit.
CHECK_COLUMNS: tuple[str, ...] = tuple(
    c for c in COLUMNS if c in {*GRID_POINT, "attack", "distance", *LIMITED_COLUMNS}
)


def read_runs(run_dir: Path, required: Sequence[str] = CHECK_COLUMNS) -> pd.DataFrame:
    """A run's rows (from its cells; see :func:`audit.results.load_rows`), which must hold rows
    and the ``required`` columns."""
    return results.load_rows(run_dir, required)


def param_label(mech: str, param_name: str, value: float) -> str:
    """``'z=0.1'`` (the parameter's symbol, :func:`audit.mechanisms.param_symbol`), or the
    :data:`~audit.mechanisms.BASELINE`'s name for the non-private baseline."""
    if mech == BASELINE or pd.isna(value):
        return BASELINE
    return f"{param_symbol(param_name)}={value:g}"


@dataclass(frozen=True)
class Violation:
    """One limit one row broke."""

    dataset: str
    mech: str
    param: str
    seed: int
    attack: str
    distance: str
    metric: str
    observed: float
    limit: float
    tolerance: float
    note: str = ""


@dataclass(frozen=True)
class CheckResult:
    """Outcome of the gate: counts, violations, and what was not covered."""

    n_rows: int
    n_checked: int
    n_thresholds: int
    violations: tuple[Violation, ...]
    unchecked: tuple[str, ...]
    unused_entries: tuple[int, ...]
    missing: tuple[str, ...] = ()
    missing_entries: tuple[int, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.violations and not self.missing


def _broken(observed: float, limit: float, tolerance: float, direction: int) -> bool:
    if math.isnan(observed):
        return True
    return observed > limit + tolerance if direction > 0 else observed < limit - tolerance


def check_runs(
    frame: pd.DataFrame,
    thresholds: Sequence[Threshold],
    planned: Sequence[dict[str, Any]] | None = None,
) -> CheckResult:
    """Compare every row of ``frame`` (a run's rows) with every matching threshold entry.

    ``planned``: the cells the run's sweeps planned (:func:`audit.results.planned_cells`), or
    None where unknown; it decides which entries that match no row fail (:mod:`audit.check`).
    """
    violations: list[Violation] = []
    used: set[int] = set()
    unchecked: list[str] = []
    n_checked = 0
    worst = derived.worst_case_rows(frame)
    if any(t.attack == derived.WORST_CASE_ATTACK for t in thresholds) and not worst.empty:
        rows = pd.concat([frame, worst], ignore_index=True)
    else:
        rows = frame  # no entry limits the worst case: no extra rows, no extra 'unchecked' lines
    for row in rows.itertuples(index=False):
        matching = [i for i, t in enumerate(thresholds) if t.matches(row)]
        label = param_label(row.mech, row.param_name, row.param_value)
        if not matching:
            unchecked.append(
                f"{row.dataset} {row.mech} {label} seed {row.seed} {row.attack} {row.distance}"
            )
            continue
        n_checked += 1
        used.update(matching)
        for i in matching:
            violations += _violations(i, thresholds[i], row)
    violations += bound_violations(frame)
    violations += divergence_violations(frame)
    if n_checked == 0:
        raise ValueError(
            f"no entry of the thresholds matches any of the {len(frame)} rows "
            f"(datasets {sorted(frame.dataset.unique())}, mechanisms "
            f"{sorted(frame.mech.unique())}); the gate would check nothing"
        )
    unused = tuple(i for i in range(len(thresholds)) if i not in used)
    expected = tuple(i for i in unused if _expected(thresholds[i], frame, planned))
    return CheckResult(
        len(frame),
        n_checked,
        len(thresholds),
        tuple(violations),
        tuple(unchecked),
        unused,
        tuple(_missing(i, thresholds[i], planned) for i in expected),
        expected,
    )


def _violations(index: int, t: Threshold, row: Any) -> list[Violation]:
    """The limits of entry ``index`` (``t``) that ``row`` breaks."""
    chance = chance_accuracy(getattr(row, "acc_base", None), getattr(row, "acc_majority", None))
    if t.min_acc is not None and not math.isnan(chance):
        try:
            check_acc_floor(t.min_acc, t.tolerance, float(chance))
        except ValueError as exc:
            raise ValueError(
                f"thresholds entries[{index}] ({row.dataset} {row.mech}): {exc}"
            ) from None
    found = []
    for name, column, limit, direction in t.limits():
        observed = float(getattr(row, column))
        if _broken(observed, limit, t.tolerance, direction):
            found.append(row_violation(row, name, observed, limit, t.tolerance))
    return found


#: Relative slack on a lower bound above its claim (float rounding only; rows without p-values).
BOUND_SLACK = 1e-9
#: The gate's family-wise false-failure rate over all its bound checks together (Holm).
BOUND_ALPHA = 0.05
BOUND_METRIC = "epsilon_lower>epsilon"
#: The lower-bound columns checked against the claim: the audit's (white-box for DP-SGD) and
#: the input-canary one. The input-canary run trains on D_train plus about m/2 canaries, so its
#: own claim is at most the cell's (q = B/N falls as N grows); a bound above the cell's claim is
#: a bug either way.
#: The f-DP bounds assume a Gaussian-shaped trade-off curve; DP-SGD's is close to one, so a bound
#: above the claim is a bug there too. ``epsilon_lower_attack`` is each attack's own scores on
#: D_atk read as a one-run audit (:mod:`audit.empirical.attack_bound`), at the claim's delta.
BOUND_COLUMNS = (
    "epsilon_lower",
    "epsilon_lower_input",
    "epsilon_lower_fdp",
    "epsilon_lower_input_fdp",
    "epsilon_lower_attack",
)
ATTACK_BOUND_COLUMN = "epsilon_lower_attack"


def row_violation(
    row: Any, metric: str, observed: float, limit: float, tolerance: float, note: str = ""
) -> Violation:
    """The :class:`Violation` of ``metric`` by ``row`` (a run's row as a named tuple)."""
    return Violation(
        row.dataset,
        row.mech,
        param_label(row.mech, row.param_name, row.param_value),
        int(row.seed),
        row.attack,
        row.distance,
        metric,
        observed,
        limit,
        tolerance,
        note,
    )


def holm_rejected(p_values: Sequence[float], alpha: float = BOUND_ALPHA) -> list[bool]:
    """Holm's step-down procedure (Holm 1979) over ``p_values``: sorted ascending, the i-th
    smallest (i = 0, 1, ...) is rejected while every p-value so far is below ``alpha / (k - i)``.
    The chance of rejecting any true hypothesis is at most ``alpha`` whatever the p-values'
    dependence; with one p-value it is the plain test ``p < alpha``."""
    k = len(p_values)
    rejected = [False] * k
    for i, j in enumerate(sorted(range(k), key=lambda j: p_values[j])):
        if not p_values[j] < alpha / (k - i):
            break
        rejected[j] = True
    return rejected


def _check_key(row: Any, column: str, index: int) -> tuple:
    """One bound check: the cell's audit columns repeat on each of its rows (one test per cell
    and column); an attack's bound is its row's own."""
    cell = getattr(row, "config_hash", None)
    if not isinstance(cell, str) or not cell:
        return (column, index)
    if column == ATTACK_BOUND_COLUMN:
        return (column, cell, row.attack, row.distance, getattr(row, "variant", ""))
    return (column, cell)


def bound_violations(frame: pd.DataFrame, alpha: float = BOUND_ALPHA) -> list[Violation]:
    """Rows whose empirical lower bound (any of :data:`BOUND_COLUMNS`) shows their claimed
    epsilon false, whatever the thresholds, with at most ``alpha`` family-wise false-failure
    rate over every bound check of the run.

    Each bound (95 % confidence) is one test of its row's claim; a run has up to 5 bound columns
    on every attack row, so failing on any bound above its claim would fail a correct run far
    more often than 5 %. Each check is therefore its bound's p-value at the claim (the
    ``<column>_p`` column: the smallest ``1 - confidence`` at which that bound exceeds the
    claim), and the checks actually made (one per cell for the cell's audit columns, one per row
    for ``epsilon_lower_attack``; NaN bounds and infinite claims make none) are corrected
    together by Holm's procedure (:func:`holm_rejected`): as strong as Bonferroni's ``alpha / k``
    everywhere, stronger after the first rejection, and valid for dependent tests (the columns
    and rows of one cell share a training run). Rows from before the p-value columns (a bound
    but no p-value) are checked uncorrected, bound above claim, and their violation says so.
    """
    columns = [c for c in BOUND_COLUMNS if {c, "epsilon"} <= set(frame.columns)]
    checks: dict[tuple, tuple[float, list]] = {}  # key -> (p-value, [(row, column)])
    found = []
    for index, row in enumerate(frame.itertuples(index=False) if columns else ()):
        claim = float(row.epsilon)
        for column in columns:
            bound = float(getattr(row, column))
            if math.isnan(bound) or not math.isfinite(claim):
                continue
            p = float(getattr(row, f"{column}_p", math.nan))
            if math.isnan(p):  # a run from before the p-values: the bound alone, uncorrected
                if bound > claim * (1 + BOUND_SLACK):
                    why = "uncorrected: no p-value stored (a run from before issue 40)"
                    found.append(
                        row_violation(
                            row, f"{column}>epsilon", bound, claim, claim * BOUND_SLACK, why
                        )
                    )
                continue
            checks.setdefault(_check_key(row, column, index), (p, []))[1].append((row, column))
    keys = list(checks)
    k = len(keys)
    for key, rejected in zip(keys, holm_rejected([checks[x][0] for x in keys], alpha), strict=True):
        if not rejected:
            continue
        p, hits = checks[key]
        why = f"p {p:.3g} at the claim; Holm over {k} bound checks, {alpha:g} family-wise"
        for row, column in hits:
            bound, claim = float(getattr(row, column)), float(row.epsilon)
            found.append(row_violation(row, f"{column}>epsilon", bound, claim, 0.0, why))
    return found


DIVERGED_METRIC = "train_diverged"


def divergence_violations(frame: pd.DataFrame) -> list[Violation]:
    """Rows whose target VAE's training diverged (``train_diverged``), whatever the thresholds:
    their MI AP and accuracy measure a broken model (a diverged baseline looks perfectly
    private). Rows from before the column existed (missing or empty) pass."""
    if "train_diverged" not in frame.columns:
        return []
    found = []
    for row in frame.itertuples(index=False):
        if str(row.train_diverged) == "True":  # True, numpy's True, or the CSV's "True"
            found.append(row_violation(row, DIVERGED_METRIC, 1.0, 0.0, 0.0))
    return found


def _expected(entry: Threshold, frame: pd.DataFrame, planned: Sequence[dict] | None) -> bool:
    """Whether the run should hold rows that ``entry`` matches (see :mod:`audit.check`)."""
    if planned is not None:
        return any(entry.expects(cell) for cell in planned)
    mine = frame[(frame["dataset"] == entry.dataset) & (frame["mech"] == entry.mech)]
    if entry.profile is not None and "profile" in mine.columns:
        mine = mine[mine["profile"] == entry.profile]
    return not mine.empty


def _missing(index: int, entry: Threshold, planned: Sequence[dict] | None) -> str:
    why = (
        "a sweep into this directory planned such a cell (unfinished or damaged: rerun it)"
        if planned is not None
        else f"the run has {entry.mech} rows of this dataset and profile"
    )
    return f"MISSING: threshold entry {index} ({entry.describe()}) matches no row, though {why}"


def check_dir(run_dir: Path, thresholds_path: Path) -> CheckResult:
    """The gate on the run in ``run_dir`` against the thresholds file at ``thresholds_path``."""
    thresholds = load_thresholds(thresholds_path)
    frame = read_runs(run_dir)
    if "profile" in frame.columns:
        frame["profile"] = frame["profile"].astype(object).where(frame["profile"].notna(), None)
    return check_runs(frame, thresholds, results.planned_cells(run_dir))


def format_violations(violations: Sequence[Violation]) -> str:
    """A plain-text table, one line per violation (a last column ``why`` where any violation
    has a note: the bound checks' correction)."""
    noted = any(v.note for v in violations)
    headers = (
        "dataset",
        "mech",
        "param",
        "seed",
        "attack",
        "distance",
        "metric",
        "observed",
        "limit",
        "tolerance",
    ) + (("why",) if noted else ())
    body = [
        (
            v.dataset,
            v.mech,
            v.param,
            str(v.seed),
            v.attack,
            v.distance,
            v.metric,
            f"{v.observed:.4f}",
            f"{v.limit:.4f}",
            f"{v.tolerance:.4f}",
        )
        + ((v.note,) if noted else ())
        for v in violations
    ]
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in (headers, *body)
    ]
    return "\n".join(line.rstrip() for line in lines)
