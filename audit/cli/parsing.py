"""The one argparse parser class of the command line, and its shared argument types."""

from __future__ import annotations

import argparse
import math
from pathlib import Path


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" only where it informs: not to flags (store_true/false, count) and
    not where the help text already names the default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "default" in text
            or action.default in (None, argparse.SUPPRESS)
            or action.nargs == 0
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """argparse whose usage error is a ValueError: the command line prints it as one line and
    exits with status 2 (:func:`audit.cli.main.main`); ``--help`` still exits 0."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(f"{message} (see {self.prog} --help)")


def _int_or(word: str, text: str) -> int | None:
    """An integer, or None for ``word``."""
    if text == word:
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or {word!r}, got {text!r}") from None


def positive_int_or_all(text: str) -> int | None:
    """An integer, or None for 'all'."""
    return _int_or("all", text)


def int_or_auto(text: str) -> int | None:
    """An integer, or None for 'auto'."""
    return _int_or("auto", text)


def finite_float(text: str) -> float:
    """A finite number: ``nan`` and ``inf``, which ``float`` takes, are refused."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def path_arg(text: str) -> Path:
    """A path; an empty one, which ``Path`` would take as the current folder, is refused."""
    if text == "":
        raise argparse.ArgumentTypeError("expected a path, got an empty one")
    return Path(text)


def add_verbosity(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv)")
