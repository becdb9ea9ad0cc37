"""Sweet spots that hold (paper 003, Section 5.2, with the design's correction): for each MI AP
limit L and mechanism, the most accurate setting that is private below L *with confidence* and
useful.

A setting qualifies for L only if
- L can be certified at all with the records attacked: the blind attacker's 95 % quantile at the
  held-out half's counts (what an attack at exact chance reaches in 5 % of draws) is at most L;
  otherwise no observed value could tell L from chance, and the row says how many attacked
  records would (:func:`records_to_certify`);
- the upper end of its held-out worst case's 95 % interval is at most L (one seed: the
  bootstrap interval over the attacked records; several: the larger of the t-interval's upper
  end over seeds and the mean of the seeds' bootstrap upper ends);
- no single attack's MI AP is significantly above L: no attack row (of any seed) has the lower
  end of its 95 % bootstrap interval above L;
- its accuracy on D_test is above chance = max(1/#classes, the majority rate) by the one-sided
  exact binomial test of :func:`audit.tradeoff.above_chance` on the seeds' pooled test records.

Where no setting qualifies, the row says why, naming the closest setting. The non-private
baseline is listed as a mechanism too: where it qualifies, no mechanism is needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from attacks.uncertainty import mi_ap_null
from audit.report.markdown import NONE, interval_text, md_table
from audit.report.stats import format_epsilon, t_interval
from audit.report.summaries import SETTING, WORST_CASE, ordered
from audit.tradeoff import above_chance, chance_accuracy

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


@dataclass(frozen=True)
class SweetSpot:
    """One row of ``sweet_spots.csv``: a limit, a mechanism, the setting chosen (empty where none
    qualifies) with its evidence, and the reason where empty."""

    limit: float
    mech: str
    setting: str
    param_value: float
    epsilon: float
    delta: float
    worst_mi_ap: float
    worst_mi_ap_high: float
    certifiable_from: float
    strongest_attack: str
    strongest_mi_ap: float
    strongest_mi_ap_low: float
    acc: float
    acc_low: float
    acc_high: float
    chance_acc: float
    seeds: int
    attacked_records: int
    records_to_certify: float
    reason: str


def _fails(e: Evidence, limit: float) -> str:
    """Why setting ``e`` does not qualify for ``limit`` ('' where it does)."""
    if not e.floor <= limit:
        return f"the blind attacker's 95 % quantile at these counts is {e.floor:.3f} > {limit:g}"
    if not e.worst_mi_ap_high <= limit:
        return (
            f"held-out worst case {e.worst_mi_ap:.3f}, upper end {e.worst_mi_ap_high:.3f} > "
            f"{limit:g}"
        )
    if e.strongest_mi_ap_low > limit:
        return (
            f"{e.strongest_attack} MI AP {e.strongest_mi_ap:.3f} is significantly above "
            f"{limit:g} (lower end {e.strongest_mi_ap_low:.3f})"
        )
    if not e.acc_above_chance:
        return (
            f"accuracy {e.acc:.3f} is not above chance {e.chance:.3f} (the majority rate or "
            "1/#classes; exact binomial test at 1 %)"
        )
    return ""


def _spot(limit: float, e: Evidence, reason: str = "", needed: int | None = None) -> SweetSpot:
    """The row of ``limit`` and ``e``'s mechanism: ``e`` chosen where ``reason`` is empty, else
    the setting closest to qualifying, shown with why none does."""
    chosen = not reason
    return SweetSpot(
        limit=limit,
        mech=e.mech,
        setting=e.param_label if chosen else "",
        param_value=e.param_value if chosen else math.nan,
        epsilon=e.epsilon if chosen else math.nan,
        delta=e.delta if chosen else math.nan,
        worst_mi_ap=e.worst_mi_ap,
        worst_mi_ap_high=e.worst_mi_ap_high,
        certifiable_from=e.floor,
        strongest_attack=e.strongest_attack,
        strongest_mi_ap=e.strongest_mi_ap,
        strongest_mi_ap_low=e.strongest_mi_ap_low,
        acc=e.acc,
        acc_low=e.acc_low,
        acc_high=e.acc_high,
        chance_acc=e.chance,
        seeds=e.seeds,
        attacked_records=e.attacked,
        records_to_certify=float(needed) if needed is not None else math.nan,
        reason=reason,
    )


def sweet_spots(evidence: Sequence[Evidence], limits: Sequence[float]) -> list[SweetSpot]:
    """For each limit and mechanism (in the evidence's order), the qualifying setting with the
    highest accuracy (ties: the smaller worst case), or the reason none qualifies."""
    mechs = list(dict.fromkeys(e.mech for e in evidence))
    out = []
    for limit in limits:
        for mech in mechs:
            mine = [e for e in evidence if e.mech == mech]
            ok = [e for e in mine if not _fails(e, limit)]
            if ok:
                best = max(ok, key=lambda e: (e.acc, -e.worst_mi_ap))
                out.append(_spot(limit, best))
                continue
            out.append(_no_spot(limit, mine))
    return out


def _no_spot(limit: float, mine: list[Evidence]) -> SweetSpot:
    """The row of a mechanism none of whose settings qualifies: the reason, naming the setting
    closest to qualifying (the smallest upper end of the worst case)."""
    floor = min(e.floor for e in mine)
    if not floor <= limit:
        needed = records_to_certify(limit)
        closest = min(mine, key=lambda e: e.floor)
        attacked = closest.attacked
        reason = (
            f"cannot be certified with {attacked} attacked records: a blind attacker's 95 % "
            f"quantile at the held-out half's counts is {floor:.3f} > {limit:g}; "
            + (f"about {needed} attacked records would" if needed else "no size would")
        )
        return _spot(limit, closest, reason, needed)
    closest = min(mine, key=lambda e: (e.worst_mi_ap_high, -e.acc))
    reasons = "; ".join(f"{e.param_label}: {_fails(e, limit)}" for e in mine)
    return _spot(limit, closest, f"no setting qualifies ({reasons})")


def spots_frame(spots: Sequence[SweetSpot]) -> pd.DataFrame:
    """``sweet_spots.csv``'s rows."""
    return pd.DataFrame([asdict(s) for s in spots], columns=list(SweetSpot.__dataclass_fields__))


def sweet_spot_table(spots: Sequence[SweetSpot]) -> str:
    """The Markdown table: every column says which statistic it shows."""
    headers = [
        "MI AP limit L",
        "mech",
        "recommended setting",
        "ε (δ)",
        "held-out worst-case MI AP (95 % upper end ≤ L?)",
        "strongest single attack: MI AP (95 % lower end > L?)",
        "accuracy [95 % CI] (chance)",
        "why not / note",
    ]
    rows = []
    for s in spots:
        eps = f"{format_epsilon(s.epsilon)} ({s.delta:.2g})" if s.setting else "–"
        worst = (
            f"{s.worst_mi_ap:.3f} (upper {s.worst_mi_ap_high:.3f})"
            if math.isfinite(s.worst_mi_ap)
            else "n/a"
        )
        strongest = (
            f"{s.strongest_attack}: {s.strongest_mi_ap:.3f} (lower {s.strongest_mi_ap_low:.3f})"
            if s.strongest_attack
            else "n/a"
        )
        acc = interval_text(s.acc, s.acc_low, s.acc_high) + f" ({s.chance_acc:.3f})"
        rows.append(
            [
                f"{s.limit:g}",
                s.mech,
                f"**{s.setting}**" if s.setting else "none qualifies",
                eps,
                worst,
                strongest,
                acc,
                s.reason or "qualifies",
            ]
        )
    return md_table(headers, rows)


def recommendation(spots: Sequence[SweetSpot]) -> list[tuple[float, SweetSpot | None]]:
    """Per limit, the most accurate qualifying setting over every mechanism (None: none)."""
    out = []
    for limit in dict.fromkeys(s.limit for s in spots):
        ok = [s for s in spots if s.limit == limit and s.setting]
        out.append((limit, max(ok, key=lambda s: (s.acc, -s.worst_mi_ap)) if ok else None))
    return out


def recommendation_lines(csv_path: Path) -> list[str]:
    """The recommendation as plain lines, one per section and MI AP limit, read from a report's
    ``sweet_spots.csv`` (what the command line prints after a report); [] where it is missing."""
    if not Path(csv_path).is_file():
        return []
    frame = pd.read_csv(csv_path, keep_default_na=False, na_values=[""])
    fields = list(SweetSpot.__dataclass_fields__)
    lines = []
    for section, rows in frame.groupby("section", sort=False):
        spots = [
            SweetSpot(**{**r, "setting": r["setting"] if isinstance(r["setting"], str) else ""})
            for r in rows[fields].to_dict("records")
        ]
        for limit, best in recommendation(spots):  # the report's own choice
            if best is None:
                lines.append(f"{section}: MI AP <= {limit:g}: no setting qualifies")
                continue
            what = "no mechanism needed" if best.mech == NONE else f"{best.mech} {best.setting}"
            lines.append(
                f"{section}: MI AP <= {limit:g}: {what} (epsilon {format_epsilon(best.epsilon)}, "
                f"worst case {best.worst_mi_ap:.3f} <= {best.worst_mi_ap_high:.3f}, accuracy "
                f"{best.acc:.3f} vs chance {best.chance_acc:.3f})"
            )
    return lines
