"""The one logging set-up of the command line (library code only logs)."""

from __future__ import annotations

import logging
import warnings


def configure_logging(verbosity: int) -> None:
    """WARNING by default, INFO with -v, DEBUG with -vv; library warnings hidden by default."""
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    # force: opacus calls logging.basicConfig on import, which would make this a no-op
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", force=True)
    if verbosity == 0:
        warnings.filterwarnings("ignore")
