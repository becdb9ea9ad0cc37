"""A sweep's results on disk: cells, the run manifest, ``runs.csv``, and the locks around them.

The sweep, the report and the gate read and write a run directory only through this module::

    OUT/run.json            the run manifest: the configuration all its cells share, the
                            cells every sweep into OUT planned, and the SHA-256 of every file
                            the run stored (schema-versioned, sealed by its own digest, atomic)
    OUT/cells/<hash>/       one cell: config.json, ..., rows.json (written last: "finished")
                            model.pt, scores.npz and attack_index.npz (the attacked records'
                            rows in the dataset), which the report reads (load_*, read_*)
    OUT/cells/<hash>/.lock  held while a sweep computes that cell
    OUT/runs.csv            rebuilt from the cells after each cell; never read back as a source
    OUT/reference-models/<key>/   reference VAEs shared by the cells of a dataset, seed and
                            recipe (:mod:`audit.results.reference_cache` reads and writes
                            them)
    OUT/.runs.csv.lock      held while runs.csv is rebuilt
    OUT/.run.json.lock      held while run.json is read and updated
    OUT/.sweep.lock         shared by every running sweep; exclusive while orphans are cleaned

A *run configuration* is everything in a cell's config except the mechanism, its parameter, the
seed and the mechanism's own options (:func:`run_settings`); a directory holds one. Rows are read
from the cells (:func:`load_rows`), so a torn ``runs.csv`` costs nothing. A cell whose files do
not match the digests ``run.json`` recorded (edited, torn, added, missing) is refused in one line
(report, gate) or computed again (sweep): :mod:`~audit.results.integrity`.

The package keeps one concept per module: :mod:`~audit.results.layout` (file names),
:mod:`~audit.results.locks`, :mod:`~audit.results.manifest` (the run configuration),
:mod:`~audit.results.cells` (one cell's files), :mod:`~audit.results.integrity` (the files'
digests) and :mod:`~audit.results.table` (``runs.csv``).
Columns derived across rows (phi, utility validity, the worst case) are :mod:`audit.rows.derived`.
Callers import the names below from ``audit.results``.
"""

from audit.results.cells import (
    cell_config,
    cell_configs,
    cell_rows,
    has_model,
    is_finished,
    load_attack_scores,
    load_cell_config,
    load_model_state,
    parse_scores_key,
    read_attack_index,
    scores_key,
    write_attack_index,
)
from audit.results.integrity import (
    begin_cell,
    cell_problem,
    drop_changed_caches,
    file_problem,
    finish_cell,
    record_cell,
    record_file,
    record_files,
    recorded_files,
    run_problems,
)
from audit.results.layout import (
    ATTACK_INDEX_FILE,
    CELLS_DIR,
    CONFIG_FILE,
    MANIFEST,
    MODEL_FILE,
    RUNS_CSV,
    SCORES_FILE,
    cell_path,
)
from audit.results.locks import (
    cell_lock,
    clean_orphans,
    clean_temp_files,
    locked,
    locked_dir,
    sweep_session,
)
from audit.results.manifest import (
    GRID_OPTIONS,
    RUN_OPTIONS,
    cell_hash,
    claim_run,
    differences,
    manifest_of,
    mech_settings,
    planned_cells,
    read_manifest,
    run_hash,
    run_settings,
    setting_hash,
)
from audit.results.table import (
    collect_rows,
    load_rows,
    unfinished_cells,
    write_csv,
)

__all__ = [
    "ATTACK_INDEX_FILE",
    "CELLS_DIR",
    "CONFIG_FILE",
    "MANIFEST",
    "MODEL_FILE",
    "RUNS_CSV",
    "SCORES_FILE",
    "GRID_OPTIONS",
    "RUN_OPTIONS",
    "begin_cell",
    "cell_problem",
    "drop_changed_caches",
    "file_problem",
    "finish_cell",
    "record_cell",
    "record_file",
    "record_files",
    "recorded_files",
    "run_problems",
    "cell_config",
    "cell_configs",
    "cell_hash",
    "cell_lock",
    "cell_path",
    "cell_rows",
    "claim_run",
    "clean_orphans",
    "clean_temp_files",
    "collect_rows",
    "differences",
    "has_model",
    "is_finished",
    "load_attack_scores",
    "load_cell_config",
    "load_model_state",
    "load_rows",
    "locked",
    "locked_dir",
    "manifest_of",
    "mech_settings",
    "parse_scores_key",
    "planned_cells",
    "unfinished_cells",
    "read_attack_index",
    "read_manifest",
    "run_hash",
    "run_settings",
    "scores_key",
    "setting_hash",
    "sweep_session",
    "write_attack_index",
    "write_csv",
]
