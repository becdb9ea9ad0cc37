"""What the report leaves out is said twice: as a logged warning and as a line of ``report.md``'s
"Skipped" section."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def skip(skipped: list[str], message: str) -> None:
    """Log ``message`` as a warning and append it to ``skipped`` (the report's list)."""
    log.warning("%s", message)
    skipped.append(message)
