"""The layers point one way: ``dpvae_core`` imports none of the project's packages, ``models`` and
``attacks`` never import ``audit``, and no module imports itself through a chain of others.

The imports are read from the source (every ``import`` statement, at module level or inside a
function), so the test needs no package to be importable and sees lazy imports too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dpvae_core", "models", "attacks", "audit")
#: package -> the project packages it must not import
FORBIDDEN = {
    "dpvae_core": {"models", "attacks", "audit"},
    "models": {"attacks", "audit"},
    "attacks": {"audit"},
}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path) -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            found[module_name(path, root)] = path
    return found


def imported_modules(path: Path, name: str, known: set[str]) -> set[str]:
    """The project modules ``path`` (module ``name``) imports: ``from a.b import c`` counts as
    ``a.b.c`` where that is a module, else as ``a.b``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                out.add(full if full in known else target)
    return {m for m in out if m in known}


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = project_modules(root)
    known = set(modules)
    return {name: imported_modules(path, name, known) - {name} for name, path in modules.items()}


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, targets in sorted(graph.items()):
        banned = FORBIDDEN.get(module.split(".")[0], set())
        bad += [f"{module} imports {t}" for t in sorted(targets) if t.split(".")[0] in banned]
    return bad


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (a list of modules, first == last), or None (iterative DFS)."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    for start in sorted(graph):
        if state.get(start):
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child) :] + [child]
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph[child]))))
    return None


def test_models_attacks_and_dpvae_core_never_import_the_layers_above():
    assert layer_violations(import_graph(ROOT)) == []


def test_no_import_cycle():
    assert find_cycle(import_graph(ROOT)) is None


def test_the_checks_can_fail(tmp_path: Path):
    """A planted upward import and a planted cycle are both caught (so the checks above can
    fail)."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "models" / "vae.py").write_text("from audit.sweep import run_sweep\n")
    (tmp_path / "audit" / "sweep.py").write_text("from . import report\n")
    (tmp_path / "audit" / "report.py").write_text("import audit.sweep\n")
    graph = import_graph(tmp_path)
    assert layer_violations(graph) == ["models.vae imports audit.sweep"]
    assert find_cycle(graph) == ["audit.report", "audit.sweep", "audit.report"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_is_read(package: str):
    assert any(m.split(".")[0] == package for m in project_modules(ROOT))


def duplicate_module_names(root: Path) -> dict[str, list[str]]:
    """File names (``__init__`` aside) that more than one module of the packages uses."""
    seen: dict[str, list[str]] = {}
    for name in project_modules(root):
        stem = name.rsplit(".", 1)[-1]
        if name not in PACKAGES and not (root / name.replace(".", "/")).is_dir():
            seen.setdefault(stem, []).append(name)
    return {stem: names for stem, names in seen.items() if len(names) > 1}


def test_no_two_modules_share_a_name():
    assert duplicate_module_names(ROOT) == {}


def test_duplicate_names_are_found(tmp_path: Path):
    for package in ("models", "audit"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "termwise.py").write_text("")
    (tmp_path / "dpvae_core").mkdir()
    (tmp_path / "attacks").mkdir()
    assert duplicate_module_names(tmp_path) == {"termwise": ["models.termwise", "audit.termwise"]}
