"""``benchmark.py``: dispatch to the subcommand; bad input is one ``error:`` line and status 2.

  python benchmark.py [--dataset NAME] [--mech MECH ...] [--profile quick|standard|paper] ...
  python benchmark.py epsilon ...        privacy accounting on demand (prints a bare number last)
  python benchmark.py audit ...          empirical epsilon lower bound (prints a bare number last)
  python benchmark.py attack ...         attack a release made outside the suite (audit.release)
  python benchmark.py report DIR         tables and plots from DIR's cells
  python benchmark.py check --thresholds FILE DIR    the CI gate on MI AP and accuracy

An incomplete sweep (cells that failed) exits 1; an interrupt 130 (finished cells are kept).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence


def _subcommand(name: str) -> Callable[[Sequence[str]], int]:
    if name == "epsilon":
        from audit.cli.epsilon_command import epsilon_main

        return epsilon_main
    if name == "attack":
        from audit.cli.attack_command import attack_main

        return attack_main
    if name == "audit":
        from audit.cli.audit_command import audit_main

        return audit_main
    from audit.cli.results_commands import run_command

    return lambda argv: run_command(name, argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    from audit.cli.run_command import run_main
    from dpvae_core.allocator import keep_freed_memory

    keep_freed_memory()  # freed memory stays in the process (dpvae_core.allocator)
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in ("epsilon", "audit", "attack", "report", "check"):
            return _subcommand(argv[0])(argv[1:])
        return run_main(argv)
    except ValueError as exc:  # includes DatasetUnavailable: bad input, one line, status 2
        _error(exc)
        return 2
    except RuntimeError as exc:
        from audit.sweep.jobs import SweepIncomplete

        if not isinstance(exc, SweepIncomplete):
            raise
        _error(exc)
        return 1
    except SystemExit as exc:  # argparse --help (0)
        return exc.code if isinstance(exc.code, int) else 2
    except KeyboardInterrupt:
        print(
            "interrupted; finished cells are kept, rerun the same command to resume",
            file=sys.stderr,
        )
        return 130


def _error(exc: Exception) -> None:
    """The one ``error:`` line: line breaks in the message (a user's exception text) become
    spaces, and a path that is no valid UTF-8 (an undecodable byte from the command line) is
    written with backslash escapes rather than failing to print."""
    line = " ".join(f"error: {exc}".split("\n"))
    print(line.encode("utf-8", "backslashreplace").decode("utf-8"), file=sys.stderr)
