"""Sweet spots that hold (the trade-off paper, Section 5.2, with the design's correction): for each
MI AP limit L and mechanism, the most accurate setting that is private below L *with confidence* and
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
  exact binomial test of :func:`audit.rows.tradeoff.above_chance` on the seeds' pooled test records.

Where no setting qualifies, the row says why, naming the closest setting. The non-private
baseline is listed as a mechanism too: where it qualifies, no mechanism is needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from audit.mechanisms import BASELINE
from audit.report.evidence import Evidence, records_to_certify
from audit.report.markdown import interval_text, md_table
from audit.report.stats import format_epsilon


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
            what = "no mechanism needed" if best.mech == BASELINE else f"{best.mech} {best.setting}"
            lines.append(
                f"{section}: MI AP <= {limit:g}: {what} (epsilon {format_epsilon(best.epsilon)}, "
                f"worst case {best.worst_mi_ap:.3f} <= {best.worst_mi_ap_high:.3f}, accuracy "
                f"{best.acc:.3f} vs chance {best.chance_acc:.3f})"
            )
    return lines
