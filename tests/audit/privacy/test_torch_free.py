"""audit/privacy is torch-free: privacy maths from parameters to (epsilon, delta) imports neither
torch nor anything that does; the noise itself lives in audit/mechanisms.

Each module's imports are read with ``ast`` (module level and nested), and first-party imports
(``audit.*``, ``core.*``) are followed, so a torch import one module away is found too.

Opacus: only its RDP analysis, ``opacus.accountants.analysis.rdp``, is allowed. That module
itself is numpy and scipy only, but importing it runs ``opacus/__init__.py``, which imports torch:
at run time the accountant still loads torch. The rule is about what this package's code
depends on; vendoring Opacus's RDP analysis would make the run time torch-free as well, at the
cost of a copy that could drift from the function the numbers were pinned with.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "audit" / "privacy"
FIRST_PARTY = ("audit", "core")
FORBIDDEN = ("torch", "opacus", "torchvision", "models", "attacks", "audit.mechanisms")
ALLOWED = {"opacus.accountants.analysis.rdp", "opacus.accountants.analysis"}


def _imports(path: Path) -> set[str]:
    """Dotted names of every module ``path`` imports, anywhere in the file."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            # ``from a.b import c`` may import the module a.b.c
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _module_file(name: str, root: Path) -> Path | None:
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _forbidden(name: str) -> bool:
    if name in ALLOWED:
        return False
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def _violations(start: Path, root: Path = ROOT) -> list[str]:
    """``file: name`` for each forbidden import reachable from ``start`` through our modules."""
    seen: set[Path] = set()
    todo = [start]
    found: list[str] = []
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in sorted(_imports(path)):
            if _forbidden(name):
                found.append(f"{path.relative_to(root)}: {name}")
            elif name.split(".")[0] in FIRST_PARTY and (target := _module_file(name, root)):
                todo.append(target)
                # importing a.b.c runs a/__init__.py and a/b/__init__.py first
                parts = name.split(".")
                for i in range(1, len(parts)):
                    if parent := _module_file(".".join(parts[:i]), root):
                        todo.append(parent)
    return found


MODULES = sorted(PACKAGE.glob("*.py"))


def test_every_module_is_checked():
    assert {p.stem for p in MODULES} >= {
        "accountant",
        "events",
        "rdp",
        "dp_sgd_accounting",
        "pixelization",
    }


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_module_is_torch_free(path):
    assert _violations(path) == []


def test_the_check_can_fail(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "__init__.py").write_text("")
    (tmp_path / "core" / "helper.py").write_text("def f():\n    import torch.nn\n")
    start = tmp_path / "maths.py"
    start.write_text(
        "import math\nfrom core.helper import f\nfrom opacus import GradSampleModule\n"
    )
    assert _violations(start, tmp_path) == [
        "maths.py: opacus",
        "maths.py: opacus.GradSampleModule",
        "core/helper.py: torch.nn",  # nested, one module away
    ]
    assert not _forbidden("opacus.accountants.analysis.rdp")
    assert _forbidden("audit.mechanisms.laplace_noise")
