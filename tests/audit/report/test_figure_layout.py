"""Every report figure stays readable at any sweep size (issue 36, part 4): rendered on synthetic
runs of 1, 3, 8 and 20 private settings with one attack result or every attack (17 results), and
on an attacked release (no epsilon), no text leaves the canvas, no legend holds more than 8
entries, no axes is narrower than a third of the figure, tick labels do not overlap and an epsilon
axis shows at least two labelled ticks (:mod:`tests.audit.report.layout_check`).

The frames carry the columns a sweep's rows have, and go through the report's own summaries
(``measure_labels``, ``with_worst_case``, ``setting_summary``, ``distance_summary``), so each figure
sees what :func:`audit.report.write_report` would hand it."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit.check import param_label
from audit.report.claim_vs_bound import audited_cells, claim_vs_bound_figure
from audit.report.curves import curve_figures
from audit.report.epsilon_figures import summary_figures
from audit.report.headline import worst_case_figure
from audit.report.summaries import (
    distance_summary,
    measure_labels,
    setting_summary,
    with_worst_case,
)
from audit.results import scores_key
from tests.audit.report.layout_check import assert_readable, problems

#: Every attack result a cell of ``--attack all`` reports: (attack, distance, variant).
EVERY_ATTACK = (
    ("reconstruction", "mse", "mean"),
    ("reconstruction", "ssim", "mean"),
    ("domias", "pca-kde", "log-ratio"),
    ("latent-search", "mse", "calibrated"),
    ("latent-search", "mse", "calibrated-nonprivate"),
    ("latent-search", "mse", "raw"),
    ("likelihood", "iwae-bernoulli", "calibrated"),
    ("likelihood", "iwae-bernoulli", "calibrated-nonprivate"),
    ("likelihood", "iwae-bernoulli", "lira-offline"),
    ("likelihood", "iwae-bernoulli", "lira-offline-nonprivate"),
    ("likelihood", "iwae-bernoulli", "raw"),
    ("monte-carlo", "pca-l2", "log-distance"),
    ("monte-carlo", "pca-l2", "nearest"),
    ("monte-carlo", "pca-l2", "share"),
    ("monte-carlo", "pixel-l2", "log-distance"),
    ("monte-carlo", "pixel-l2", "nearest"),
    ("monte-carlo", "pixel-l2", "share"),
)
ONE_ATTACK = EVERY_ATTACK[:1]
PARAMS = {
    "cdp": "noise_multiplier",
    "cdp-termwise": "noise_multiplier",
    "ldp": "eps_i",
    "vae-ldp": "sigma",
    "dp2vae": "noise_multiplier",
}
N_ATK = 40  # attacked records per cell: 20 members, 20 non-members


def _mechanisms(n: int) -> list[str]:
    """Which mechanism each of ``n`` settings uses: one mechanism up to 3 settings (their epsilons
    within one decade: the one-tick case), then 3, then all 5, the first holding the most."""
    if n <= 3:
        return ["cdp"] * n
    if n <= 8:
        return ["cdp"] * (n - 4) + ["ldp"] * 2 + ["vae-ldp"] * 2
    rest = ["cdp-termwise", "ldp", "vae-ldp", "dp2vae"]
    return ["cdp"] * (n - 3 * len(rest)) + [m for m in rest for _ in range(3)]


def _settings(n: int) -> list[tuple[str, float, float]]:
    """(mech, parameter value, epsilon) of ``n`` private settings: few settings sit within one
    decade of epsilon, many spread over nine decades (as a quick sweep's cdp z = 0.001..4)."""
    mechs = _mechanisms(n)
    out = []
    for mech in dict.fromkeys(mechs):
        k = mechs.count(mech)
        values = np.geomspace(0.5, 4.0, k) if n <= 3 else np.geomspace(0.001, 4.0, k)
        for value in values:
            eps = 20.0 / value if n <= 3 else 8.0 * value**-2.4
            out.append((mech, float(f"{value:.1g}"), float(f"{eps:.3g}")))
    return out


def _rows(mech, value, eps, seed, attacks, *, rng, release=False) -> list[dict]:
    """One cell's rows: one per attack result, its held-out worst case and audit columns."""
    private = mech != "none"
    if release or not private:
        strength = 0.2 if release else 0.45
    else:
        strength = float(np.clip(0.08 * math.log10(eps + 1), 0, 0.45))
    name = "" if release else PARAMS.get(mech, "none")
    label = "none" if not private or release else param_label(mech, name, value)
    cell = f"{mech}-{value:g}-{seed}".replace(".", "p")
    picked = int(rng.integers(len(attacks)))
    worst = 0.5 + strength * 0.9
    common = {
        "dataset": "digits",
        "profile": "quick",
        "run_hash": "run",
        "setting_hash": f"s-{mech}-{value:g}",
        "config_hash": cell,
        "mech": mech,
        "param_name": name,
        "param_value": value if private else math.nan,
        "param_label": label,
        "seed": seed,
        "epsilon": eps,
        "delta": 1e-5,
        "acc": (0.9 - 0.5 * math.exp(-eps / 20)) if not release else math.nan,
        "acc_base": 0.1,
        "acc_real": 0.93,
        "acc_majority": 0.12,
        "utility_valid": not release,
        "worst_mi_ap": worst,
        "worst_mi_ap_low": worst - 0.06,
        "worst_mi_ap_high": min(1.0, worst + 0.06),
        "worst_mi_ap_null_q95": 0.64,
        "worst_beyond_chance": worst > 0.64,
        "phi_worst": (1.2 - 0.1 * math.log10(eps + 1)) if private and not release else math.nan,
        "epsilon_lower": 0.3 * eps**0.5 if private and not release else math.nan,
        "epsilon_lower_estimator": "one-run",
        "epsilon_lower_fdp": 0.4 * eps**0.5 if private and not release else math.nan,
        "epsilon_lower_input_fdp": math.nan,
        "epsilon_lower_kind": "one-run",
        "epsilon_lower_m": 1000,
        "epsilon_lower_ceiling": 3.0 * eps**0.5,
        "epsilon_lower_input": math.nan,
        "epsilon_lower_input_m": math.nan,
    }
    rows = []
    for i, (attack, distance, variant) in enumerate(attacks):
        mi = float(np.clip(0.5 + strength * (1 - 0.04 * i) + rng.normal(0, 0.01), 0.3, 1.0))
        rows.append(
            {
                **common,
                "attack": attack,
                "distance": distance,
                "variant": variant,
                "mi_ap": mi,
                "mi_ap_low": mi - 0.05,
                "mi_ap_high": min(1.0, mi + 0.05),
                "mi_ap_null_q95": 0.61,
                "beyond_chance": mi > 0.61,
                "worst_case": i == picked,
                "phi": (1.3 - 0.1 * math.log10(eps + 1) - 0.01 * i) if private else math.nan,
                "attacker_sees": "encoder and decoder",
            }
        )
    return rows


def _frame(n_settings: int | str, attacks, seeds=(0,)) -> pd.DataFrame:
    """A run's rows as :func:`audit.report.summaries.load_runs` returns them."""
    rng = np.random.default_rng(n_settings if isinstance(n_settings, int) else 99)
    rows = []
    for seed in seeds:
        if n_settings == "release":
            rows += _rows("external", math.nan, math.nan, seed, attacks, rng=rng, release=True)
            continue
        rows += _rows("none", math.nan, math.inf, seed, attacks, rng=rng)
        for mech, value, eps in _settings(n_settings):
            rows += _rows(mech, value, eps, seed, attacks, rng=rng)
    frame = pd.DataFrame(rows)
    frame["distance"] = measure_labels(frame)
    return with_worst_case(frame)


def _write_scores(run_dir: Path, frame: pd.DataFrame) -> None:
    """cells/<hash>/scores.npz with every attack result's scores, as a cell writes them."""
    is_member = np.repeat([True, False], N_ATK // 2)
    for h, rows in frame[frame["attack"] != "worst-case"].groupby("config_hash"):
        rng = np.random.default_rng(len(h))
        arrays = {}
        for r in rows.itertuples():
            raw = r.distance.split(":")[1] if ":" in r.distance else r.distance
            shift = 4 * (r.mi_ap - 0.5)
            arrays[scores_key(r.attack, raw, r.variant)] = (
                rng.normal(size=N_ATK) + shift * is_member
            )
        (run_dir / "cells" / h).mkdir(parents=True, exist_ok=True)
        np.savez(run_dir / "cells" / h / "scores.npz", is_member=is_member, **arrays)


SIZES = (1, 3, 8, 20)


@functools.cache
def _figures(n_settings, n_measures, tmp: str) -> dict:
    """Every figure the report draws for one synthetic run, by stem (the writer's calls)."""
    attacks = EVERY_ATTACK if n_measures == 17 else ONE_ATTACK
    seeds = (0, 1) if n_settings == 8 else (0,)  # intervals over seeds, too
    frame = _frame(n_settings, attacks, seeds)
    run_dir = Path(tmp) / f"run-{n_settings}-{n_measures}"
    _write_scores(run_dir, frame)
    name = f"digits, profile quick ({n_settings} settings)"
    skipped: list[str] = []
    figures = {"worst_case": worst_case_figure(frame, title=f"{name}: held-out worst case vs ε")}
    figures.update(
        summary_figures(setting_summary(frame), distance_summary(frame), name=name, skipped=skipped)
    )
    figures.update(curve_figures(run_dir, frame, name=name, skipped=skipped))
    audited = audited_cells(frame)
    if not audited.empty:
        title = f"{name}: claimed ε vs empirical lower bound"
        figures["claim_vs_bound"] = claim_vs_bound_figure(audited, title=title)
    return figures


#: Which figure is checked at which number of attack results: every figure at one and at every
#: attack where its layout depends on them, else at one (the same figure, drawn twice as slowly).
CHECKED = {
    "worst_case": (1,),
    "accuracy_vs_epsilon": (1,),
    "mi_ap_vs_epsilon": (1, 17),
    "mi_ap_by_attack": (17,),
    "phi": (1, 17),
    "attack_curves_mse": (1,),
    "attack_curves_worst_case": (1, 17),
    "claim_vs_bound": (1,),
}
#: An attacked release has no epsilon: its worst case is drawn per attack (or not at all).
RELEASE_CHECKED = {"worst_case": (1, 17), "attack_curves_worst_case": (17,)}

PARAMETERS = [
    pytest.param(n, m, stem, id=f"{stem}-{n}x{m}")
    for stem, counts in CHECKED.items()
    for n in SIZES
    for m in counts
] + [
    pytest.param("release", m, stem, id=f"{stem}-releasex{m}")
    for stem, counts in RELEASE_CHECKED.items()
    for m in counts
]


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("figures"))


@pytest.mark.parametrize(("n_settings", "n_measures", "stem"), PARAMETERS)
def test_figure_is_readable(tmp, n_settings, n_measures, stem):
    figures = _figures(n_settings, n_measures, tmp)
    assert stem in figures, f"no {stem} figure (drawn: {sorted(figures)})"
    fig = figures[stem]
    if fig is None:  # an attacked release has no epsilon: no figure rather than empty axes
        assert n_settings == "release" and stem == "worst_case"
        return
    assert_readable(fig, max_legend_entries=8)


def test_the_checker_finds_what_it_is_for():
    """Text past the edge, a long legend, a narrow axes and a one-tick log axis are caught."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter

    fig = Figure(figsize=(4, 3))
    left, right = fig.subplots(1, 4)[:2]
    for k in range(9):
        left.plot([0, 1], [k, k], label=f"line {k}")
    left.legend()
    right.set_xscale("log")
    right.set_xlim(2, 30)  # one power of ten inside, minor ticks unlabelled: one labelled tick
    right.xaxis.set_minor_formatter(NullFormatter())
    right.text(0.5, 1.5, "far above the canvas", transform=right.transAxes)
    fig.suptitle("a title")
    fig.text(0.5, 0.98, "printed over the title", ha="center", va="top")
    found = "\n".join(problems(fig))
    assert "leaves the figure" in found and "far above the canvas" in found
    assert "a legend has 9 entries" in found
    assert "of the figure's width" in found
    assert "fewer than 2" in found
    left.set_xlabel("privacy budget ε (log scale)")
    assert "x axis of 'an axes' says 'log scale' but is linear" in "\n".join(problems(fig))
    assert "'a title' and 'printed over the title' overlap" in found
