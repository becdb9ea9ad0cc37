"""The ``report`` and ``check`` subcommands of ``benchmark.py`` (argument parsing and output only).

  benchmark.py report DIR [--out REPORT_DIR] [--format png pdf] [--limits 0.55 0.6 0.75]
  benchmark.py check --thresholds FILE DIR
  benchmark.py check --calibrate DIR [DIR ...] --write FILE [--sigmas 3] [--tolerance 0.02]
                     [--source-command CMD ...]

A usage error raises ValueError, which ``benchmark.main`` prints as one 'error:' line (status 2).
"""

from __future__ import annotations

import argparse
import logging
import warnings
from collections.abc import Sequence
from pathlib import Path

from audit.gate import DEFAULT_SIGMAS, DEFAULT_TOLERANCE_FLOOR

COMMANDS = ("report", "check")
IMAGE_FORMATS = ("png", "pdf", "svg")


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors become ValueError (one line, status 2, in benchmark.main)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(f"{message} (see {self.prog} --help)")


def _verbosity(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv)")


def build_report_parser() -> argparse.ArgumentParser:
    from audit.report import FORMATS, MI_AP_LIMITS, REPORT_DIR

    p = _Parser(
        prog="benchmark.py report",
        allow_abbrev=False,
        description="Tables, sweet spots and figures (paper 003, Figures 3-6) from the rows of "
        "DIR/cells/ (DIR/runs.csv where there are no cells); damaged cells are named and skipped.",
    )
    p.add_argument("dir", type=Path, metavar="DIR", help="a sweep's output directory")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="REPORT_DIR",
        help=f"where the report goes (default DIR/{REPORT_DIR})",
    )
    p.add_argument(
        "--format",
        nargs="+",
        default=list(FORMATS),
        choices=IMAGE_FORMATS,
        dest="formats",
        help=f"figure file formats (default: {' '.join(FORMATS)})",
    )
    p.add_argument(
        "--limits",
        nargs="+",
        type=float,
        metavar="AP",
        default=list(MI_AP_LIMITS),
        help="MI AP limits of the sweet-spot table, paper 003 Section 5.2 (default: "
        + " ".join(f"{x:g}" for x in MI_AP_LIMITS)
        + ")",
    )
    p.add_argument(
        "--data-home",
        type=Path,
        default=None,
        help="where downloadable datasets (LFW, MotionSense) live, for the grids",
    )
    p.add_argument(
        "--no-images",
        dest="images",
        action="store_false",
        help="skip the reconstruction and sample grids (image grids, or line plots for "
        "series; they reload the data and the models)",
    )
    _verbosity(p)
    return p


def build_check_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="benchmark.py check",
        allow_abbrev=False,
        description="CI gate: compare every row of the run in DIR (read from DIR/cells/) with a "
        "thresholds file (exit 1 on any violation, or on an entry without the rows the run "
        "should have), or calibrate a thresholds file from measured sweeps.",
    )
    p.add_argument(
        "dir", type=Path, nargs="?", metavar="DIR", help="the sweep to check (with --thresholds)"
    )
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--thresholds", type=Path, metavar="FILE", help="thresholds JSON to enforce")
    mode.add_argument(
        "--calibrate",
        type=Path,
        nargs="+",
        metavar="DIR",
        help="sweep directories (e.g. several seeds) to calibrate thresholds from",
    )
    p.add_argument("--write", type=Path, metavar="FILE", help="calibration: the file to write")
    p.add_argument(
        "--source-command",
        action="append",
        default=None,
        metavar="CMD",
        help="calibration: the sweep command the runs came from (repeat for several); needed "
        "only where the runs' cells do not record it",
    )
    p.add_argument(
        "--sigmas",
        type=float,
        default=None,
        metavar="K",
        help=f"calibration: limits = mean +- k sd (default {DEFAULT_SIGMAS:g})",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=None,
        metavar="FLOOR",
        help="calibration: tolerance floor stored in every entry "
        f"(default {DEFAULT_TOLERANCE_FLOOR:g})",
    )
    _verbosity(p)
    return p


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", force=True)
    if verbosity == 0:
        warnings.filterwarnings("ignore")


def run_report(args: argparse.Namespace) -> int:
    from audit.report import write_report

    report = write_report(
        args.dir,
        args.out,
        formats=args.formats,
        limits=args.limits,
        data_home=args.data_home,
        images=args.images,
    )
    skipped = f"; {len(report.skipped)} note(s) on skipped figures in it" if report.skipped else ""
    print(
        f"report written to {report.markdown} ({len(report.figures)} figure files in "
        f"{report.out_dir}{skipped})"
    )
    return 0


def run_check(args: argparse.Namespace) -> int:
    from audit.gate import check_dir, format_violations

    if args.dir is None:
        raise ValueError("check --thresholds FILE needs the sweep directory DIR")
    if any(x is not None for x in (args.write, args.sigmas, args.tolerance, args.source_command)):
        raise ValueError(
            "--write, --sigmas, --tolerance and --source-command belong to --calibrate"
        )
    result = check_dir(args.dir, args.thresholds)
    if result.violations:
        print(format_violations(result.violations))
    for line in result.missing:
        print(line)
    if not result.passed:
        print(
            f"FAILED: {len(result.violations)} violation(s), {len(result.missing)} threshold "
            f"entr{'y' if len(result.missing) == 1 else 'ies'} without the rows the run should "
            f"have; {result.n_checked} rows checked against {result.n_thresholds} thresholds"
        )
    else:
        print(f"OK: {result.n_checked} rows checked against {result.n_thresholds} thresholds")
    if result.unchecked:
        print(
            f"unchecked: {len(result.unchecked)} row(s) match no threshold entry, e.g. "
            f"{result.unchecked[0]}"
        )
    other = [i for i in result.unused_entries if i not in result.missing_entries]
    if other:
        print(f"note: threshold entries {other} match no row (not expected of this run)")
    return 0 if result.passed else 1


def run_calibrate(args: argparse.Namespace) -> int:
    from audit.gate import calibrate, write_thresholds

    if args.dir is not None:
        raise ValueError(
            f"check --calibrate takes its directories after --calibrate; got an "
            f"extra DIR {str(args.dir)!r}"
        )
    if args.write is None:
        raise ValueError("check --calibrate needs --write FILE (where the thresholds go)")
    sigmas = DEFAULT_SIGMAS if args.sigmas is None else args.sigmas
    tolerance = DEFAULT_TOLERANCE_FLOOR if args.tolerance is None else args.tolerance
    doc = calibrate(
        args.calibrate,
        sigmas=sigmas,
        tolerance=tolerance,
        source_commands=args.source_command or (),
    )
    write_thresholds(args.write, doc)
    print(
        f"thresholds written to {args.write}: {len(doc['entries'])} entries from "
        f"{len(args.calibrate)} sweep director{'y' if len(args.calibrate) == 1 else 'ies'}"
    )
    return 0


def run_command(name: str, argv: Sequence[str]) -> int:
    """Run subcommand ``name`` (report or check) with its arguments; returns the exit status."""
    if name == "report":
        args = build_report_parser().parse_args(list(argv))
        _configure_logging(args.verbose)
        return run_report(args)
    if name == "check":
        args = build_check_parser().parse_args(list(argv))
        _configure_logging(args.verbose)
        return run_calibrate(args) if args.calibrate else run_check(args)
    raise ValueError(f"unknown command {name!r}; choose one of: {', '.join(COMMANDS)}")
