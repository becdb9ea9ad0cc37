"""How sure each row's attack numbers are: the columns a row gets from its raw scores.

:func:`result_columns` (one attack result) takes arrays only and :func:`worst_case_uncertainty`
the held-out worst case :func:`cell_worst_case` picked, so the sweep's cells and a user's own
release share them. What they compute lives in :mod:`attacks.uncertainty` (chance quantiles,
bootstrap intervals, TPR at a low FPR) and :mod:`audit.empirical.attack_bound` (the attack's
epsilon lower bound).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from attacks.attack import AttackResult
from attacks.metrics import FPR_01PCT, FPR_1PCT, AttackMetrics
from attacks.uncertainty import bootstrap_intervals, mi_ap_null, tpr_at_fpr_interval
from attacks.worst_case import WorstCase, held_out_worst_case
from audit.empirical.attack_bound import attack_epsilon_bound
from dpvae_core.seeding import Purpose, derive_seed

#: How a reader is told a row's ``beyond_chance``: its MI AP above the blind attacker's 95 %
#: quantile, or not (the release summary and the report's at-a-glance table).
BEYOND = "beyond chance"
AT_CHANCE = "at chance"


def beyond_chance(mi_ap: float, null_q95: float) -> bool | None:
    """MI AP above the blind attacker's 95 % quantile at the same counts (None if unknown)."""
    if math.isnan(mi_ap) or math.isnan(null_q95):
        return None
    return bool(mi_ap > null_q95)


def chance_columns(mi_ap: float, is_member: np.ndarray, prefix: str = "") -> dict[str, object]:
    """``<prefix>mi_ap_null_q50``, ``<prefix>mi_ap_null_q95`` and ``<prefix>beyond_chance``."""
    members = int(is_member.sum())
    null = mi_ap_null(members, int(is_member.size - members))
    return {
        f"{prefix}mi_ap_null_q50": null.q50,
        f"{prefix}mi_ap_null_q95": null.q95,
        f"{prefix}beyond_chance": beyond_chance(mi_ap, null.q95),
    }


def tpr_columns(scores: np.ndarray, is_member: np.ndarray) -> dict[str, object]:
    """TPR at FPR 1 % and 0.1 % (NaN below 1/FPR non-members) with Clopper-Pearson intervals,
    and ``tpr_note`` saying why a TPR is empty."""
    out: dict[str, object] = {}
    reasons = []
    for fpr, name in ((FPR_1PCT, "tpr_at_fpr_1pct"), (FPR_01PCT, "tpr_at_fpr_01pct")):
        t = tpr_at_fpr_interval(scores, is_member, fpr=fpr)
        out[name], out[f"{name}_low"], out[f"{name}_high"] = t.tpr, t.low, t.high
        if t.reason:
            reasons.append(f"FPR {fpr:g}: {t.reason}")
    out["tpr_note"] = "; ".join(reasons)
    return out


def result_columns(
    scores: np.ndarray,
    is_member: np.ndarray,
    *,
    seed: int,
    delta: float,
    independent: bool,
    claim_epsilon: float = math.nan,
) -> dict[str, object]:
    """Every uncertainty column of one attack result's row (the metrics themselves included).

    ``seed``: for the bootstrap and the bound's halving; ``delta`` and ``claim_epsilon``: the
    claim's (the bound's p-value is that of ``claim_epsilon``); ``independent``: whether D_atk's
    membership was drawn by independent fair coins (the bound's premise).
    """
    metrics = AttackMetrics.from_scores(scores, is_member)
    boot = bootstrap_intervals(scores, is_member, seed=seed)
    bound = attack_epsilon_bound(
        scores,
        is_member,
        delta=delta,
        seed=seed + 1,
        independent=independent,
        claim_epsilon=claim_epsilon,
    )
    return {
        "mi_ap": metrics.mi_ap,
        "mi_auc": metrics.mi_auc,
        **tpr_columns(scores, is_member),
        **chance_columns(metrics.mi_ap, is_member),
        "mi_ap_low": boot.mi_ap_low,
        "mi_ap_high": boot.mi_ap_high,
        "mi_auc_low": boot.mi_auc_low,
        "mi_auc_high": boot.mi_auc_high,
        **bound.columns(),
    }


def cell_worst_case(results: Sequence[AttackResult], *, seed: int) -> WorstCase | None:
    """The held-out worst case of one cell's results
    (:func:`attacks.worst_case.held_out_worst_case`, its split seeded from the cell's ``seed``);
    None where D_atk holds fewer than two members or non-members and cannot be halved. The
    sweep's rows and a release's summary both take it here."""
    is_member = results[0].is_member
    if min(int(is_member.sum()), int((~is_member).sum())) < 2:
        return None
    return held_out_worst_case(results, seed=derive_seed(seed, Purpose.ATTACK, "worst-case"))


def worst_case_uncertainty(worst: WorstCase) -> dict[str, object]:
    """The held-out worst case's columns, measured on its evaluation half: MI AP, its bootstrap
    interval and chance columns at that half's counts, and TPR at FPR 1 % (empty below 100
    non-members)."""
    scores, is_member = worst.scores, worst.is_member
    boot = bootstrap_intervals(scores, is_member, seed=worst.seed)
    tpr = tpr_at_fpr_interval(scores, is_member, fpr=FPR_1PCT)
    return {
        "worst_mi_ap": worst.metrics.mi_ap,
        "worst_mi_ap_low": boot.mi_ap_low,
        "worst_mi_ap_high": boot.mi_ap_high,
        **chance_columns(worst.metrics.mi_ap, is_member, prefix="worst_"),
        "worst_tpr_at_fpr_1pct": tpr.tpr,
    }
