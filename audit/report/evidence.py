"""A setting's evidence for the sweet spots: its held-out worst case, its strongest single attack,
its accuracy against chance, and the records it would need to certify a limit."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from attacks.uncertainty import mi_ap_null
from audit.report.stats import t_interval
from audit.report.summaries import SETTING, WORST_CASE, ordered
from audit.rows.tradeoff import above_chance, chance_accuracy

#: Simulated blind attackers per count pair in the power calculation (a coarser null than the
#: rows' 20,000: the answer is a record count quoted as "about").
POWER_DRAWS = 2_000


#: Held-out per-class counts beyond which the power calculation extrapolates (the 95 % quantile's
#: excess over 0.5 shrinks as 1/sqrt(count)) instead of simulating.
POWER_MAX_EXACT = 10_000


@dataclass(frozen=True)
class Evidence:
    """What one setting's rows say about it, pooled over its seeds."""

    setting_hash: str
    mech: str
    param_label: str
    param_value: float
    epsilon: float
    delta: float
    seeds: int
    worst_mi_ap: float
    worst_mi_ap_low: float
    worst_mi_ap_high: float
    floor: float  # the blind attacker's 95 % quantile at the held-out half's counts
    attacked: int  # |D_atk| of one seed
    strongest_attack: str  # the attack row with the highest lower end
    strongest_mi_ap: float
    strongest_mi_ap_low: float
    acc: float
    acc_low: float
    acc_high: float
    chance: float
    acc_above_chance: bool


def _count(values: pd.Series) -> int:
    """The largest count in ``values`` (0 where unknown)."""
    top = values.astype(float).max()
    return int(top) if math.isfinite(top) else 0


def _first(rows: pd.DataFrame, column: str, default: float = math.nan) -> float:
    if column not in rows:
        return default
    values = rows[column].astype(float).dropna()
    return float(values.iloc[0]) if not values.empty else default


def _bounds(values: np.ndarray, lows: np.ndarray, highs: np.ndarray) -> tuple[float, float]:
    """The 95 % interval of the mean of ``values`` over seeds (see the module): one seed, its
    bootstrap interval; several, the wider of the t-interval and the mean bootstrap ends."""
    if values.size == 0:
        return math.nan, math.nan
    if values.size == 1:
        return (
            float(lows[0]) if lows.size else math.nan,
            float(highs[0]) if highs.size else math.nan,
        )
    ci = t_interval(values)
    low = min(ci.mean - ci.half_width, float(np.mean(lows)) if lows.size else math.inf)
    high = max(ci.mean + ci.half_width, float(np.mean(highs)) if highs.size else -math.inf)
    return max(0.0, low), min(1.0, high)  # MI AP lies in [0, 1]


def _accuracy(cells: pd.DataFrame) -> tuple[float, float, float, float, bool]:
    """(mean accuracy, its 95 % interval, chance, above chance) over one setting's cells (one
    row each): one seed, the Clopper-Pearson interval on its test records; several, the wider
    of that interval on the pooled test records and the t-interval over seeds (seeds train
    different models, so their spread counts too). Above chance: the exact binomial test of
    :func:`above_chance` on the pooled records and, with several seeds, the t-interval's lower
    end above chance as well."""
    acc = cells["acc"].astype(float)
    chance = max(
        chance_accuracy(float(b), float(m))
        for b, m in zip(cells["acc_base"], cells["acc_majority"], strict=True)
    )
    n_test = cells["n_test"].astype(float)
    ok = acc.notna() & n_test.notna() & (n_test >= 1)
    if not ok.any():
        return float(acc.mean()), math.nan, math.nan, chance, False
    k = int(sum(round(a * n) for a, n in zip(acc[ok], n_test[ok], strict=True)))
    n = int(n_test[ok].sum())
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    low, high = ci.low, ci.high
    useful = above_chance(k / n, n_test=n, chance=chance)
    if ok.sum() > 1:
        spread = t_interval(acc[ok].to_numpy())
        low = max(0.0, min(low, spread.mean - spread.half_width))
        high = min(1.0, max(high, spread.mean + spread.half_width))
        useful = useful and spread.mean - spread.half_width > chance
    return float(acc[ok].mean()), low, high, chance, useful


#: Columns the evidence reads that older rows may lack (read as unknown: NaN).
_OPTIONAL = (
    "mi_ap_low",
    "mi_ap_high",
    "mi_ap_null_q95",
    "attack_members",
    "attack_nonmembers",
    "n_test",
    "acc_majority",
    "acc_base",
    "delta",
)


def setting_evidence(frame: pd.DataFrame) -> list[Evidence]:
    """One :class:`Evidence` per setting of one report section (rows as
    :func:`audit.report.summaries.load_runs` gives them, worst-case rows included), in the
    report's order."""
    missing = [c for c in _OPTIONAL if c not in frame.columns]
    if missing:  # rows of older code, or a bare runs.csv: unknown, so nothing can qualify
        frame = frame.assign(**dict.fromkeys(missing, math.nan))
    out = []
    attacks = frame[frame["distance"] != WORST_CASE]
    worst_rows = frame[frame["distance"] == WORST_CASE]
    for _, rows in ordered(attacks).groupby(list(SETTING), dropna=False, sort=False):
        setting = rows["setting_hash"].iloc[0]
        worst = worst_rows[worst_rows["setting_hash"] == setting]
        cells = rows.drop_duplicates("config_hash")
        if not worst.empty:
            values = worst["mi_ap"].astype(float).to_numpy()
            lows = worst["mi_ap_low"].astype(float).dropna().to_numpy()
            highs = worst["mi_ap_high"].astype(float).dropna().to_numpy()
            floor = float(worst["mi_ap_null_q95"].astype(float).max())
        else:  # D_atk too small to split: the largest MI AP over attacks, its own interval
            per_seed = rows.loc[rows.groupby("seed")["mi_ap"].idxmax()]
            values = per_seed["mi_ap"].astype(float).to_numpy()
            lows = per_seed["mi_ap_low"].astype(float).dropna().to_numpy()
            highs = per_seed["mi_ap_high"].astype(float).dropna().to_numpy()
            floor = float(rows["mi_ap_null_q95"].astype(float).max())
        attack_lows = rows["mi_ap_low"].astype(float)
        top = rows.loc[attack_lows.idxmax()] if attack_lows.notna().any() else rows.iloc[0]
        acc, acc_low, acc_high, chance, useful = _accuracy(cells)
        worst_low, worst_high = _bounds(values, lows, highs)
        out.append(
            Evidence(
                setting_hash=str(setting),
                mech=str(rows["mech"].iloc[0]),
                param_label=str(rows["param_label"].iloc[0]),
                param_value=_first(rows, "param_value"),
                epsilon=float(cells["epsilon"].astype(float).mean()),
                delta=_first(rows, "delta"),
                seeds=int(rows["seed"].nunique()),
                worst_mi_ap=float(np.mean(values)) if values.size else math.nan,
                worst_mi_ap_low=worst_low,
                worst_mi_ap_high=worst_high,
                floor=floor,
                attacked=_count(cells["attack_members"]) + _count(cells["attack_nonmembers"]),
                strongest_attack=str(top["distance"]),
                strongest_mi_ap=float(top["mi_ap"]),
                strongest_mi_ap_low=float(top.get("mi_ap_low", math.nan)),
                acc=acc,
                acc_low=acc_low,
                acc_high=acc_high,
                chance=chance,
                acc_above_chance=useful,
            )
        )
    return out


def records_to_certify(limit: float, *, draws: int = POWER_DRAWS) -> int | None:
    """About how many attacked records (members + non-members, half of them members) a run
    needs for ``limit`` to be certifiable: the smallest D_atk whose held-out half's blind
    attacker has a 95 % quantile at most ``limit``. None where ``limit`` <= 0.5 (never).

    Power calculation from the null band: the quantile's excess over 0.5 shrinks as
    1/sqrt(count), so a count k0 with excess e0 is scaled to k0 (e0 / (limit - 0.5))^2 and the
    quantile simulated again there (:func:`attacks.uncertainty.mi_ap_null`), until it holds;
    beyond :data:`POWER_MAX_EXACT` per class the scaling alone answers.
    """
    if not limit > 0.5:
        return None
    k = 8
    for _ in range(12):
        q95 = mi_ap_null(k, k, draws=draws).q95
        if q95 <= limit:
            # step back down while the smaller count still holds (the scaling overshoots)
            step = max(1, k // 20)
            while k > 2 and mi_ap_null(k - step, k - step, draws=draws).q95 <= limit:
                k -= step
                step = max(1, k // 20)
            break
        k_next = math.ceil(k * ((q95 - 0.5) / (limit - 0.5)) ** 2 * 1.02)
        k = max(k + 1, k_next)
        if k > POWER_MAX_EXACT:
            break
    # D_atk: the held-out half holds count - round(count / 2) of each class, so 2k per class
    return 4 * k
