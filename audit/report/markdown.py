"""``report.md``: the main table, the sweet-spot table, how epsilon was computed, the figures and
what was skipped, per dataset, profile and run configuration."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from audit.report.stats import MeanInterval, format_epsilon


def interval(row: pd.Series | dict, metric: str) -> MeanInterval:
    return MeanInterval(float(row[metric]), float(row[f"{metric}_hw"]), int(row[f"{metric}_n"]))


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def cell(value: object) -> str:
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, headers)) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


def _eps(row: pd.Series | dict) -> str:
    """Epsilon (:func:`format_epsilon`), with its interval only where it varies across seeds."""
    eps = interval(row, "epsilon")
    text = format_epsilon(eps.mean)
    return f"{text} ± {eps.half_width:.3g}" if eps.half_width > 0 else text


def _majority_mark(row: pd.Series | dict) -> str:
    """A mark after a sweet spot's accuracy where its mean is at or below D_test's majority-class
    share (what a classifier that always answers the largest class scores): such a setting keeps
    the attack down but its generated data teach the classifier nothing; '' otherwise or where
    the rows carry no majority rate."""
    majority = float(row.get("acc_majority", math.nan))
    acc = float(row["acc"])
    if math.isnan(majority) or math.isnan(acc) or acc > majority:
        return ""
    return f" (not above the majority rate {majority:.3f}: no utility)"


def sweet_spot_table(spots: pd.DataFrame) -> str:
    headers = ["MI AP limit", "mech", "best setting", "ε", "attack power (max MI AP)", "acc"]
    rows = []
    for _, r in spots.iterrows():
        power = interval(r, "attack_power").format()
        if r["qualifies"]:
            rows.append(
                [
                    f"{r['limit']:g}",
                    r["mech"],
                    r["param_label"],
                    _eps(r),
                    power,
                    interval(r, "acc").format() + _majority_mark(r),
                ]
            )
        else:
            rows.append(
                [
                    f"{r['limit']:g}",
                    r["mech"],
                    "no setting qualifies",
                    "–",
                    f"weakest: {power} at {r['param_label']}",
                    "–",
                ]
            )
    return _md_table(headers, rows)


def epsilon_methods(frame: pd.DataFrame) -> str:
    cols = [c for c in ("mech", "epsilon_method", "accountant", "delta") if c in frame.columns]
    rows = frame[cols].drop_duplicates().astype(str).values.tolist()
    return _md_table(cols, rows)


def render_markdown(
    frame: pd.DataFrame,
    sections: Sequence[tuple[str, str, str, list[Path]]],
    *,
    source: Path,
    skipped: Sequence[str],
    limits: Sequence[float],
    unfinished: Sequence[str] = (),
) -> str:
    """report.md: header, then per dataset/profile its tables and figures, then what was skipped."""
    seeds = sorted(frame["seed"].unique().tolist())
    versions = sorted(frame["code_version"].astype(str).unique()) if "code_version" in frame else []
    parts = [
        "# Privacy audit report",
        f"Source: `{source}`: {len(frame)} rows, seed(s) {seeds}"
        + (f", code version(s) {', '.join(versions)}." if versions else "."),
        "Over several seeds a value is the mean ± the half-width of the 95 % Student-t "
        "interval, t(0.975, n-1)·s/√n over n seeds (two seeds give t = 12.7: use three or "
        "more); a single seed's MI AP, AUC and TPR come with their own 95 % interval in "
        "brackets (bootstrap over the attacked records; Clopper-Pearson for TPR). 'blind "
        "attacker' is the 95 % quantile of the MI AP an attacker whose scores ignore "
        "membership reaches at the same member and non-member counts: a value at or below it "
        "is **at chance**. The worst case is held out: the attack is picked on one half of "
        "the attacked records and measured on the other. ε of the non-private run is ∞.",
    ]
    if unfinished:
        parts += [
            "## Cells missing from this report",
            f"{len(unfinished)} cell(s) of this run have no rows (the report, like `check`, "
            "leaves them out and exits with status 1):",
            "\n".join(f"- {u}" for u in unfinished),
        ]
    for name, table, spots, figures in sections:
        parts += [
            f"## {name}",
            "### At a glance (one row per setting)",
            table,
            "`utility_valid` (runs.csv): the row's non-private baseline classifies above chance "
            "by a one-sided exact binomial test at 1 % on the test-set size; φ is left empty "
            "where it does not.",
            "### Sweet spots",
            "For each MI AP limit, the setting of each mechanism with the best accuracy whose "
            "attack power (the largest MI AP over the distances, mean over seeds) is at most "
            f"the limit (paper 003, Section 5.2); limits {', '.join(f'{x:g}' for x in limits)}."
            " The baseline (none) is listed too: where it qualifies, no mechanism is needed. "
            "A limit at or below the blind attacker's 95 % quantile cannot be told from chance; "
            "an accuracy at or below D_test's majority rate is marked: that setting's generated "
            "data carry no utility.",
            spots,
            "### Figures",
        ]
        parts += [f"![{p.stem}]({p.name})" for p in figures if p.suffix == ".png"] or ["(none)"]
    parts += ["## How ε was computed", epsilon_methods(frame)]
    if skipped:
        parts += ["## Skipped", "\n".join(f"- {s}" for s in skipped)]
    return "\n\n".join(parts) + "\n"
