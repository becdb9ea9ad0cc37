"""The report's lead: a compact table per setting, the worst-case figure with its band, the
per-attack detail (audit.report.headline), and the accuracy legend's chance level."""

from __future__ import annotations

import math

import pandas as pd

from audit.report.epsilon_figures import chance_line
from audit.report.headline import detail_table, headline_table, worst_case_figure
from audit.report.summaries import WORST_CASE
from audit.rows.derived import worst_case_rows


def _cell(mech, value, label, eps, mi_ap, worst, beyond, seed=0):
    """Two attack rows of one cell (reconstruction picked as its held-out worst case)."""
    common = {
        "dataset": "digits",
        "profile": "quick",
        "run_hash": "r",
        "mech": mech,
        "param_name": "noise_multiplier",
        "param_value": value,
        "param_label": label,
        "setting_hash": f"s-{label}",
        "config_hash": f"c-{label}-{seed}",
        "seed": seed,
        "epsilon": eps,
        "acc": 0.8,
        "acc_base": 0.1,
        "acc_majority": 0.12,
        "phi": math.nan,
        "phi_worst": 0.9,
        "worst_mi_ap": worst,
        "worst_mi_ap_low": worst - 0.05,
        "worst_mi_ap_high": worst + 0.05,
        "worst_mi_ap_null_q95": 0.66,
        "worst_beyond_chance": beyond,
        "worst_tpr_at_fpr_1pct": math.nan,
        "mi_ap_null_q95": 0.61,
        "tpr_at_fpr_1pct": math.nan,
        "tpr_note": "FPR 0.01: 50 non-members < 100 = 1/FPR: it would be TPR at zero FP",
        "epsilon_lower_attack": math.nan,
        "side_reference_records": 0,
        "side_reference_models": 0,
        "side_models_trained": "",
    }
    return [
        {
            **common,
            "attack": "reconstruction",
            "distance": "mse",
            "variant": "mean",
            "mi_ap": mi_ap,
            "mi_ap_low": mi_ap - 0.04,
            "mi_ap_high": mi_ap + 0.04,
            "mi_auc": mi_ap,
            "beyond_chance": mi_ap > 0.61,
            "worst_case": True,
            "attacker_sees": "encoder and decoder",
        },
        {
            **common,
            "attack": "monte-carlo",
            "distance": "monte-carlo:pixel-l2:share",
            "variant": "share",
            "mi_ap": 0.5,
            "mi_ap_low": 0.45,
            "mi_ap_high": 0.55,
            "mi_auc": 0.5,
            "beyond_chance": False,
            "worst_case": False,
            "attacker_sees": "samples only",
        },
    ]


def _frame() -> pd.DataFrame:
    rows = _cell("none", math.nan, "none", math.inf, 0.9, 0.88, True)
    rows += _cell("cdp", 1.0, "z=1", 5.0, 0.6, 0.58, False)
    frame = pd.DataFrame(rows)
    worst = worst_case_rows(frame).assign(distance=WORST_CASE)
    return pd.concat([frame, worst], ignore_index=True)


def test_headline_marks_a_worst_case_inside_the_band_with_its_interval():
    table = headline_table(_frame()).splitlines()
    assert len(table) == 4  # header, rule, one row per setting
    none, cdp = table[2], table[3]
    assert "0.880 [0.830, 0.930]" in none and "beyond chance" in none
    assert "0.580 [0.530, 0.630]" in cdp and "| at chance |" in cdp and "≤ 0.660" in cdp
    assert "mse (encoder and decoder)" in cdp
    assert "(privacy at chance)" in cdp and "majority 0.120" in cdp


def test_an_empty_phi_says_why():
    frame = pd.DataFrame(
        _cell("none", math.nan, "none", math.inf, 0.52, 0.51, False)
        + _cell("cdp", 1.0, "z=1", 5.0, 0.5, 0.5, False)
    ).assign(phi_worst=math.nan)
    note = "phi_worst: the non-private attack (MI AP 0.510) is not beyond its chance band"
    frame["phi_note"] = note
    frame = pd.concat([frame, worst_case_rows(frame).assign(distance=WORST_CASE)])
    cdp = headline_table(frame).splitlines()[3]
    assert "n/a (the non-private attack (MI AP 0.510) is not beyond its chance band)" in cdp
    assert "(privacy at chance)" not in cdp


def test_detail_table_has_a_row_per_attack_variant_and_says_why_tpr_is_empty():
    table = detail_table(_frame()).splitlines()
    assert len(table) == 2 + 4
    assert all("n/a (50 non-members < 100" in line for line in table[2:])
    assert any("samples only" in line and "at chance" in line for line in table[2:])


def test_worst_case_figure_shades_the_blind_attackers_band():
    fig = worst_case_figure(_frame(), title="t")
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert "at chance: below the blind attacker's 95 % quantile (0.660)" in labels
    assert "cdp" in labels and "non-private: 95 % interval" in labels
    assert len(ax.containers) == 1  # the cdp line's error bars (its interval)


def test_accuracy_legend_names_the_majority_share_where_it_is_the_chance_level():
    settings = pd.DataFrame({"acc_base": [0.05, 0.05], "acc_majority": [0.278, 0.278]})
    assert chance_line(settings) == (0.278, "chance (D_test's majority-class share)")
    assert chance_line(settings.drop(columns="acc_majority"))[1] == "chance (1 / #classes)"
