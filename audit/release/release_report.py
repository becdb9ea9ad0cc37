"""The report of a folder of attacked releases (``benchmark.py attack``; ``benchmark.py report
OUT`` rewrites it, :func:`audit.release.attack_arrays` writes it where given ``out``): per release,
what was attacked, one line per threat model (strongest attack, held-out worst case with its
interval, the blind attacker's quantile, the verdict), the utility where ``--test`` was given,
the DCR baseline with a sentence where it passes while an attack is beyond chance, the figure of
MI AP per attack, and every attack result's row.

Its own renderer: nothing of a sweep's (no grid, no sweet spots, no epsilon accounting, no
settings to compare). It is a function of the folder's cells alone, so rewriting it gives the
same text.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from audit import io
from audit.release.release_figures import release_mi_ap_by_attack
from audit.release.release_rows import EXTERNAL, dcr_file
from audit.release.release_summary import cell_scores, result_label, summary_frame
from audit.report.figure_style import FORMATS, save_figure
from audit.report.markdown import interval_text, md_table
from audit.results import collect_rows, locked_dir, unfinished_cells
from audit.results.layout import REPORT_DIR, REPORT_MD
from audit.rows.derived import as_flag
from audit.rows.tradeoff import chance_accuracy

log = logging.getLogger(__name__)


@dataclass
class ReleaseReport:
    """What :func:`write_release_report` wrote (the attributes ``benchmark.py report`` prints,
    as of a sweep's report), and ``report.html`` where it could be written."""

    out_dir: Path
    markdown: Path
    html: Path | None = None
    figures: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)


def write_release_report(
    run_dir: Path, out_dir: Path | None = None, *, formats: Sequence[str] = FORMATS
) -> ReleaseReport:
    """Write ``report.md`` (and its figures, each in every format; PNG always, which the
    Markdown shows) and ``report.html`` for the attacked releases in ``run_dir``; ``out_dir``
    defaults to ``run_dir/report``."""
    run_dir = Path(run_dir)
    frame = collect_rows(run_dir)
    if frame.empty:
        raise ValueError(f"{str(run_dir)!r} holds no attacked release (no finished cell)")
    foreign = sorted(set(frame["mech"].astype(str)) - {EXTERNAL})
    if foreign:
        raise ValueError(
            f"{str(run_dir)!r} holds a sweep's cells (mech {', '.join(foreign)}) beside attacked "
            "releases; attack a release into a folder of its own"
        )
    formats = tuple(dict.fromkeys(("png", *formats)))
    out = io.check_writable_dir(Path(out_dir) if out_dir is not None else run_dir / REPORT_DIR)
    report = ReleaseReport(
        out_dir=out, markdown=out / REPORT_MD, unfinished=unfinished_cells(run_dir)
    )
    with locked_dir(out):
        summary = summary_frame(frame, cell_scores(run_dir))
        sections = []
        for digest, rows in frame.groupby("config_hash", sort=True):
            rows = rows.reset_index(drop=True)
            name = str(rows["dataset"].iloc[0])
            stem = f"{_slug(name)}-{str(digest)[:8]}-mi_ap_by_attack"
            first = rows.iloc[0]
            counts = f"{int(first['attack_members'])} + {int(first['attack_nonmembers'])}"
            fig = release_mi_ap_by_attack(
                rows, title=f"{name}: MI AP per attack, 95 % intervals ({counts} records)"
            )
            paths = save_figure(fig, out, stem, formats)
            report.figures += paths
            dcr = _read_dcr(run_dir, str(digest))
            mine = summary[summary["config_hash"] == digest]
            sections.append(release_section(str(digest), rows, mine, dcr, figure=paths[0].name))
        io.write_text(report.markdown, render(frame, sections, unfinished=report.unfinished))
        report.html = _write_html(report.markdown)
    log.info("release report written to %s", report.markdown)
    return report


def _write_html(markdown: Path) -> Path | None:
    """``report.html`` beside ``markdown`` (:func:`audit.report.html.write_html`): the one call
    site of the HTML page of a release report."""
    from audit.report.html import write_html

    return write_html(markdown)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def _read_dcr(run_dir: Path, digest: str) -> dict | None:
    path = dcr_file(run_dir, digest)
    return io.read_json(path) if path.is_file() else None


def render(frame: pd.DataFrame, sections: Sequence[str], *, unfinished: Sequence[str] = ()) -> str:
    """report.md: the title, how to read it, what is missing, then a section per release."""
    names = list(dict.fromkeys(frame.sort_values("config_hash")["dataset"].astype(str)))
    title = (
        f"# Attacks on the release {names[0]}"
        if len(sections) == 1
        else f"# Attacks on {len(sections)} releases"
    )
    parts = [
        title,
        "Rows: `runs.csv` beside this folder, one per attack result (each release's in "
        "`cells/<release>/rows.json`). A value in brackets is its 95 % interval (bootstrap over "
        "the attacked records; Clopper-Pearson for a TPR). The **blind attacker** is one whose "
        "scores ignore membership: at the same member and non-member counts its MI AP stays "
        "below the quoted 95 % quantile in 95 % of draws, so a value at or below it is **at "
        "chance**. The **held-out worst case** is the attack picked on one seeded half of the "
        "attacked records, measured on the other half (unbiased, at half the records). A "
        "**threat model** is what the attacker holds of the release; they nest (whoever holds "
        "the decoder can draw samples, whoever holds the whole VAE has the decoder), so each "
        "threat model's line is over its own attacks and those of the weaker ones.",
    ]
    if unfinished:
        parts += [
            "## Releases missing from this report",
            "\n".join(f"- {u}" for u in unfinished),
        ]
    return "\n\n".join([*parts, *sections]) + "\n"


# ---- one release -------------------------------------------------------------------------------


def _fmt(value: object, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def notes_of(text: object) -> dict[str, str]:
    """A row's ``privacy_notes`` (``key=value`` joined by ``"; "``) as a dict."""
    notes = {}
    for part in str(text if isinstance(text, str) else "").split("; "):
        key, sep, value = part.partition("=")
        if sep:
            notes[key.strip()] = value.strip()
    return notes


def _what(rows: pd.DataFrame) -> str:
    first = rows.iloc[0]
    notes = notes_of(first.get("privacy_notes"))
    held = notes.get("release", "").removeprefix(f"{EXTERNAL}: ").split(", ")
    released = ", ".join(c for c in held if c and not c.startswith("reference-"))
    epsilon, delta = float(first["epsilon"]), float(first["delta"])
    claim = (
        f"ε = {epsilon:g} at δ = {delta:g}, stated by the user"
        if math.isfinite(epsilon)
        else "none stated (`--epsilon/--delta`)"
    )
    parts = [
        f"{int(first['attack_members'])} members and {int(first['attack_nonmembers'])} "
        "non-members attacked",
        f"the release holds: {released or 'n/a'}",
        f"samples: {notes.get('samples', 'n/a')}",
        f"the attacker's reference records: {notes.get('reference', 'n/a')}",
        f"seed {int(first['seed'])}",
        f"claim: {claim}",
        f"membership: {notes.get('membership', 'n/a')}",
    ]
    if notes.get("not_run"):
        parts.append(f"not run (the release lacks what they need): {notes['not_run']}")
    return "**What was attacked.** " + "; ".join(parts) + "."


def _glance(summary: pd.DataFrame) -> str:
    rows = []
    for _, s in summary.iterrows():
        worst = interval_text(
            float(s["worst_mi_ap"]), float(s["worst_mi_ap_low"]), float(s["worst_mi_ap_high"])
        )
        if math.isfinite(float(s["worst_mi_ap"])):
            worst += (
                f" by {s['worst_attack']} on {int(s['worst_members'])} + "
                f"{int(s['worst_nonmembers'])} records"
            )
        else:
            worst = "n/a (the scores are not at hand)"
        rows.append(
            [
                f"{s['threat_model']} ({int(s['attacks'])} attack results)",
                f"{s['strongest_attack']}: "
                + interval_text(
                    float(s["strongest_mi_ap"]),
                    float(s["strongest_mi_ap_low"]),
                    float(s["strongest_mi_ap_high"]),
                ),
                worst,
                _fmt(float(s["worst_mi_ap_null_q95"])),
                f"**{s['verdict']}**" if s["verdict"] else "n/a",
            ]
        )
    headers = [
        "threat model",
        "strongest attack on all records: MI AP [95 %]",
        "held-out worst case: MI AP [95 %]",
        "blind attacker (95 %)",
        "verdict",
    ]
    return md_table(headers, rows)


def _utility(rows: pd.DataFrame) -> str:
    first = rows.iloc[0]
    acc = float(first["acc"])
    if not math.isfinite(acc):
        return (
            "**Utility.** Not measured: give `--test T.npz` (labelled real records the model "
            "never saw; labels on the members, non-members and samples too) to train the "
            "suite's classifier on the samples and score it on them."
        )
    classes = round(1 / float(first["acc_base"])) if float(first["acc_base"]) > 0 else 0
    majority = float(first.get("acc_majority", math.nan))
    chance = chance_accuracy(float(first["acc_base"]), majority)
    valid = as_flag(first.get("utility_valid"))
    verdict = (
        "above chance: `utility_valid` True"
        if valid
        else "not above chance: `utility_valid` False, the samples teach the classifier nothing "
        "a constant answer would not"
    )
    return (
        f"**Utility.** The suite's classifier trained on the {int(first['gen_records'])} samples "
        f"scores {acc:.3f} on the {int(first['n_test'])} test records (trained on the members: "
        f"{_fmt(float(first['acc_real']))}). Chance is {chance:.3f}, the larger of 1/{classes} "
        f"and the test records' majority share ({_fmt(majority)}); by a one-sided exact "
        f"binomial test at 1 % the accuracy is {verdict}."
    )


def dcr_text(rows: pd.DataFrame, dcr: dict | None) -> str:
    """The DCR paragraph, with a sentence where DCR passes while an attack is beyond chance."""
    if dcr is None:
        return "**DCR baseline.** Not computed: the release has no samples."
    verdict = "passes" if dcr["passes"] else "fails"
    text = (
        f"**DCR baseline** (distance to closest record, {dcr['n_samples']} samples): a share of "
        f"{dcr['share_closer_to_members']:.3f} of the samples lie closer to a member than to any "
        f"non-member (expected {dcr['expected_share']:.3f} for a generator that never saw the "
        f"members; one-sided binomial p = {dcr['p_value']:.3g}), so DCR **{verdict}** at "
        f"{dcr['alpha']:g}; median DCR to the members {dcr['median_dcr_members']:.4g}, to the "
        f"non-members {dcr['median_dcr_non_members']:.4g}."
    )
    flags = [as_flag(r.get("beyond_chance")) for _, r in rows.iterrows()]
    beyond = [r for (_, r), f in zip(rows.iterrows(), flags, strict=True) if f is True]
    if not dcr["passes"]:
        return text
    if beyond:
        names = ", ".join(f"{result_label(r)}: MI AP {float(r['mi_ap']):.3f}" for r in beyond)
        return (
            text
            + f"\n\n**DCR passes while {len(beyond)} attack result(s) are beyond chance:** {names}."
        )
    if any(f is not None for f in flags):
        return text + "\n\nDCR passes and no attack result is beyond chance."
    return (
        text + "\n\nDCR passes; whether an attack is beyond chance is unknown (these rows carry "
        "no chance band)."
    )


def _tpr(row: pd.Series) -> str:
    value = float(row.get("tpr_at_fpr_1pct", math.nan))
    if not math.isfinite(value):
        note = str(row.get("tpr_note") or "").split(";")[0].removeprefix("FPR 0.01: ")
        return f"n/a ({note})" if note and note != "nan" else "n/a"
    return interval_text(
        value,
        float(row.get("tpr_at_fpr_1pct_low", math.nan)),
        float(row.get("tpr_at_fpr_1pct_high", math.nan)),
    )


def _attacks(rows: pd.DataFrame) -> str:
    claimed = math.isfinite(float(rows["epsilon"].iloc[0]))
    ordered = rows.sort_values(["attack", "distance", "variant"], kind="stable")
    out = []
    for _, r in ordered.iterrows():
        line = [
            r["attack"],
            r["distance"],
            r["variant"],
            r.get("attacker_sees", "n/a"),
            interval_text(float(r["mi_ap"]), float(r["mi_ap_low"]), float(r["mi_ap_high"])),
            _fmt(float(r.get("mi_ap_null_q95", math.nan))),
            _fmt(as_flag(r.get("beyond_chance"))),
            interval_text(float(r["mi_auc"]), float(r["mi_auc_low"]), float(r["mi_auc_high"])),
            _tpr(r),
        ]
        if claimed:
            line.append(_fmt(float(r.get("epsilon_lower_attack", math.nan))))
        out.append(line)
    headers = [
        "attack",
        "distance",
        "variant",
        "attacker sees",
        "MI AP [95 %]",
        "blind attacker (95 %)",
        "beyond chance",
        "AUC [95 %]",
        "TPR at 1 % FPR [95 %]",
    ]
    if claimed:
        headers.append("ε lower bound from the attack (95 %)")
    return md_table(headers, out)


def release_section(
    digest: str, rows: pd.DataFrame, summary: pd.DataFrame, dcr: dict | None, *, figure: str
) -> str:
    """Markdown of one release: ``rows`` are its rows, ``summary`` its threat-model lines."""
    name = str(rows["dataset"].iloc[0])
    parts = [
        f"## {name} (release {digest})",
        _what(rows),
        "### At a glance (one line per threat model)",
        _glance(summary),
        _utility(rows),
        dcr_text(rows, dcr),
        "### MI AP per attack",
        "Each line an attack result on all attacked records, coloured by what the attacker "
        "holds; the black diamond is the held-out worst case (on half the records, so its "
        "interval and band are wider); the shaded band is where a blind attacker lands.",
        f"![MI AP per attack]({figure})",
        "### Every attack result",
        _attacks(rows),
    ]
    return "\n\n".join(parts)
