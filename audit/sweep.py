"""The sweep runner: one cell per dataset x mechanism x parameter x seed; caching, resume, CSV."""

from __future__ import annotations

import json
import logging
import platform
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from audit import io, results
from audit.attack_plan import attack_settings, check_ssim_window, plan_attacks
from audit.config import CellConfig, MechanismName, SweepConfig
from audit.datasets import Dataset, Split, dataset_modality, dataset_split, load_dataset
from audit.executors import CellFailed, Executor, ExecutorName, make_executor
from audit.mechanisms import CellData, Context, DataFacts, Mechanism, get_mechanism
from audit.options import MechanismOptions
from audit.pipeline import (
    CellOutcome,
    cell_data,
    cell_reference_specs,
    classifier_accuracy,
    classifier_settings,
    run_cell,
    save_outcome,
)
from audit.reference_models import ReferenceModel, cached_models, save_trained
from audit.results import CELLS_DIR, RUNS_CSV
from dpvae_core.digests import short_digest
from dpvae_core.progress import ProgressFactory, null_progress
from models.face_embedding import FACE_EMBEDDING, INSTALL_HINT
from models.face_embedding import available as face_embedding_available

log = logging.getLogger(__name__)

__all__ = ["CELLS_DIR", "RUNS_CSV", "SweepResult", "build_cells", "run_sweep"]


@dataclass(frozen=True, repr=False)
class SweepResult:
    """What a sweep did; ``rows``: ``runs.csv``'s rows; ``report``: the ``report.md`` it wrote,
    None where it wrote none (``config.report`` False, or the report failed: a logged warning
    says why). Read it with :meth:`table` and :meth:`summary`; its repr is one line."""

    out: Path
    csv_path: Path
    ran: int
    reused: int
    rows: pd.DataFrame
    report: Path | None = None

    def table(self) -> pd.DataFrame:
        """``runs.csv``'s rows (a copy of :attr:`rows`): one per cell and attack result."""
        return self.rows.copy()

    def summary(self) -> pd.DataFrame:
        """One line per cell and threat model: the strongest attack, the held-out worst case
        with its 95 % interval, the verdict, utility and DCR
        (:func:`audit.release.release_summary.summary_frame`, scores read from the cells)."""
        from audit.release.release_summary import cell_scores, summary_frame

        return summary_frame(self.rows, cell_scores(self.out))

    def __repr__(self) -> str:
        cells = self.rows["config_hash"].nunique() if "config_hash" in self.rows else 0
        report = f", report {self.report}" if self.report is not None else ""
        return (
            f"SweepResult({str(self.out)!r}: {cells} cells ({self.ran} run, {self.reused} "
            f"reused), {len(self.rows)} rows in runs.csv{report}; .table(), .summary())"
        )


def code_version() -> str:
    """``git describe`` of the checkout this code runs from, else the package version."""
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return _version("dpvae-audit")


def _version(package: str) -> str:
    try:
        return importlib_metadata.version(package)
    except importlib_metadata.PackageNotFoundError:
        return "unknown"


def run_metadata(
    cell: CellConfig, device: str, version: str, command: str | None = None
) -> dict[str, Any]:
    """The cell's provenance; ``command`` is the sweep command line (what ``check --calibrate``
    names as the source of thresholds)."""
    packages = ("torch", "opacus", "numpy", "scikit-learn", "scikit-image", "pandas")
    return {
        "command": command,
        "seed": cell.seed,
        "device": device,
        "code_version": version,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {p: _version(p) for p in packages},
        "torch_threads": torch.get_num_threads(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def build_cells(
    config: SweepConfig, *, data_sha256: str | None = None
) -> list[tuple[CellConfig, CellConfig]]:
    """(cell, its non-private baseline cell) for every seed, mechanism and grid value.

    The baseline of seed s is the cell of mechanism ``none`` with the same profile and seed; it
    comes first so that phi can be filled as soon as a private cell finishes. ``data_sha256``,
    the loaded data's :attr:`Dataset.content_hash`, goes into every cell's options (and hash),
    so changed data never reuses a cell. Each cell runs the attacks its mechanism's release
    allows (:func:`audit.attack_plan.plan_attacks`). The options are checked by
    :func:`check_sweep`, not here.
    """
    attacks = plan_attacks(
        config.attacks,
        {m.value: get_mechanism(m).release for m in (MechanismName.NONE, *config.mechs)},
    )
    data = () if data_sha256 is None else (("data_sha256", data_sha256),)
    pairs: list[tuple[CellConfig, CellConfig]] = []
    for seed in config.seeds:
        base = CellConfig(
            config.dataset,
            MechanismName.NONE,
            get_mechanism(MechanismName.NONE).param_name,
            None,
            seed,
            config.profile,
            (
                ("profile_name", config.profile_name.value),
                *config.data_options(),
                *data,
                *config.precision_options(),
            ),
            attacks=attacks[MechanismName.NONE.value],
        )
        pairs.append((base, base))
        for name in config.mechs:
            if name is MechanismName.NONE:
                continue
            mech = get_mechanism(name)
            options = config.options_for(name) or mech.options_type()
            for param_name, value in _grid(mech, config, options):
                cell = CellConfig(
                    config.dataset,
                    name,
                    param_name,
                    float(value),
                    seed,
                    config.profile,
                    base.options,
                    mech_options=options if options.given() else None,
                    attacks=attacks[name.value],
                    audit=config.audit,
                )
                pairs.append((cell, base))
    return pairs


def check_sweep(config: SweepConfig, data: tuple[Dataset, dict[int, Split]] | None = None) -> None:
    """Every check of a sweep's options, in one place, before any cell runs: that they apply
    (:func:`_check_options_apply`), the attack plan, and each selected mechanism's
    :meth:`~audit.mechanisms.mechanism.Mechanism.check_options` (its grid values, its options,
    and, given the loaded ``data`` and its splits, the records' modality and sizes; |D_train| is
    the smallest over the seeds after the ``max_train`` cap), and, given ``data``, that images
    fit SSIM's window where a planned attack scores SSIM
    (:func:`~audit.attack_plan.check_ssim_window`). Called without ``data`` before the data is
    loaded, and with it after."""
    _check_options_apply(config)
    # once the data is loaded (a dataset that cannot be read says so first), before any cell
    face = data is not None and config.profile.classifier == FACE_EMBEDDING
    if face and not face_embedding_available():
        raise ValueError(
            f"--dataset {config.dataset}'s classifier is {FACE_EMBEDDING}: {INSTALL_HINT}; "
            "or pass --classifier resnet-half"
        )
    mechs = (MechanismName.NONE, *config.mechs)
    releases = {m.value: get_mechanism(m).release for m in mechs}
    plan = plan_attacks(config.attacks, releases)
    facts = None if data is None else _data_facts(config, *data)
    if data is not None:
        dataset = data[0]
        check_ssim_window(
            dataset.shape,
            plan,
            releases,
            settings=attack_settings(
                attack_samples=config.profile.attack_samples, modality=dataset.modality
            ),
            what=f"--dataset {config.dataset}",
        )
    for name in config.mechs:
        if name is MechanismName.NONE:
            continue
        mech = get_mechanism(name)
        options = config.options_for(name) or mech.options_type()
        grid = [value for _, value in _grid(mech, config, options)]
        mech.check_options(options, grid=grid, batch_size=config.profile.batch_size, data=facts)


def _data_facts(config: SweepConfig, dataset: Dataset, splits: dict[int, Split]) -> DataFacts:
    cap = config.profile.max_train
    n_train = min(len(s.train) if cap is None else min(cap, len(s.train)) for s in splits.values())
    return DataFacts(record_shape=dataset.shape, n_train=n_train, epochs=config.profile.epochs)


def _check_options_apply(config: SweepConfig) -> None:
    """Refuse options of mechanisms not selected, and a ``--grid`` that is ambiguous.

    Options are refused by name when no selected mechanism reads them as the command line
    builds them (:func:`audit.mechanisms.build_options`); here the typed options must belong to
    selected mechanisms. One ``--grid`` gives one list of values; with private mechanisms of
    different parameters it would set z, eps_i and sigma alike, so all selected private
    mechanisms must share one parameter (cdp and cdp-termwise share the noise multiplier z);
    and no ``--target-epsilon``, which replaces the grid.
    """
    private = [m for m in config.mechs if m is not MechanismName.NONE]
    for name, options in config.mech_options:
        if name not in private:
            raise ValueError(f"options given for --mech {name.value}, which is not selected")
        if not isinstance(options, get_mechanism(name).options_type):
            raise ValueError(
                f"{name.value} takes {get_mechanism(name).options_type.__name__}, "
                f"got {type(options).__name__}"
            )
    if config.grid is None:
        return
    if not private:
        raise ValueError(
            "--grid does not apply to --mech none (the non-private baseline has no parameter); "
            "drop --grid or add a private mechanism"
        )
    if len({get_mechanism(m).param_name for m in private}) > 1:
        params = ", ".join(f"{m.value}: {get_mechanism(m).param_name}" for m in private)
        raise ValueError(
            f"--grid gives one list of values but --mech selects {len(private)} private "
            f"mechanisms with different parameters ({params}); run mechanisms of different "
            "parameters with a --grid each"
        )
    if any(getattr(o, "target_epsilon", None) is not None for _, o in config.mech_options):
        raise ValueError(
            "--target-epsilon replaces the grid with one calibrated noise multiplier; "
            "give either --target-epsilon or --grid, not both"
        )


def _grid(
    mech: Mechanism, config: SweepConfig, options: MechanismOptions
) -> list[tuple[str, float]]:
    """(parameter name, value) of each cell: the grid, or one cell for ``--target-epsilon``."""
    target = getattr(options, "target_epsilon", None)
    if target is not None:
        return [("target_epsilon", float(target))]
    values = config.grid or mech.default_grid_for(dataset_modality(config.dataset))
    return [(mech.param_name, value) for value in values]


def _acc_real_key(dataset: Dataset, cell: CellConfig, device: str) -> str:
    """The cache key of the real-data classifier's accuracy: the data's content, the seed, the
    training-set cap, the classifier's settings and (windowed data) the stride."""
    settings = classifier_settings(cell, device, "real")
    stride = cell.option("window_stride")  # other windows are other records
    extra = [] if stride is None else [["window_stride", stride]]
    content = ["data_sha256", dataset.content_hash]  # the data's content, not its name
    p = cell.profile
    if p.balanced_train or p.classifier is not None:  # unset: the key older caches had
        extra.append(["balanced_train", p.balanced_train, "classifier", p.classifier])
    if settings.precision != "float32":  # not in the settings' repr
        extra.append(["precision", settings.precision])
    return json.dumps([dataset.name, content, cell.seed, p.max_train, repr(settings), *extra])


def _acc_real_path(out: Path, key: str) -> Path:
    return out / "cache" / f"acc_real-{short_digest(key)}.json"


def _cached_acc_real(out: Path, key: str) -> float | None:
    path = _acc_real_path(out, key)
    if not path.exists():
        return None
    try:
        return float(io.read_json(path)["acc_real"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("recomputing damaged cache file %s (%s)", path, exc)
        return None


def _compute_acc_real(data: CellData, cell: CellConfig, ctx: Context) -> float:
    """Classifier trained on real D_train (early stop on D_val), tested on D_test."""
    return classifier_accuracy(
        data.train,
        data.val,
        data.test,
        num_classes=data.num_classes,
        settings=classifier_settings(cell, ctx.device, "real"),
        ctx=ctx,
        desc="classifier on real D_train",
        kind=cell.profile.classifier,
    )


def run_sweep(
    config: SweepConfig,
    *,
    progress: ProgressFactory = null_progress,
    command: str | None = None,
    cell_fn: Callable[..., CellComputed] | None = None,
) -> SweepResult:
    """Run (or resume) every cell of ``config``; ``runs.csv`` is rebuilt after each cell, and at
    the end the report is written into ``OUT/report`` (:func:`write_sweep_report`; not with
    ``config.report`` False; a failing report is a warning, never a failed sweep).

    Refused before any work where ``config.out`` holds another run configuration
    (:func:`audit.results.claim_run`). Each cell is computed under its lock, so a concurrent
    sweep into the same directory waits for it and then reuses it. ``command``: the command line
    that started the sweep, recorded in each new cell's metadata.

    With ``config.executor`` ray, each pending cell is one Ray task (:mod:`audit.executors`);
    the driver alone writes cells and ``runs.csv``. A cell whose task died is not recorded, the
    others are, and :class:`SweepIncomplete` names the missing ones at the end. ``cell_fn``
    replaces :func:`compute_cell` (tests only: e.g. a worker that dies on its first attempt).
    """
    check_sweep(config)  # before loading any data
    dataset = load_dataset(  # fails before any write
        config.dataset, data_home=config.data_home, window_stride=config.window_stride
    )
    splits = {
        s: dataset_split(dataset, s)
        for s in config.seeds
    }
    check_sweep(config, (dataset, splits))
    pairs = build_cells(config, data_sha256=dataset.content_hash)
    out = Path(config.out)
    io.check_writable_dir(out)
    version = code_version()
    executor = (
        make_executor(config.executor, config.ray)  # a missing Ray fails here, before any write
        if config.executor is ExecutorName.RAY
        else None
    )
    failed: list[CellFailed] = []
    with results.sweep_session(out):  # from here on, no other sweep cleans temporary files
        results.claim_run(out, [cell.canonical() for cell, _ in pairs])  # or refuse
        bar = progress(total=len(pairs), desc=f"{config.dataset} cells")
        jobs = _Jobs(out, config, dataset, splits, version, command)
        if executor is None:
            ran, reused = _run_local(jobs, pairs, progress, bar)
        else:
            ran, reused, failed = _run_remote(executor, jobs, pairs, bar, cell_fn)
        bar.close()
        csv_path, frame = results.write_csv(out)
    report = write_sweep_report(out, data_home=config.data_home) if config.report else None
    if failed:
        names = ", ".join(f"{f.job.cell.config_hash} ({f.error})" for f in failed)
        raise SweepIncomplete(
            f"{len(failed)} cell(s) did not finish and were not recorded: {names}; "
            "rerun the same command to compute them"
        )
    return SweepResult(
        out=out, csv_path=csv_path, ran=ran, reused=reused, rows=frame, report=report
    )


def report_command(out: Path, data_home: Path | None = None) -> str:
    """The command line that writes the report of ``out`` (what a sweep runs at its end)."""
    extra = [] if data_home is None else ["--data-home", str(data_home)]
    return shlex.join(["python", "benchmark.py", "report", str(out), *extra])


def write_sweep_report(out: Path, *, data_home: Path | None = None) -> Path | None:
    """Write ``out``'s report as ``benchmark.py report OUT`` does; the path of ``report.md``,
    or None (with a warning naming the error and the command to rerun) where it fails.

    The cells and ``runs.csv`` are written before, so a failing report (matplotlib missing, a
    damaged cell the report cannot read) costs nothing but the report.
    """
    try:
        from audit.report import write_report  # matplotlib: needed for the report only

        return write_report(out, data_home=data_home).markdown
    except Exception as exc:  # noqa: BLE001 - any failure: the finished sweep stands
        log.warning(
            "the sweep finished but its report failed (%s: %s); rerun it with: %s",
            type(exc).__name__,
            exc,
            report_command(out, data_home),
        )
        return None


def _run_local(
    jobs: _Jobs, pairs: list[tuple[CellConfig, CellConfig]], progress: ProgressFactory, bar: Any
) -> tuple[int, int]:
    """Every cell in this process, each computed under its lock; returns (ran, reused)."""
    out, overwrite = jobs.out, jobs.config.overwrite
    ran = reused = 0
    for cell, base in pairs:
        if _reusable(out, cell, overwrite):
            reused += 1
        else:
            with results.cell_lock(out, cell.config_hash):
                if _reusable(out, cell, overwrite):  # a concurrent sweep finished it
                    reused += 1
                else:
                    _save(out, compute_cell(jobs.job(cell, base), jobs.dataset, progress=progress))
                    ran += 1
        results.write_csv(out)
        bar.update(1)
    return ran, reused


class SweepIncomplete(RuntimeError):
    """Some cells' tasks died (after the executor's retries); they were not recorded."""


@dataclass(frozen=True)
class CellJob:
    """What a worker needs to compute one cell besides the dataset: no paths, no files."""

    cell: CellConfig
    base: CellConfig
    split: Split
    acc_real: float | None  # the driver's cached value, or None: the worker computes it
    acc_key: str
    device: str
    version: str
    command: str | None
    references: tuple[ReferenceModel, ...] = ()  # the cache's reference models for this cell


@dataclass(frozen=True)
class CellComputed:
    """A cell's outcome as it comes back to the driver, which alone writes it."""

    job: CellJob
    outcome: CellOutcome
    acc_real: float
    metadata: dict[str, Any]


def compute_cell(
    job: CellJob,
    dataset: Dataset,
    *,
    threads: int | None = None,
    progress: ProgressFactory = null_progress,
) -> CellComputed:
    """Compute one cell without writing anything (the unit of work of both executors).

    ``threads``: torch's thread count in this process (a Ray task's ``--cell-cpus``).
    """
    if threads is not None:
        torch.set_num_threads(threads)
    log.info(
        "running cell %s: %s %s=%s seed %d",
        job.cell.config_hash,
        job.cell.mech.value,
        job.cell.param_name,
        job.cell.param_value,
        job.cell.seed,
    )
    ctx = Context(device=job.device, progress=progress)
    data = cell_data(dataset, job.split, job.cell)
    acc_real = job.acc_real if job.acc_real is not None else _compute_acc_real(data, job.cell, ctx)
    outcome = run_cell(
        job.cell,
        data,
        ctx,
        acc_real=acc_real,
        code_version=job.version,
        baseline_hash=job.base.config_hash,
        cached_references=job.references,
    )
    meta = run_metadata(job.cell, job.device, job.version, job.command)
    return CellComputed(job=job, outcome=outcome, acc_real=acc_real, metadata=meta)


@dataclass(frozen=True)
class _Jobs:
    out: Path
    config: SweepConfig
    dataset: Dataset
    splits: dict[int, Split]
    version: str
    command: str | None

    def job(self, cell: CellConfig, base: CellConfig) -> CellJob:
        """The job of ``cell``, with what the driver's caches already hold for it: the
        real-data classifier's accuracy and the reference models (read when the job is made:
        the local executor makes each job as its cell starts, so a cell reuses the models an
        earlier cell of the sweep trained; Ray jobs are made up front, so cells running at the
        same time may each train the models the cache lacks)."""
        key = _acc_real_key(self.dataset, cell, self.config.device)
        specs = ()
        if cell.reference_models:
            data = cell_data(self.dataset, self.splits[cell.seed], cell)
            specs = cell_reference_specs(cell, data)
        return CellJob(
            cell=cell,
            base=base,
            split=self.splits[cell.seed],
            acc_real=_cached_acc_real(self.out, key),
            acc_key=key,
            device=self.config.device,
            version=self.version,
            command=self.command,
            references=tuple(m for spec in specs for m in cached_models(self.out, spec)),
        )


def _run_remote(
    executor: Executor,
    jobs: _Jobs,
    pairs: list[tuple[CellConfig, CellConfig]],
    bar: Any,
    cell_fn: Callable[..., CellComputed] | None,
) -> tuple[int, int, list[CellFailed]]:
    """Pending cells through ``executor``; the driver writes each outcome as it arrives, under
    the cell's lock (a cell another sweep finished meanwhile is kept, ours dropped)."""
    out, overwrite = jobs.out, jobs.config.overwrite
    pending = [jobs.job(cell, base) for cell, base in pairs if not _reusable(out, cell, overwrite)]
    reused = len(pairs) - len(pending)
    bar.update(reused)
    ran, failed = 0, []
    for result in executor.run(pending, jobs.dataset, cell_fn or compute_cell):
        if isinstance(result, CellFailed):
            log.error("cell %s failed: %s", result.job.cell.config_hash, result.error)
            failed.append(result)
        else:
            job = result.job
            with results.cell_lock(out, job.cell.config_hash):
                if _reusable(out, job.cell, overwrite):  # another sweep finished it meanwhile
                    reused += 1
                else:
                    _save(out, result)
                    ran += 1
            results.write_csv(out)
        bar.update(1)
    return ran, reused, failed


def _save(out: Path, computed: CellComputed) -> None:
    """Write a computed cell under ``out/cells`` (``rows.json`` last) and, where the worker
    computed them, the real-data classifier's accuracy and reference models into the caches."""
    job = computed.job
    if job.acc_real is None:
        path = _acc_real_path(out, job.acc_key)
        io.write_json(path, {"key": job.acc_key, "acc_real": computed.acc_real})
    for references in computed.outcome.references:
        save_trained(out, references)
    cell_dir = out / CELLS_DIR / job.cell.config_hash
    save_outcome(cell_dir, job.cell, computed.outcome, computed.metadata)


def _reusable(out: Path, cell: CellConfig, overwrite: bool) -> bool:
    """Whether ``cell`` is finished in ``out`` and may be reused (a torn or foreign rows.json
    is not finished: the cell runs again)."""
    if overwrite or not results.is_finished(out / CELLS_DIR / cell.config_hash):
        return False
    log.info(
        "reusing finished cell %s (%s %s)", cell.config_hash, cell.mech.value, cell.param_value
    )
    return True
