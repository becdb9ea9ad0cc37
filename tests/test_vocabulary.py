"""One word, one meaning (docs/glossary.md), held where a test can hold it.

- **One definition per public name.** No two public top-level definitions in the library
  packages share a name: a function, a class or a module-level name bound by assignment, in any
  module of ``dpvae_core``, ``models``, ``attacks`` or ``audit``. Imports are not definitions, so
  a package's ``__init__.py`` re-exporting a name (``from audit.results.cells import cell_rows``)
  is the same definition seen from elsewhere. Names starting with ``_`` are private to their
  module; methods and class attributes are not top-level (``Attack.run_release`` of every attack
  is one protocol). Skipped as plumbing, not vocabulary: a ``TypeVar`` (``T = TypeVar("T")`` is
  local to the signatures of its module), a module logger (``log = logging.getLogger(...)``) and
  ``__all__``.
- **Allowed duplicates** (:data:`ALLOWED`): ``NAME``, ``SPEC`` and ``RANGES`` of the dataset
  modules under ``audit/datasets/``. The catalog reads every dataset's declaration as
  ``module.SPEC`` (``audit.datasets.catalog``), so each module declares its own name, spec and
  (a sensor dataset) fixed channel ranges under the same words: one role, read with the module's
  name (``motionsense.RANGES``).
- **The command line's words.** The help of ``benchmark.py`` and of each subcommand says "audit"
  only for the empirical lower bound on epsilon (the ``audit`` command, ``--canary-audit``):
  ``benchmark.py attack`` attacks a release, it does not audit one; and names a paper by its
  short title (docs/glossary.md, "The papers"), never by its file number ("paper 003").

Each check is shown to fail on a planted case.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dpvae_core", "models", "attacks", "audit")
#: name -> the folder whose modules may each define it (see the module docstring).
ALLOWED = {"NAME": "audit/datasets", "SPEC": "audit/datasets", "RANGES": "audit/datasets"}
COMMANDS = ("", "epsilon", "audit", "attack", "report", "check")


def _is_plumbing(node: ast.Assign | ast.AnnAssign) -> bool:
    """A TypeVar or a module logger."""
    value = node.value
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("TypeVar", "getLogger")


def _top_level(body: list[ast.stmt]):
    """The statements of a module's top level, those inside a top-level if/try included."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _top_level(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            handlers = [s for h in node.handlers for s in h.body]
            yield from _top_level(node.body + handlers + node.orelse + node.finalbody)
        else:
            yield node


def public_definitions(path: Path) -> set[str]:
    """The public names ``path`` defines at its top level (imports excluded)."""
    names: set[str] = set()
    for node in _top_level(ast.parse(path.read_text(), filename=str(path)).body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign) and not _is_plumbing(node):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and (node.value is None or not _is_plumbing(node))
        ):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def duplicate_definitions(root: Path) -> dict[str, list[str]]:
    """name -> the modules (paths relative to ``root``) defining it, where more than one does and
    :data:`ALLOWED` does not cover them all."""
    where: dict[str, list[str]] = defaultdict(list)
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for name in public_definitions(path):
                where[name].append(path.relative_to(root).as_posix())
    return {
        name: paths
        for name, paths in sorted(where.items())
        if len(paths) > 1
        and not (name in ALLOWED and all(p.startswith(ALLOWED[name] + "/") for p in paths))
    }


def test_no_two_public_definitions_share_a_name():
    assert duplicate_definitions(ROOT) == {}


def test_the_duplicate_check_can_fail(tmp_path: Path):
    """A planted duplicate is caught; re-exports, private names, methods, TypeVars, loggers and
    the dataset modules' NAME/SPEC are not."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "audit" / "datasets").mkdir()
    (tmp_path / "audit" / "a.py").write_text(
        "import logging\nfrom typing import TypeVar\nT = TypeVar('T')\n"
        "log = logging.getLogger(__name__)\n"
        "def load_model(): ...\nclass Thing:\n    def run(self): ...\n_private = 1\n"
    )
    (tmp_path / "audit" / "__init__.py").write_text("from audit.a import load_model\n")
    (tmp_path / "models" / "b.py").write_text(
        "import logging\nfrom typing import TypeVar\nT = TypeVar('T')\n"
        "log = logging.getLogger(__name__)\n"
        "class Other:\n    def run(self): ...\n_private = 2\nCONFIDENCE: float = 0.95\n"
    )
    for name in ("one", "two"):
        (tmp_path / "audit" / "datasets" / f"{name}.py").write_text(
            f"NAME = {name!r}\nSPEC = None\n"
        )
    assert duplicate_definitions(tmp_path) == {}
    (tmp_path / "attacks" / "c.py").write_text(
        "try:\n    CONFIDENCE = 0.9\nexcept Exception:\n    pass\n"
    )
    (tmp_path / "dpvae_core" / "d.py").write_text("if True:\n    def load_model(): ...\n")
    (tmp_path / "models" / "spec.py").write_text("SPEC = 1\n")
    assert duplicate_definitions(tmp_path) == {
        "CONFIDENCE": ["models/b.py", "attacks/c.py"],
        "SPEC": ["models/spec.py", "audit/datasets/one.py", "audit/datasets/two.py"],
        "load_model": ["dpvae_core/d.py", "audit/a.py"],
    }


# ---- the command line's words ------------------------------------------------------------------

#: "audit" beside "release" (either order, up to three words apart), once package paths such
#: as ``audit.release.ExternalModel`` are taken out.
_AUDIT_NEAR_RELEASE = re.compile(
    r"\baudit\w*\W+(?:\w+\W+){0,3}?releases?\b|\breleases?\W+(?:\w+\W+){0,3}?audit\w*",
    re.IGNORECASE,
)
_PACKAGE_PATH = re.compile(r"\baudit(?:\.\w+)+")
_PAPER_NUMBER = re.compile(r"\bpapers?\s+0\d\d\b", re.IGNORECASE)


def misused_words(text: str) -> list[str]:
    """The places where help text calls a release attack an audit, or names a paper by number."""
    plain = _PACKAGE_PATH.sub("PACKAGE", " ".join(text.split()))
    found = [m.group(0) for m in _AUDIT_NEAR_RELEASE.finditer(plain)]
    return found + [m.group(0) for m in _PAPER_NUMBER.finditer(plain)]


def help_text(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    import benchmark

    argv = [command, "--help"] if command else ["--help"]
    assert benchmark.main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_help_says_audit_only_for_the_empirical_bound(command: str, capsys):
    text = help_text(command, capsys)
    assert len(text) > 200  # the help itself, not an error line
    assert misused_words(text) == []


def test_the_word_check_can_fail():
    assert misused_words("Audit a release you made yourself: every attack") == ["Audit a release"]
    assert misused_words("a folder of audited\n   releases (benchmark.py attack)") == [
        "audited releases"
    ]
    assert misused_words("phi of paper 003's Eq. 2; Papers 004 and 002") == [
        "paper 003",
        "Papers 004",
    ]
    kept = "an audit.release.ExternalModel; --canary-audit: each cell's empirical audit"
    assert misused_words(kept) == []
