"""A sweep's report: tables, sweet spots and figures of a run (the trade-off paper, Section 5).

Numbers come from the rows of the run's cells (:func:`audit.results.load_rows`; ``runs.csv``
only where a directory holds nothing else), never averaged across configurations: rows are
grouped by setting (the cell's config but its seed), and a directory whose cells hold several run
configurations (written by code older than the run manifest) gets one section per configuration,
named by the settings that differ. The attack curves read ``cells/<hash>/scores.npz`` and the
reconstruction and sample grids (images as image grids, sensor series as line plots)
``cells/<hash>/{config.json, model.pt, attack_index.npz}``, all through :mod:`audit.results`; a
figure whose inputs are missing or do not fit is skipped with a logged warning and listed in
``report.md``. The report never re-runs any part of a cell.

Every number is the mean over seeds with the half-width of its 95 % Student-t interval
(:mod:`audit.report.stats`); one seed shows the value alone.

Modules: :mod:`~audit.report.summaries` (rows, sections, per-setting summaries, sweet spots),
:mod:`~audit.report.epsilon_figures` (accuracy, MI AP and phi against epsilon),
:mod:`~audit.report.curves` (attack curves), :mod:`~audit.report.grids` (reconstruction and
sample grids), :mod:`~audit.report.markdown` (``report.md``), :mod:`~audit.report.writer`
(:func:`write_report`, the entry point).
"""

from audit.report.summaries import MI_AP_LIMITS
from audit.report.writer import FORMATS, REPORT_DIR, REPORT_MD, Report, write_report

__all__ = ["FORMATS", "MI_AP_LIMITS", "REPORT_DIR", "REPORT_MD", "Report", "write_report"]
