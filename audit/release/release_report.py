"""The report of an audited release: the sweep's report of its rows (:mod:`audit.report`), then
a section per audited release with every attack's row, the held-out worst case and the DCR
baseline, saying where DCR passes while an attack is beyond chance."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from audit import io
from audit.release.auditing import DCR_FILE, EXTERNAL
from audit.report.writer import Report, write_report
from audit.results import CELLS_DIR, collect_rows

TITLE = "## Audited releases"


def write_release_report(out: Path, *, formats: tuple[str, ...] = ("png",)) -> Report:
    """``out/report/report.md`` as a sweep's, with :func:`release_sections` appended."""
    report = write_report(Path(out), images=False, formats=formats)
    frame = collect_rows(Path(out))
    text = report.markdown.read_text()
    io.write_text(report.markdown, text.rstrip("\n") + "\n\n" + release_sections(frame, out) + "\n")
    return report


def release_sections(frame: pd.DataFrame, out: Path) -> str:
    """Markdown: per audited release (rows of mech ``external``), its attacks and DCR."""
    parts = [TITLE]
    external = frame[frame["mech"] == EXTERNAL]
    for digest, rows in external.groupby("config_hash", sort=True):
        dcr_path = Path(out) / CELLS_DIR / str(digest) / DCR_FILE
        dcr = io.read_json(dcr_path) if dcr_path.is_file() else None
        parts.append(_section(str(digest), rows, dcr))
    return "\n\n".join(parts)


def _fmt(value: object, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _beyond(row: pd.Series) -> object:
    """The row's ``beyond_chance`` where the rows carry it, else None (unknown)."""
    value = row.get("beyond_chance")
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _section(digest: str, rows: pd.DataFrame, dcr: dict | None) -> str:
    first = rows.iloc[0]
    lines = [
        f"### {first['dataset']} (release {digest}, seed {first['seed']})",
        "",
        f"{int(first['attack_members'])} members, {int(first['attack_nonmembers'])} non-members; "
        f"{first['privacy_notes']}.",
        "",
        "| attack | distance | variant | MI AP | chance q95 | beyond chance | AUC "
        "| TPR @ 1 % FPR |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, row in rows.iterrows():
        lines.append(
            f"| {row['attack']} | {row['distance']} | {row['variant']} | {_fmt(row['mi_ap'])} "
            f"| {_fmt(row.get('mi_ap_null_q95'))} | {_fmt(_beyond(row))} | {_fmt(row['mi_auc'])} "
            f"| {_fmt(row['tpr_at_fpr_1pct'])} |"
        )
    worst = rows[rows["worst_case"] == True]  # noqa: E712  (object column: True/False/None)
    if not worst.empty:
        w = worst.iloc[0]
        lines += [
            "",
            f"Held-out worst case: {w['attack']} ({w['distance']}, {w['variant']}), chosen on "
            f"half of the records, MI AP {_fmt(w['worst_mi_ap'])} on the other half.",
        ]
    lines += ["", _dcr_text(rows, dcr)]
    return "\n".join(lines)


def _dcr_text(rows: pd.DataFrame, dcr: dict | None) -> str:
    if dcr is None:
        return "DCR baseline: not computed (the release has no samples)."
    verdict = "passes" if dcr["passes"] else "fails"
    text = (
        f"DCR baseline (distance to closest record, {dcr['n_samples']} samples): a share of "
        f"{dcr['share_closer_to_members']:.3f} of the samples lie closer to a member than to any "
        f"non-member (expected {dcr['expected_share']:.3f} for a generator that never saw the "
        f"members; one-sided binomial p = {dcr['p_value']:.3g}), so DCR **{verdict}** at "
        f"{dcr['alpha']:g}; median DCR to the members {dcr['median_dcr_members']:.4g}, to the "
        f"non-members {dcr['median_dcr_non_members']:.4g}."
    )
    beyond = [r for _, r in rows.iterrows() if _beyond(r) is True]
    known = any(_beyond(r) is not None for _, r in rows.iterrows())
    if not dcr["passes"]:
        return text
    if beyond:
        names = ", ".join(
            f"{r['attack']} ({r['distance']}, {r['variant']}: MI AP {r['mi_ap']:.3f})"
            for r in beyond
        )
        return (
            text
            + f"\n\n**DCR passes while {len(beyond)} attack result(s) are beyond chance:** {names}."
        )
    if known:
        return text + "\n\nDCR passes and no attack result is beyond chance."
    return (
        text + "\n\nDCR passes; whether an attack is beyond chance is unknown (these rows carry "
        "no chance band)."
    )
