"""The CI gate: every row of a run against a thresholds file, and its calibration.

Thresholds file (JSON, ``schema_version`` 1)::

    {"schema_version": 1,
     "description": "free text (optional)",
     "entries": [
       {"dataset": "lfw-subset", "profile": "quick", "mech": "none", "param_value": null,
        "attack": "reconstruction", "distance": "any", "min_mi_ap": 0.5, "max_mi_ap": null,
        "min_acc": 0.5, "tolerance": 0.02, "margin_source": "how the numbers were chosen"}]}

An entry matches a row when dataset and mech are equal, ``profile`` is null or equal,
``param_value`` is null (any value; the baseline has none) or equal, ``attack`` is equal (an
entry without one means ``reconstruction``, the attack of every row before rows named theirs),
and ``distance`` is ``"any"`` or equal. Every matching entry is enforced (so a specific entry can
tighten a general one):

- ``max_mi_ap`` (private mechanisms only): fails when MI AP > max_mi_ap + tolerance;
- ``min_mi_ap`` (the baseline ``none`` only): fails when MI AP < min_mi_ap - tolerance, so that an
  attack that silently broke (MI AP at chance everywhere) cannot pass as "private";
- ``min_acc``: fails when accuracy < min_acc - tolerance. A floor that cannot fail, one with
  ``min_acc - tolerance`` at or below chance accuracy (1 / #classes, ``chance_acc`` in the entry,
  or the row's ``acc_base``), is refused: calibration drops it instead (``min_acc`` null and
  ``min_acc_dropped`` saying why).

``source_commands`` (optional): the sweep command(s) whose runs the file was calibrated from, so
that it can be reproduced.

Whatever the thresholds, a row fails where an empirical lower bound on epsilon shows its claim
false (:func:`~audit.check.checking.bound_violations`): each bound is a test of the claim at 95 %,
and a run holds up to 5 bound columns on every attack row, so the checks actually made (one per
cell for the cell's audit, one per row for each attack's own bound) are corrected together by
Holm's step-down procedure on their p-values (the ``*_p`` columns): the chance that a run whose
claims all hold fails any of them is at most 5 %. A failing line names the correction, the
p-value and the number of checks; a row from before the p-values is checked uncorrected (its
bound above its claim), and its line says so.

A NaN observation fails any limit that applies to it. Rows that no entry matches are reported as
unchecked; a file that matches no row at all is an error, so a misconfigured gate cannot pass.

Rows are read from the run's cells (:func:`audit.results.load_rows`), not from ``runs.csv``; a
damaged cell is named in a warning and its rows are missing. An entry that matches no row fails
the gate when the run *should* have had its rows:

- the run has a manifest (``run.json``, written by every sweep): when some cell a sweep into the
  directory planned has the entry's dataset, profile (if set), mech, param_value (if set) and
  attack, so a sweep of only some mechanisms or grid values (the CI's series cells) is held only
  to its own cells, and an unfinished or damaged cell fails every entry that covers it;
- no manifest (``runs.csv`` alone): when the run has rows of the entry's dataset, profile (if
  set) and mech at all.

Other entries that match no row (other datasets, mechanisms the run did not include) are noted.

Modules: :mod:`~audit.check.thresholds` (the file: schema, parsing, writing),
:mod:`~audit.check.checking` (a run against thresholds), :mod:`~audit.check.threshold_calibration`
(thresholds from measured runs).
"""

from audit.check.checking import (
    CHECK_COLUMNS,
    CheckResult,
    Violation,
    check_dir,
    check_runs,
    format_violations,
    param_label,
    read_runs,
)
from audit.check.threshold_calibration import DEFAULT_SIGMAS, DEFAULT_TOLERANCE_FLOOR, calibrate
from audit.check.thresholds import (
    THRESHOLDS_SCHEMA_VERSION,
    Threshold,
    load_thresholds,
    parse_thresholds,
    write_thresholds,
)

__all__ = [
    "CHECK_COLUMNS",
    "DEFAULT_SIGMAS",
    "DEFAULT_TOLERANCE_FLOOR",
    "THRESHOLDS_SCHEMA_VERSION",
    "CheckResult",
    "Threshold",
    "Violation",
    "calibrate",
    "check_dir",
    "check_runs",
    "format_violations",
    "load_thresholds",
    "param_label",
    "parse_thresholds",
    "read_runs",
    "write_thresholds",
]
