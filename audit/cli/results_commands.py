"""The ``report`` and ``check`` subcommands of ``benchmark.py`` (argument parsing and output only).

  benchmark.py report DIR [--out REPORT_DIR] [--format png pdf] [--limits 0.55 0.6 0.75]
  benchmark.py check --thresholds FILE DIR
  benchmark.py check --calibrate DIR [DIR ...] --write FILE [--sigmas 3] [--tolerance 0.02]
                     [--source-command CMD ...]

A usage error raises ValueError, which :func:`audit.cli.main.main` prints as one 'error:' line
(status 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from audit.check import DEFAULT_SIGMAS, DEFAULT_TOLERANCE_FLOOR
from audit.cli.logs import configure_logging
from audit.cli.parsing import Parser, add_verbosity, finite_float, path_arg
from dpvae_core.path_checks import (
    check_input_dir,
    check_input_file,
    check_output_dir,
    check_output_file,
)

COMMANDS = ("report", "check")
IMAGE_FORMATS = ("png", "pdf", "svg")


def build_report_parser() -> argparse.ArgumentParser:
    from audit.report import FORMATS, MI_AP_LIMITS, REPORT_DIR

    p = Parser(
        prog="benchmark.py report",
        allow_abbrev=False,
        description="Tables, sweet spots and figures (the trade-off paper, Figures 3-6) from the "
        "rows of DIR/cells/ (DIR/runs.csv where there are no cells); damaged cells are named and "
        "skipped. A folder of attacked releases (benchmark.py attack) gets its release report "
        "again.",
    )
    p.add_argument("dir", type=path_arg, metavar="DIR", help="a sweep's output directory")
    p.add_argument(
        "--out",
        type=path_arg,
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
        type=finite_float,
        metavar="AP",
        default=list(MI_AP_LIMITS),
        help="MI AP limits of the sweet-spot table (the trade-off paper's Section 5.2; default: "
        + " ".join(f"{x:g}" for x in MI_AP_LIMITS)
        + ")",
    )
    p.add_argument(
        "--data-home",
        type=path_arg,
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
    add_verbosity(p)
    return p


def build_check_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="benchmark.py check",
        allow_abbrev=False,
        description="CI gate: compare every row of the run in DIR (read from DIR/cells/) with a "
        "thresholds file (exit 1 on any violation, or on an entry without the rows the run "
        "should have), or calibrate a thresholds file from measured sweeps.",
    )
    p.add_argument(
        "dir",
        type=path_arg,
        nargs="?",
        metavar="DIR",
        help="the sweep to check (with --thresholds)",
    )
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--thresholds", type=path_arg, metavar="FILE", help="thresholds JSON to enforce"
    )
    mode.add_argument(
        "--calibrate",
        type=path_arg,
        nargs="+",
        metavar="DIR",
        help="sweep directories (e.g. several seeds) to calibrate thresholds from",
    )
    p.add_argument("--write", type=path_arg, metavar="FILE", help="calibration: the file to write")
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
        type=finite_float,
        default=None,
        metavar="K",
        help=f"calibration: limits = mean +- k sd (default {DEFAULT_SIGMAS:g})",
    )
    p.add_argument(
        "--tolerance",
        type=finite_float,
        default=None,
        metavar="FLOOR",
        help="calibration: tolerance floor stored in every entry "
        f"(default {DEFAULT_TOLERANCE_FLOOR:g})",
    )
    add_verbosity(p)
    return p


@dataclass(frozen=True)
class ReportRequest:
    """``benchmark.py report``: which run, where the report goes, what it draws."""

    run_dir: Path
    out: Path | None
    formats: tuple[str, ...]
    limits: tuple[float, ...]
    data_home: Path | None
    images: bool


@dataclass(frozen=True)
class CheckRequest:
    """``benchmark.py check --thresholds FILE DIR``."""

    run_dir: Path
    thresholds: Path


@dataclass(frozen=True)
class CalibrateRequest:
    """``benchmark.py check --calibrate DIR ... --write FILE``."""

    run_dirs: tuple[Path, ...]
    write: Path
    sigmas: float
    tolerance: float
    source_commands: tuple[str, ...]


def report_request(args: argparse.Namespace) -> ReportRequest:
    """The report's request; its paths are checked first (nothing is created)."""
    check_input_dir(args.dir, "DIR", kind="sweep's output directory")
    if args.out is not None:
        check_output_dir(args.out, "--out")
    if args.data_home is not None:
        check_input_dir(args.data_home, "--data-home")
    return ReportRequest(
        run_dir=args.dir,
        out=args.out,
        formats=tuple(args.formats),
        limits=tuple(args.limits),
        data_home=args.data_home,
        images=args.images,
    )


def check_request(args: argparse.Namespace) -> CheckRequest | CalibrateRequest:
    """The gate's request: a check against thresholds, or a calibration."""
    if args.calibrate:
        if args.dir is not None:
            raise ValueError(
                f"check --calibrate takes its directories after --calibrate; got an "
                f"extra DIR {str(args.dir)!r}"
            )
        if args.write is None:
            raise ValueError("check --calibrate needs --write FILE (where the thresholds go)")
        if args.write.is_dir():
            raise ValueError(
                f"--write {str(args.write)!r} is a directory; give the thresholds FILE to "
                f"write, e.g. {str(args.write / 'thresholds.json')!r}"
            )
        check_output_file(args.write, "--write")
        for run_dir in args.calibrate:
            check_input_dir(run_dir, "--calibrate", kind="sweep's output directory")
        return CalibrateRequest(
            run_dirs=tuple(args.calibrate),
            write=args.write,
            sigmas=DEFAULT_SIGMAS if args.sigmas is None else args.sigmas,
            tolerance=DEFAULT_TOLERANCE_FLOOR if args.tolerance is None else args.tolerance,
            source_commands=tuple(args.source_command or ()),
        )
    if args.dir is None:
        raise ValueError("check --thresholds FILE needs the sweep directory DIR")
    if any(x is not None for x in (args.write, args.sigmas, args.tolerance, args.source_command)):
        raise ValueError(
            "--write, --sigmas, --tolerance and --source-command belong to --calibrate"
        )
    check_input_file(args.thresholds, "--thresholds", kind="thresholds file")
    check_input_dir(args.dir, "DIR", kind="sweep's output directory")
    return CheckRequest(run_dir=args.dir, thresholds=args.thresholds)


def run_report(request: ReportRequest) -> int:
    """The report of ``request.run_dir``: a release report where the folder holds attacked
    releases (``benchmark.py attack``: cells of mech ``external``), else a sweep's."""
    from audit.release.release_rows import release_dir_kind

    kind = release_dir_kind(request.run_dir)
    if kind == "mixed":
        raise ValueError(
            f"{str(request.run_dir)!r} holds both a sweep's cells and attacked releases; a "
            "report covers one or the other (attack each release into a folder of its own)"
        )
    if kind == "release":
        from audit.release.release_report import write_release_report

        report = write_release_report(request.run_dir, request.out, formats=request.formats)
    else:
        from audit.report import write_report

        report = write_report(
            request.run_dir,
            request.out,
            formats=request.formats,
            limits=request.limits,
            data_home=request.data_home,
            images=request.images,
        )
    skipped = f"; {len(report.skipped)} note(s) on skipped figures in it" if report.skipped else ""
    print(
        f"report written to {report.markdown} ({len(report.figures)} figure files in "
        f"{report.out_dir}{skipped})"
    )
    if getattr(report, "sweet_spots", None) is not None:
        from audit.report.sweet_spots import recommendation_lines

        for line in recommendation_lines(report.sweet_spots):
            print(f"recommended: {line}")
    for line in report.unfinished:
        print(f"missing: {line}")
    return 1 if report.unfinished else 0


def run_check(request: CheckRequest) -> int:
    from audit.check import check_dir, format_violations

    result = check_dir(request.run_dir, request.thresholds)
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


def run_calibrate(request: CalibrateRequest) -> int:
    from audit.check import calibrate, write_thresholds

    doc = calibrate(
        request.run_dirs,
        sigmas=request.sigmas,
        tolerance=request.tolerance,
        source_commands=request.source_commands,
    )
    write_thresholds(request.write, doc)
    n = len(request.run_dirs)
    print(
        f"thresholds written to {request.write}: {len(doc['entries'])} entries from "
        f"{n} sweep director{'y' if n == 1 else 'ies'}"
    )
    return 0


def run_command(name: str, argv: Sequence[str]) -> int:
    """Run subcommand ``name`` (report or check) with its arguments; returns the exit status."""
    if name == "report":
        args = build_report_parser().parse_args(list(argv))
        configure_logging(args.verbose)
        return run_report(report_request(args))
    if name == "check":
        args = build_check_parser().parse_args(list(argv))
        configure_logging(args.verbose)
        request = check_request(args)
        if isinstance(request, CalibrateRequest):
            return run_calibrate(request)
        return run_check(request)
    raise ValueError(f"unknown command {name!r}; choose one of: {', '.join(COMMANDS)}")
