"""Each mechanism and each attack owns what it knows; every other module asks the registries.

- No registered mechanism or attack name is a string literal outside its own module and its
  registry (:func:`named_literals` reads the library's source: docstrings are text, not
  literals; a string that means something else is allowed in :data:`ALLOWED` with its reason).
- A throwaway mechanism and a throwaway attack, defined here and registered with one call each,
  reach the sweep's plan, the command line's choices and checks, the report's labels and
  colours, the gate's thresholds and the empirical audits without any other module changing.

Adding a mechanism is its module (``audit/mechanisms/<name>.py``) and one ``register(...)`` line
in ``audit/mechanisms/__init__.py``; adding an attack is its module (``attacks/<name>.py``) and
one entry in ``attacks/registry.py``; each with its tests and docs.
"""

from __future__ import annotations

import argparse
import ast
import math
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import torch

from attacks.monte_carlo import MonteCarloAttack
from attacks.registry import (
    available_attacks,
    get_attack,
    register_attack,
    sweep_attacks,
    unregister_attack,
)
from attacks.threat import ReleaseKind
from audit import mechanisms
from audit.attack_plan import check_requested, plan_attacks
from audit.check import param_label
from audit.check.thresholds import Threshold
from audit.cli.audit_request import AuditRequest, build_audit_parser
from audit.cli.run_command import build_run_parser, config_from_args
from audit.config import CellConfig
from audit.empirical.cell_audit import audit_cell, audited_mechanisms, local_mechanisms
from audit.empirical.local import LocalAudit, audit_laplace_series
from audit.mechanisms import (
    BASELINE,
    CellData,
    Mechanism,
    Trained,
    available_mechanisms,
    get_mechanism,
    register,
    unregister,
)
from audit.privacy.claim import PrivacyClaim
from audit.profiles import PROFILES, ProfileName
from audit.report.figure_style import family_color, family_order, mech_color, point_label
from audit.report.summaries import ordered
from audit.sweep.plan import build_cells, check_sweep

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("audit", "attacks")
"""The packages that may name a mechanism or an attack (``models`` and ``dpvae_core`` sit below
both registries and cannot import them)."""
GREY = ((0.5, 0.5, 0.5), (0.45, 0.45, 0.45))

ALLOWED: dict[tuple[str, str], tuple[int, str]] = {
    ("audit/datasets/split.py", "none"): (1, "the word: a split that holds no class"),
    ("audit/empirical/one_run_settings.py", "none"): (1, "Broken.NONE: no test-only breakage"),
    ("audit/options.py", "none"): (1, "the word: a mechanism without options"),
    ("audit/release/release_attack.py", "none"): (2, "the word: no reference records, no samples"),
}
"""(file, literal): (how many, why) of the literals equal to a registered name that mean
something else."""

STYLE_KEYWORDS = frozenset(
    {"linestyle", "ls", "facecolor", "facecolors", "markerfacecolor", "edgecolor", "color"}
)
"""Keyword arguments whose value ``"none"`` is matplotlib's (no line, no fill), not the baseline."""


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings: a module's, class's or function's
    first statement, and the attribute docstrings (a bare string statement in any body)."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        for statement in body if isinstance(body, list) else []:
            if (
                isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            ):
                found.add(id(statement.value))
    return found


def _style_values(tree: ast.AST) -> set[int]:
    """The ids of string constants passed as a matplotlib style keyword (:data:`STYLE_KEYWORDS`)."""
    return {
        id(keyword.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for keyword in node.keywords
        if keyword.arg in STYLE_KEYWORDS and isinstance(keyword.value, ast.Constant)
    }


def named_literals(
    root: Path, names: Mapping[str, set[str]], packages: tuple[str, ...] = LIBRARY
) -> list[tuple[str, int, str]]:
    """(file, line, literal) of every string literal equal to a key of ``names`` in the
    ``packages`` under ``root``, outside the files ``names[literal]`` (relative paths) that own
    it; docstrings and matplotlib style keywords are not counted."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text(), filename=rel)
            skip = _docstrings(tree) | _style_values(tree)
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and node.value in names
                    and id(node) not in skip
                    and rel not in names[node.value]
                ):
                    found.append((rel, node.lineno, node.value))
    return sorted(found)


def _source(obj: object) -> str:
    return Path(sys.modules[obj.__module__].__file__).relative_to(ROOT).as_posix()


def owners() -> dict[str, set[str]]:
    """{registered name: the files that may spell it}: the module of the class that declares
    it, and its registry."""
    owned = {
        name: {_source(type(get_mechanism(name))), "audit/mechanisms/__init__.py"}
        for name in available_mechanisms()
    }
    for name in available_attacks():
        owned.setdefault(name, set()).update({_source(get_attack(name)), "attacks/registry.py"})
    return owned


def unexplained(found: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """``found`` less the literals :data:`ALLOWED` explains, file by file (a file with more or
    fewer than allowed keeps all of its)."""
    counts: dict[tuple[str, str], int] = {}
    for rel, _, literal in found:
        counts[rel, literal] = counts.get((rel, literal), 0) + 1
    return [
        (rel, line, literal)
        for rel, line, literal in found
        if ALLOWED.get((rel, literal), (None,))[0] != counts[rel, literal]
    ]


def test_no_mechanism_or_attack_name_is_spelled_outside_its_module_and_registry():
    found = unexplained(named_literals(ROOT, owners()))
    assert found == [], (
        "mechanism or attack names spelled outside their modules (ask the registries: "
        "audit.mechanisms.BASELINE / get_mechanism, attacks.registry; or, where the string means "
        f"something else, add it to ALLOWED with its reason): {found}"
    )


def test_every_allowed_literal_is_still_there():
    found = named_literals(ROOT, owners())
    for (rel, literal), (count, _) in ALLOWED.items():
        assert sum(1 for f, _, x in found if (f, x) == (rel, literal)) == count, (rel, literal)


def test_the_count_catches_a_planted_literal(tmp_path: Path):
    (tmp_path / "audit" / "report").mkdir(parents=True)
    (tmp_path / "attacks").mkdir()
    (tmp_path / "attacks" / "mine.py").write_text('NAME = "mine"\n')
    (tmp_path / "audit" / "report" / "labels.py").write_text(
        '"""Labels of cdp and of the mine attack."""\n'
        'LABELS = {"cdp": "noise multiplier z"}\n'
        'WORD = "cdp"\n'
        '"""An attribute docstring that says cdp, and ``"cdp"``."""\n'
        'def f(ax):\n    """cdp"""\n    ax.plot([], linestyle="none")\n    return f"{ax}cdp"\n'
        'ATTACK = "mine"\n'
    )
    names = {"cdp": {"audit/mechanisms/cdp.py"}, "mine": {"attacks/mine.py"}, "none": set()}
    assert named_literals(tmp_path, names) == [
        ("audit/report/labels.py", 2, "cdp"),
        ("audit/report/labels.py", 3, "cdp"),
        ("audit/report/labels.py", 8, "cdp"),  # a piece of an f-string counts too
        ("audit/report/labels.py", 9, "mine"),
    ]


def test_an_allowed_literal_counts_only_up_to_its_number():
    one = [("audit/options.py", 3, "none")]
    assert unexplained(one) == []
    assert unexplained([*one, ("audit/options.py", 9, "none")]) == [
        *one,
        ("audit/options.py", 9, "none"),
    ]


# --- a throwaway mechanism and a throwaway attack, registered with one call each -------------


class Throwaway(Mechanism):
    """A mechanism that exists only in this test: non-private training (the default), a claim of
    1 / s, and the Laplace series audit as its local audit."""

    name = "throwaway"
    param_name = "noise_scale"
    param_symbol = "s"
    param_label = "noise scale s"
    param_description = "throwaway noise scale s"
    default_grid = (1.0, 2.0)

    def claim(self, cell: CellConfig, data: CellData, trained: Trained) -> PrivacyClaim:
        return PrivacyClaim(
            epsilon=1.0 / cell.param_value, delta=0.0, method="throwaway", accountant="test"
        )

    def local_audits(self, cell, data, *, draws, seed, delta=None, every=False):
        return (audit_laplace_series(eps_i=1.0 / cell.param_value, draws=draws, seed=seed),)


class ThrowawayAttack(MonteCarloAttack):
    """An attack that exists only in this test (Monte Carlo's scores under another name)."""

    name = "throwaway-attack"


@pytest.fixture
def throwaways() -> Iterator[None]:
    register(Throwaway())
    register_attack(ThrowawayAttack)
    try:
        yield
    finally:
        unregister(Throwaway.name)
        unregister_attack(ThrowawayAttack.name)


def _sweep(tmp_path: Path, attacks=None, report: bool = False):
    args = build_run_parser().parse_args(
        ["--dataset", "digits", "--mech", "throwaway", "--seeds", "0", "--out", str(tmp_path)]
        + ["--precision", "float32"]  # cells are built from it: no "auto" (resolved by a sweep)
        + (["--attack", *attacks] if attacks else [])
        + ([] if report else ["--no-report"])
    )
    return config_from_args(args)


def test_the_registries_refuse_the_throwaways_until_they_are_registered():
    with pytest.raises(ValueError, match="unknown mechanism 'throwaway'; choose one of: none, "):
        get_mechanism("throwaway")
    with pytest.raises(ValueError, match="unknown attack 'throwaway-attack'"):
        get_attack("throwaway-attack")
    with pytest.raises(ValueError, match="is not a registered attack"):
        check_requested(["throwaway-attack"])
    with pytest.raises(ValueError, match="mech 'throwaway' is unknown"):
        Threshold("digits", "throwaway", 1.0, "mse", 0.05, "test", max_mi_ap=0.9)


def test_no_library_module_names_the_throwaways():
    names = {Throwaway.name: set(), ThrowawayAttack.name: set()}
    assert named_literals(ROOT, names) == []
    for package in LIBRARY:
        for path in (ROOT / package).rglob("*.py"):
            assert Throwaway.__name__ not in path.read_text(), path


def test_a_registered_mechanism_and_attack_reach_the_sweeps_plan(throwaways, tmp_path):
    assert available_mechanisms()[-1] == "throwaway" and sweep_attacks()[-1] == "throwaway-attack"
    config = _sweep(tmp_path)
    assert config.mechs == ("throwaway",)
    check_sweep(config)
    cells = [cell for cell, _ in build_cells(config, data_sha256="a" * 64)]
    private = [c for c in cells if c.mech == "throwaway"]
    assert [(c.param_name, c.param_value) for c in private] == [
        ("noise_scale", 1.0),
        ("noise_scale", 2.0),
    ]
    assert all(c.attacks[-1] == "throwaway-attack" for c in cells)  # baseline's cells too
    plan = plan_attacks(None, {BASELINE: ReleaseKind.WHOLE_VAE, "dp": ReleaseKind.DECODER_ONLY})
    assert "throwaway-attack" in plan["dp"]  # its threat: Monte Carlo's needs (samples)
    only = _sweep(tmp_path, attacks=["throwaway-attack"])
    assert {c.attacks for c, _ in build_cells(only, data_sha256="a" * 64)} == {
        ("throwaway-attack",)
    }


def test_the_command_lines_offer_and_check_the_throwaways(throwaways, tmp_path):
    help_text = build_run_parser().format_help()
    assert "throwaway" in help_text and "throwaway-attack" in help_text
    assert "noise scale s for throwaway" in " ".join(help_text.split())
    parser = build_audit_parser()
    args = parser.parse_args(["--mech", "throwaway", "--grid", "2", "--draws", "50"])
    request = AuditRequest.from_args(args)  # a local audit: --draws applies
    assert request.mech == "throwaway"
    with pytest.raises(ValueError, match="apply to cdp, cdp-termwise, dp2vae only"):
        AuditRequest.from_args(argparse.Namespace(**{**vars(args), "canaries": 10}))


def test_the_report_and_the_gate_label_the_throwaways(throwaways):
    assert point_label("throwaway") == "noise scale s"
    assert param_label("throwaway", "noise_scale", 2.0) == "s=2"
    colours = [mech_color(m) for m in mechanisms.private_mechanisms()]
    assert colours[-1] not in GREY and len(set(map(str, colours))) == len(colours)
    assert family_color("throwaway-attack") not in GREY
    assert family_order(["mse", "throwaway-attack:pixel-l2:share"])[-1] == "throwaway-attack"
    import pandas as pd

    frame = pd.DataFrame(
        {"mech": ["throwaway", "dp2vae", BASELINE], "epsilon": [1.0] * 3, "param_value": [1.0] * 3}
    )
    assert list(ordered(frame)["mech"]) == [BASELINE, "dp2vae", "throwaway"]
    entry = Threshold("digits", "throwaway", 1.0, "mse", 0.05, "test", max_mi_ap=0.9)
    assert entry.mech == "throwaway"


def test_the_audits_ask_the_mechanism(throwaways):
    assert "throwaway" in audited_mechanisms() and "throwaway" in local_mechanisms()
    profile = PROFILES[ProfileName.QUICK]
    cell = CellConfig(
        "digits", "throwaway", "noise_scale", 2.0, 0, profile, (("profile_name", "quick"),)
    )
    series = torch.zeros(4, 8, 3)
    pair = (series, torch.zeros(4, dtype=torch.long))
    data = CellData(train=pair, val=pair, test=pair, num_classes=2, n_total=12)
    claim = PrivacyClaim(epsilon=0.5, delta=0.0, method="throwaway", accountant="test")
    from dataclasses import replace

    audited = audit_cell(replace(cell, audit=True), data, None, claim)
    assert audited.kind == "local-worst-case" and audited.m == 10**4
    assert math.isfinite(audited.bound) and 0 <= audited.bound <= claim.epsilon  # fixed seed
    assert audit_cell(cell, data, None, claim).kind == ""  # --canary-audit not set
    assert isinstance(Throwaway().local_audits(cell, data, draws=100, seed=0)[0], LocalAudit)


@pytest.mark.slow
def test_a_sweep_of_the_throwaways_writes_their_rows_and_report(throwaways, tmp_path):
    from audit.results import load_rows
    from benchmark import main

    tiny = ["--epochs", "2", "--max-train", "30", "--attack-samples", "3"]
    tiny += ["--classifier-epochs", "2", "--classifier-patience", "1", "--latent-dim", "4"]
    argv = ["--dataset", "digits", "--mech", "throwaway", "--seeds", "0", "--grid", "2"]
    argv += ["--attack", "reconstruction", "throwaway-attack", "--no-progress"]
    assert main([*argv, *tiny, "--out", str(tmp_path)]) == 0
    rows = load_rows(tmp_path, ("mech", "attack", "param_value"))
    assert set(rows["mech"]) == {BASELINE, "throwaway"}
    assert set(rows["attack"]) == {"reconstruction", "throwaway-attack"}
    report = (tmp_path / "report" / "report.md").read_text()
    assert "| throwaway | s=2 |" in report  # its setting, labelled by its parameter's symbol
    assert "throwaway-attack:" in report  # its measures, in the per-attack table
    assert list((tmp_path / "report").glob("*-reconstructions_throwaway.png"))
