"""The report's entry point: read a run, compute its summaries, draw and save its figures, and
write ``report.md`` (what ``benchmark.py report DIR`` and the end of every sweep call)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from audit import io
from audit.report.claim_vs_bound import (
    audited_cells,
    claim_vs_bound_figure,
    claim_vs_bound_table,
)
from audit.report.curves import curve_figures
from audit.report.epsilon_figures import summary_figures
from audit.report.grids import grid_figures
from audit.report.headline import detail_table, headline_table, worst_case_figure
from audit.report.markdown import render_markdown, sweet_spot_table
from audit.report.plots import save_figure
from audit.report.summaries import (
    MI_AP_LIMITS,
    distance_summary,
    load_runs,
    ordered,
    run_sections,
    setting_summary,
    sweet_spots,
    utility_note,
)
from audit.results import clean_temp_files, locked_dir, unfinished_cells

log = logging.getLogger(__name__)

REPORT_DIR = "report"
REPORT_MD = "report.md"
FORMATS = ("png", "pdf")


@dataclass
class Report:
    """What ``write_report`` produced: the Markdown file, the figure files, and what it skipped."""

    out_dir: Path
    markdown: Path
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
        targets=lambda name: name == REPORT_MD or name.endswith(suffixes),
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
    sections = []
    for name, stem_prefix, group in run_sections(frame, Path(run_dir)):
        settings, distances = setting_summary(group), distance_summary(group)
        no_utility = utility_note(group)
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
        table = (
            headline_table(group)
            + "\n\n### Per attack (one row per attack variant)\n\n"
            + detail_table(group)
        )
        if not audited.empty:
            title = f"{name}: claimed ε vs empirical lower bound"
            figures.append(("claim_vs_bound", claim_vs_bound_figure(audited, title=title)))
            table += "\n\n### Claimed ε vs empirical lower bound\n\n" + claim_vs_bound_table(
                audited
            )
        paths = []
        for stem, fig in figures:
            paths += save_figure(fig, out, f"{_slug(stem_prefix)}-{stem}", formats)
        report.figures += paths
        sections.append(
            (
                name,
                table,
                f"**Not computed:** {no_utility}."
                if no_utility
                else sweet_spot_table(sweet_spots(settings, limits)),
                paths,
            )
        )
    text = render_markdown(
        frame,
        sections,
        source=Path(run_dir),
        skipped=report.skipped,
        limits=limits,
        unfinished=report.unfinished,
    )
    io.write_text(report.markdown, text)
    log.info("report written to %s (%d figure files)", report.markdown, len(report.figures))
    return report
