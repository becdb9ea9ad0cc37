"""The README is the manual: it links the reference of every column of ``runs.csv``
(``docs/rows.md``) and every page it links exists; it names no path outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

from audit.rows.row import COLLECTED_COLUMNS, COLUMNS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def undocumented(text: str) -> list[str]:
    """The columns of ``runs.csv`` that ``text`` never names in backquotes."""
    return [c for c in (*COLUMNS, *COLLECTED_COLUMNS) if f"`{c}`" not in text]


def broken_links(text: str, root: Path) -> list[str]:
    """Relative Markdown links in ``text`` whose file is not under ``root``."""
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    return [t for t in targets if not (root / t).is_file()]


def test_every_column_is_explained_and_a_missing_one_is_found():
    """The README links the column reference, ``docs/rows.md``, which names every column."""
    assert "(docs/rows.md)" in README
    reference = (ROOT / "docs" / "rows.md").read_text()
    assert undocumented(reference) == []
    assert undocumented(reference.replace("`phi_worst`", "phi_worst")) == ["phi_worst"]


def test_every_linked_page_exists_and_a_missing_one_is_found():
    assert broken_links(README, ROOT) == []
    assert broken_links("[x](docs/nowhere.md)", ROOT) == ["docs/nowhere.md"]


def test_no_path_outside_the_repository():
    assert "../" not in README
