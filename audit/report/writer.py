"""The report's entry point: read a run, compute its summaries, draw and save its figures, and
write ``report.md`` (what ``benchmark.py report DIR`` and the end of every sweep call)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from audit import io
from audit.report.claim_vs_bound import (
    audited_cells,
    claim_vs_bound_figure,
    claim_vs_bound_table,
)
from audit.report.curves import curve_figures
from audit.report.epsilon_figures import summary_figures
from audit.report.evidence import setting_evidence
from audit.report.figure_style import FORMATS, save_figure
from audit.report.frontier import frontier_figure
from audit.report.grids import grid_figures
from audit.report.headline import detail_table, headline_table, worst_case_figure
from audit.report.html import REPORT_HTML, write_html
from audit.report.markdown import Section, recommendation_text, render_markdown
from audit.report.summaries import (
    MI_AP_LIMITS,
    distance_summary,
    load_runs,
    ordered,
    run_sections,
    setting_summary,
    utility_note,
)
from audit.report.sweet_spots import recommendation, spots_frame, sweet_spot_table, sweet_spots
from audit.results import clean_temp_files, locked_dir, unfinished_cells
from audit.results.layout import REPORT_DIR, REPORT_MD

log = logging.getLogger(__name__)

SWEET_SPOTS_CSV = "sweet_spots.csv"


@dataclass
class Report:
    """What ``write_report`` produced: the Markdown file, the figure files, and what it skipped."""

    out_dir: Path
    markdown: Path
    html: Path | None = None
    sweet_spots: Path | None = None
    figures: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def write_report(
    run_dir: Path,
    out_dir: Path | None = None,
    *,
    formats: Sequence[str] = FORMATS,
    limits: Sequence[float] = MI_AP_LIMITS,
    data_home: Path | None = None,
    images: bool = True,
) -> Report:
    """Write figures (each in every format) and ``report.md`` for the run in ``run_dir``.

    ``out_dir`` defaults to ``run_dir/report``; ``data_home`` is where downloadable datasets live
    (for the reconstruction and sample grids, which need the data); ``images=False`` skips the
    grids.
    """
    if not formats:
        raise ValueError("at least one figure format is needed, e.g. png")
    bad = [x for x in limits if not 0 < x <= 1]
    if bad or not limits:
        raise ValueError(f"MI AP limits must lie in (0, 1], got {list(limits)}")
    frame = load_runs(run_dir)
    out = io.check_writable_dir(
        Path(out_dir) if out_dir is not None else Path(run_dir) / REPORT_DIR
    )
    with locked_dir(out):  # one report writer at a time per folder
        _clean_stale(out, formats)
        return _write(
            run_dir, out, frame, formats=formats, limits=limits, data_home=data_home, images=images
        )


def _clean_stale(out: Path, formats: Sequence[str]) -> None:
    """Remove the temporary files a killed report writer left in ``out``: those of
    ``report.md`` and of figures (any of :data:`FORMATS` and ``formats``). Called under the
    folder's lock, so none of them is a live writer's; other files' are left alone (``out``
    may be a run directory, where a sweep writes its own)."""
    suffixes = tuple(f".{fmt}" for fmt in {*FORMATS, *formats})
    removed = clean_temp_files(
        out,
        before=time.time(),
        targets=lambda name: (
            name in (REPORT_MD, REPORT_HTML, SWEET_SPOTS_CSV) or name.endswith(suffixes)
        ),
    )
    if removed:
        log.warning("removed %d temporary file(s) a killed report left in %s", len(removed), out)


def _write(
    run_dir: Path,
    out: Path,
    frame,
    *,
    formats: Sequence[str],
    limits: Sequence[float],
    data_home: Path | None,
    images: bool,
) -> Report:
    report = Report(out_dir=out, markdown=out / REPORT_MD, unfinished=unfinished_cells(run_dir))
    sections, spot_rows = [], []
    for name, stem_prefix, group in run_sections(frame, Path(run_dir)):
        prefix = _slug(stem_prefix)
        settings, distances = setting_summary(group), distance_summary(group)
        no_utility = utility_note(group)
        evidence = setting_evidence(group)
        spots = [] if no_utility else sweet_spots(evidence, limits)
        section = Section(name=name, glance=headline_table(group), detail=detail_table(group))
        if no_utility:
            section.spots = f"**Not computed:** {no_utility}."
            section.recommendation = f"No recommendation: {no_utility}."
            spot_rows.append(_not_computed(name, group, limits, no_utility))
        else:
            section.spots = sweet_spot_table(spots)
            section.recommendation = recommendation_text(recommendation(spots))
            spot_rows.append(
                spots_frame(spots).assign(
                    section=name,
                    dataset=str(group["dataset"].iloc[0]),
                    profile=str(group["profile"].iloc[0]),
                )
            )
        frontier = frontier_figure(
            evidence, spots, title=f"{name}: privacy-utility frontier (held-out worst case)"
        )
        if frontier is not None:
            section.frontier = save_figure(frontier, out, f"{prefix}-frontier", formats)
        worst = worst_case_figure(group, title=f"{name}: held-out worst case over attacks vs ε")
        figures = [("worst_case", worst)] if worst is not None else []
        figures += summary_figures(
            settings, distances, name=name, skipped=report.skipped, no_utility=no_utility
        )
        figures += curve_figures(run_dir, group, name=name, skipped=report.skipped)
        if images:
            figures += grid_figures(
                run_dir, ordered(group), name=name, data_home=data_home, skipped=report.skipped
            )
        audited = audited_cells(group)
        if not audited.empty:
            title = f"{name}: claimed ε vs empirical lower bound"
            figures.append(("claim_vs_bound", claim_vs_bound_figure(audited, title=title)))
            section.claims = claim_vs_bound_table(audited)
        for stem, fig in figures:
            section.figures += save_figure(fig, out, f"{prefix}-{stem}", formats)
        report.figures += section.frontier + section.figures
        sections.append(section)
    text = render_markdown(
        frame,
        sections,
        source=Path(run_dir),
        skipped=report.skipped,
        limits=limits,
        unfinished=report.unfinished,
        delta_flag_mechs=delta_flag_mechs(),
    )
    report.sweet_spots = out / SWEET_SPOTS_CSV
    table = pd.concat(spot_rows, ignore_index=True)
    io.write_with(report.sweet_spots, lambda tmp: table.to_csv(tmp, index=False))
    io.write_text(report.markdown, text)
    report.html = write_html(report.markdown) if "png" in formats else None
    log.info("report written to %s (%d figure files)", report.markdown, len(report.figures))
    return report


def _not_computed(name: str, group, limits: Sequence[float], why: str) -> pd.DataFrame:
    """sweet_spots.csv's rows of a section whose utility axis measures nothing: one per limit
    and mechanism, no setting, the reason."""
    mechs = list(dict.fromkeys(ordered(group)["mech"]))
    rows = [
        {"limit": x, "mech": m, "setting": "", "reason": f"not computed: {why}"}
        for x in limits
        for m in mechs
    ]
    columns = spots_frame([]).columns
    return pd.DataFrame(rows, columns=columns).assign(
        section=name, dataset=str(group["dataset"].iloc[0]), profile=str(group["profile"].iloc[0])
    )


def delta_flag_mechs() -> list[str]:
    """The mechanisms whose options take ``--delta`` (asked of the registry)."""
    from audit.mechanisms import declared_options

    return [m for m, options in declared_options().items() if "delta" in options.names()]
