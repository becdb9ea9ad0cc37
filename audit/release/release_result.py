"""What a user's release attack found: its rows, a table and a summary."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from attacks.dcr import DcrResult
from audit.release.release_summary import cell_summary, one_line, summary_frame
from audit.results import run_hash, setting_hash
from audit.results.layout import SORT_KEYS
from audit.rows.row import Row


@dataclass(frozen=True, repr=False)
class ReleaseAttack:
    """What :func:`attack_release` produced.

    Read it with :meth:`table` (the rows of ``runs.csv``, a DataFrame) and :meth:`summary` (one
    line per threat model: the strongest attack, the held-out worst case with its interval, the
    verdict, the utility and DCR); its repr is a few lines.

    Attributes:
        rows: one :class:`~audit.rows.row.Row` per attack result.
        dcr: the DCR baseline (None without samples).
        scores: every result's scores (``scores_<attack>_<distance>_<variant>``) and
            ``is_member``, as the cell's ``scores.npz`` holds them.
        cell_dir: the release's cell (None where no ``out`` was given).
        report: the ``report.md`` written (None where no ``out`` was given).
        canonical: the cell's canonical config (its ``config.json``).
    """

    rows: tuple[Row, ...]
    dcr: DcrResult | None
    scores: dict[str, np.ndarray]
    cell_dir: Path | None = None
    report: Path | None = None
    canonical: dict = field(default_factory=dict)

    def table(self) -> pd.DataFrame:
        """The release's rows as ``runs.csv`` holds them (its columns, in its order, and its
        ``utility_valid``; ``run_hash``, ``setting_hash`` and ``precision`` from the cell's
        config), one per attack result."""
        frame = pd.DataFrame([row.to_dict() for row in self.rows])
        frame["run_hash"] = run_hash(self.canonical)
        frame["setting_hash"] = setting_hash(self.canonical)
        frame["precision"] = self.canonical.get("options", {}).get("precision", "float32")
        frame = frame.sort_values(SORT_KEYS, na_position="first").reset_index(drop=True)
        return frame

    def summary(self) -> pd.DataFrame:
        """One line per threat model (samples only, decoder only, encoder and decoder, those
        the release allows), each over its own attacks and the weaker models':
        :func:`audit.release.release_summary.summary_frame`."""
        scores = dict(self.scores)
        is_member = scores.pop("is_member")
        return summary_frame(self.table(), lambda digest: (is_member, scores))

    @property
    def name(self) -> str:
        return self.rows[0].dataset if self.rows else ""

    def __repr__(self) -> str:
        if not self.rows:
            return "ReleaseAttack(no rows)"
        first = self.rows[0]
        widest = pd.DataFrame(cell_summary(self.table(), None)).tail(1)
        lines = [
            f"ReleaseAttack {first.dataset!r}: {len(self.rows)} attack results on "
            f"{first.attack_members} + {first.attack_nonmembers} records, seed {first.seed}",
            "  " + one_line(widest),
            "  " + _utility_words(first) + "; " + _dcr_words(self.dcr),
        ]
        if self.report is not None:
            lines.append(f"  report: {self.report}")
        lines.append("  .table(): the rows of runs.csv; .summary(): one line per threat model")
        return "\n".join(lines)


def _utility_words(row: Row) -> str:
    if not math.isfinite(row.acc):
        return "utility not measured (no test set)"
    valid = "above chance" if row.utility_valid else "not above chance"
    return f"utility acc {row.acc:.3f} on {row.n_test} test records ({valid})"


def _dcr_words(dcr: DcrResult | None) -> str:
    if dcr is None:
        return "DCR not computed (no samples)"
    verdict = "passes" if dcr.passes else "fails"
    return (
        f"DCR {verdict} (share {dcr.share_closer_to_members:.3f} closer to a member, "
        f"expected {dcr.expected_share:.3f}, p = {dcr.p_value:.3g})"
    )
