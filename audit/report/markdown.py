"""``report.md``: the recommendation and the frontier first, then per dataset, profile and run
configuration the main table, the sweet spots, the figures and the per-attack table; how epsilon
was computed (delta named, and what a large one permits) and what was skipped."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from audit.mechanisms import BASELINE, param_symbol
from audit.report.stats import format_epsilon


def interval_text(value: float, low: float, high: float) -> str:
    """``0.612 [0.550, 0.670]``; the value alone without an interval; ``n/a`` without a value."""
    if not math.isfinite(value):
        return "n/a"
    if math.isfinite(low) and math.isfinite(high):
        return f"{value:.3f} [{low:.3f}, {high:.3f}]"
    return f"{value:.3f}"


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown pipe table; ``|`` inside an entry is escaped."""

    def entry(value: object) -> str:
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(map(entry, headers)) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(map(entry, row)) + " |" for row in rows]
    return "\n".join(lines)


def epsilon_methods(frame: pd.DataFrame) -> str:
    """One row per claim: the mechanism, how epsilon was computed, the accountant, delta, and
    |D_train| with delta x |D_train| (the expected number of records a mechanism that publishes
    each record outright with probability delta would expose)."""
    cols = [c for c in ("mech", "epsilon_method", "accountant", "delta") if c in frame.columns]
    claims = frame[frame["mech"] != BASELINE] if "mech" in frame else frame
    if claims.empty:
        return ""
    extra = "n_train" in claims.columns and "delta" in claims.columns
    table = claims[cols + (["n_train"] if extra else [])].drop_duplicates()
    rows = []
    for r in table.itertuples(index=False):
        row = [str(getattr(r, c)) for c in cols]
        if extra:
            delta, n = float(r.delta), float(r.n_train)
            row += [f"{n:g}", f"{delta * n:.3g}" if math.isfinite(delta * n) else "n/a"]
        rows.append(row)
    headers = cols + (["|D_train|", "δ·|D_train|"] if extra else [])
    return md_table(headers, rows)


#: A delta at or above this multiple of 1/|D_train| is named in the report.
LARGE_DELTA = 0.1


def delta_notes(frame: pd.DataFrame, *, delta_flag_mechs: Sequence[str]) -> list[str]:
    """What a large delta permits, one sentence per (mech, delta, |D_train|) whose delta is at
    least :data:`LARGE_DELTA` / |D_train|; ``delta_flag_mechs``: the mechanisms that take
    ``--delta``."""
    if not {"delta", "n_train", "mech"} <= set(frame.columns):
        return []
    claims = frame[frame["mech"] != BASELINE][["mech", "delta", "n_train"]].drop_duplicates()
    notes = []
    for r in claims.itertuples(index=False):
        delta, n = float(r.delta), float(r.n_train)
        if not (math.isfinite(delta) and delta > 0 and n >= 1) or delta < LARGE_DELTA / n:
            continue
        how = (
            f"pass `--delta D` (for example `--delta {_small_delta(n):g}`, well below 1/|D_train|) "
            "to claim ε at a smaller δ (ε grows)"
            if r.mech in delta_flag_mechs
            else "this mechanism's δ is fixed by its accounting (1/|D|): read its ε with that "
            "in mind"
        )
        notes.append(
            f"**{r.mech}: δ = {delta:.3g} with |D_train| = {n:g}.** An (ε, δ)-DP claim at this δ "
            "also holds for a mechanism that publishes each training record verbatim with "
            f"probability δ: about {delta * n:.3g} record(s) of this D_train in the clear, ε "
            f"notwithstanding. δ ≥ {LARGE_DELTA:g}/|D_train| is too large to rule that out; {how}."
        )
    return notes


#: The ``privacy_notes`` key of a tuned cell's rows (:func:`audit.cell.tuning.tuning_notes`).
TUNING_NOTE = "tuning="


def tuned_cell_notes(frame: pd.DataFrame) -> list[str]:
    """What the tuned cells' rows say of their tuning (``--tune``): that it is not accounted,
    and each cell's chosen values; nothing where no row was tuned."""
    if not {"privacy_notes", "config_hash"} <= set(frame.columns):
        return []
    cells = frame.drop_duplicates("config_hash")
    cells = cells[cells["privacy_notes"].astype(str).str.contains(TUNING_NOTE, regex=False)]
    if cells.empty:
        return []
    lines, counts = [], set()
    for r in cells.sort_values(["mech", "param_value", "seed"]).itertuples(index=False):
        note = str(r.privacy_notes).split(TUNING_NOTE, 1)[1].split("; ", 1)[0]
        trials = note.removeprefix("tuned over ").split(" ", 1)[0]
        counts.add(trials)
        chosen = note.rsplit("chosen: ", 1)[-1]
        value = float(r.param_value)
        setting = "" if math.isnan(value) else f" {param_symbol(str(r.param_name))}={value:g}"
        lines.append(
            f"- {r.mech}{setting}, seed {r.seed}: tuned over {trials} trials on D_val; "
            f"chosen {chosen}"
        )
    return [
        f"**Tuned over {' or '.join(sorted(counts))} trials on D_val; the tuning's privacy cost "
        "is not accounted.** Each "
        "tuned cell chose its learning rates, batch sizes and classifier epochs by Bayesian "
        "optimisation (`--tune`), every trial training on D_train: ε covers the final training "
        "alone, as in the trade-off paper (docs/tuning.md).",
        "\n".join(lines),
    ]


def _small_delta(n: float) -> float:
    """A power of ten at most 1/(100 n)."""
    return 10.0 ** math.floor(math.log10(1 / (100 * n)))


def recommendation_text(rec: Sequence[tuple[float, object]]) -> str:
    """One bullet per MI AP limit: the setting recommended under it (a
    :class:`audit.report.sweet_spots.SweetSpot`) or why there is none."""
    lines = []
    for limit, spot in rec:
        if spot is None:
            lines.append(
                f"- **MI AP ≤ {limit:g}: no setting qualifies** (the sweet-spot table says why)."
            )
            continue
        what = "no mechanism needed" if spot.mech == BASELINE else f"{spot.mech} {spot.setting}"
        lines.append(
            f"- **MI AP ≤ {limit:g}: {what}** (ε = {format_epsilon(spot.epsilon)}, "
            f"δ = {spot.delta:.2g}): held-out worst-case MI AP {spot.worst_mi_ap:.3f}, 95 % upper "
            f"end {spot.worst_mi_ap_high:.3f}; accuracy {spot.acc:.3f} "
            f"[{spot.acc_low:.3f}, {spot.acc_high:.3f}] against chance {spot.chance_acc:.3f}."
        )
    return "\n".join(lines)


@dataclass
class Section:
    """One dataset, profile and run configuration of the report, as rendered."""

    name: str
    glance: str
    detail: str
    claims: str = ""
    spots: str = ""
    recommendation: str = ""
    frontier: list[Path] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)


def _images(paths: Sequence[Path]) -> list[str]:
    return [f"![{p.stem}]({p.name})" for p in paths if p.suffix == ".png"]


SPOT_RULE = (
    "For each MI AP limit L, the most accurate setting of each mechanism that is private below L "
    "with 95 % confidence and useful: L at or above the blind attacker's 95 % quantile at the "
    "held-out half's counts (else no value could tell L from chance; the row gives the number of "
    "attacked records that would), the upper end of the held-out worst case's 95 % interval at "
    "most L, no single attack significantly above L (the lower end of its 95 % interval above "
    "L), and accuracy above chance = max(1/#classes, majority rate) by a one-sided exact "
    "binomial test at 1 % (the trade-off paper, Section 5.2, corrected: that paper compares "
    "means). The baseline (none) is listed too: where it qualifies, no mechanism is needed. The "
    "same rows: `sweet_spots.csv`."
)


def render_markdown(
    frame: pd.DataFrame,
    sections: Sequence[Section],
    *,
    source: Path,
    skipped: Sequence[str],
    limits: Sequence[float],
    unfinished: Sequence[str] = (),
    delta_flag_mechs: Sequence[str] = (),
) -> str:
    """report.md: the recommendation and the frontier first, then per section its tables and
    figures, how epsilon was computed (delta named), and what was skipped."""
    seeds = sorted(frame["seed"].unique().tolist())
    versions = sorted(frame["code_version"].astype(str).unique()) if "code_version" in frame else []
    parts = [
        "# Privacy-accuracy trade-off report",
        f"Source: `{source}`: {len(frame)} rows, seed(s) {seeds}"
        + (f", code version(s) {', '.join(versions)}." if versions else "."),
        "## Recommendation",
        f"MI AP limits {', '.join(f'{x:g}' for x in limits)}: under each, the most useful setting "
        "whose held-out worst-case MI AP is below the limit with 95 % confidence and whose "
        "accuracy is above chance (the rule: each section's sweet spots).",
    ]
    for section in sections:
        if len(sections) > 1:
            parts.append(f"### {section.name}")
        parts.append(section.recommendation)
        parts += _images(section.frontier)
    notes = delta_notes(frame, delta_flag_mechs=delta_flag_mechs)
    if notes:
        parts += ["### About δ", *notes]
    tuned = tuned_cell_notes(frame)
    if tuned:
        parts += ["### About tuning", *tuned]
    parts.append(
        "Over several seeds a value is the mean ± the half-width of the 95 % Student-t "
        "interval, t(0.975, n-1)·s/√n over n seeds (two seeds give t = 12.7: use three or "
        "more); a single seed's MI AP, AUC and TPR come with their own 95 % interval in "
        "brackets (bootstrap over the attacked records; Clopper-Pearson for TPR). 'blind "
        "attacker' is the 95 % quantile of the MI AP an attacker whose scores ignore "
        "membership reaches at the same member and non-member counts: a value at or below it "
        "is **at chance**. The worst case is held out: the attack is picked on one half of "
        "the attacked records and measured on the other. ε of the non-private run is ∞."
    )
    if unfinished:
        parts += [
            "## Cells missing from this report",
            f"{len(unfinished)} cell(s) of this run have no rows (the report, like `check`, "
            "leaves them out and exits with status 1):",
            "\n".join(f"- {u}" for u in unfinished),
        ]
    for section in sections:
        parts += [
            f"## {section.name}",
            "### At a glance (one row per setting)",
            section.glance,
            "`utility_valid` (runs.csv): the row's non-private baseline classifies above chance "
            "by a one-sided exact binomial test at 1 % on the test-set size. φ clips MI AP at "
            "0.5 and accuracy at chance (max(1/#classes, majority rate)), so a setting at chance "
            "accuracy scores at most 1; it is empty where the baseline's utility is not valid or "
            "its attack is not beyond its chance band (`phi_note`); the trade-off paper's raw "
            "formula is `phi_paper` in runs.csv.",
            "### Sweet spots",
            SPOT_RULE,
            section.spots,
            "### Figures",
            *(_images(section.figures) or ["(none)"]),
            "### Per attack (one row per attack variant)",
            section.detail,
        ]
        if section.claims:
            parts += ["### Claimed ε vs empirical lower bound", section.claims]
    methods = epsilon_methods(frame)
    if methods:
        parts += ["## How ε was computed", methods]
    if skipped:
        parts += ["## Skipped", "\n".join(f"- {s}" for s in skipped)]
    return "\n\n".join(parts) + "\n"
