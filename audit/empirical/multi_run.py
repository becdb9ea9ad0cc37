"""The multi-run audit (``benchmark.py audit ... --runs R``): R training runs of a DP-SGD cell with
gradient canaries, each run a cell of its own (computed by an executor, cached, resumable), and
the several-run estimators over their pooled canary scores.

Run i trains the cell's mechanism on the cell's data (the split and the data are the cell's)
with seeds derived from (seed, i): its initialisation, batches, noise, canary coordinates and
canary inclusion are fresh, so each canary is in about half of the runs and out of the others.
Its scores and inclusion go to ``OUT/<key>.npz`` (written by the driver alone, atomically); a
rerun loads what is there and trains the rest, on the local or the Ray executor
(:mod:`audit.executors`, as sweep cells).

Estimators (:mod:`audit.empirical.estimators`), at 95 % confidence, over the same scores:

- ``clopper-pearson``: the threshold strategy is a split by runs: the threshold of the largest
  bound on the first ``R // 2`` runs' scores (:func:`best_threshold`), the bound on the others';
- ``gdp``: Nasr et al. 2023's estimate over all runs' scores (Bonferroni over the ROC frontier's
  thresholds, so no split is needed);
- ``one-run`` and ``one-run-fdp``: each run's own one-run bounds, their mean reported.

Notes:
    Clopper-Pearson and GDP treat every canary score as an independent trial: exact across runs
    (independent trainings), an approximation within a run (the canaries' coordinates are
    disjoint and their noise and sampling independent, but the model's own gradient on a
    coordinate depends on the whole run). GDP also assumes a Gaussian-shaped trade-off curve.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from audit import io
from audit.config import CellConfig
from audit.datasets import Dataset, dataset_split
from audit.empirical.estimators import (
    Rates,
    best_threshold,
    clopper_pearson_epsilon,
    gdp_epsilon,
)
from audit.empirical.one_run import audit_one_run
from audit.empirical.one_run_settings import CanaryKind, OneRunAudit, OneRunSettings
from audit.executors import CellFailed, Executor
from audit.mechanisms import Context
from dpvae_core.digests import json_digest
from dpvae_core.progress import null_progress
from dpvae_core.seeding import derive_seed

log = logging.getLogger(__name__)
MULTI_RUN_TAG = "multi-run-audit"


@dataclass(frozen=True)
class RunJob:
    """Run ``index`` of a multi-run audit of ``cell`` (the cell's data) with ``settings``."""

    cell: CellConfig
    settings: OneRunSettings
    index: int

    @property
    def key(self) -> str:
        settings = {k: getattr(v, "value", v) for k, v in asdict(self.settings).items()}
        if settings["copies"] == 1:  # added later: keys of runs cached before it stay valid
            del settings["copies"]
        return json_digest({"cell": self.cell.config_hash, "settings": settings, "run": self.index})


@dataclass(frozen=True)
class RunScores:
    """One run's canary scores, inclusion, claim and training seconds."""

    job: RunJob
    scores: np.ndarray
    included: np.ndarray
    claim_epsilon: float
    delta: float
    one_run: float
    one_run_fdp: float
    train_seconds: float

    @classmethod
    def of(cls, job: RunJob, audit: OneRunAudit) -> RunScores:
        """Run ``job``'s scores, inclusion, claim and bounds, read from its one-run ``audit``."""
        return cls(
            job=job,
            scores=audit.scores,
            included=audit.included,
            claim_epsilon=audit.claim.epsilon,
            delta=audit.claim.delta,
            one_run=audit.epsilon,
            one_run_fdp=audit.fdp_epsilon,
            train_seconds=audit.train_seconds,
        )


def compute_run(job: RunJob, dataset: Dataset, *, threads: int | None = None) -> RunScores:
    """Train run ``job.index`` and score its canaries (writes nothing: an executor's cell fn)."""
    from audit.cell.membership import cell_data

    if threads is not None:
        torch.set_num_threads(threads)
    cell = job.cell
    split = dataset_split(dataset, cell.seed)
    data = cell_data(dataset, split, cell)
    run_seed = derive_seed(cell.seed, MULTI_RUN_TAG, job.index) % 2**31
    audit = audit_one_run(
        replace(cell, seed=run_seed),
        data,
        Context(device="cpu", progress=null_progress),
        replace(job.settings, seed=run_seed),
    )
    return RunScores.of(job, audit)


def _save(out: Path, run: RunScores) -> None:
    io.save_npz(
        out / f"{run.job.key}.npz",
        {
            "scores": run.scores,
            "included": run.included,
            "facts": np.array(
                [run.claim_epsilon, run.delta, run.one_run, run.one_run_fdp, run.train_seconds]
            ),
        },
    )


def _load(out: Path, job: RunJob) -> RunScores | None:
    path = out / f"{job.key}.npz"
    if not path.exists():
        return None
    with np.load(path) as f:
        claim, delta, one_run, fdp, seconds = (float(x) for x in f["facts"])
        return RunScores(
            job, f["scores"], f["included"].astype(bool), claim, delta, one_run, fdp, seconds
        )


@dataclass(frozen=True)
class MultiRunAudit:
    """The several-run estimates and what they rest on."""

    runs: int
    m: int
    claim_epsilon: float
    delta: float
    clopper_pearson: float
    rates: Rates
    gdp: float
    gdp_mu: float
    gdp_thresholds: int
    one_run_mean: float
    one_run_fdp_mean: float
    train_seconds: float
    cached: int


def multi_run_audit(
    cell: CellConfig,
    dataset: Dataset,
    settings: OneRunSettings,
    *,
    runs: int,
    out: Path,
    executor: Executor,
) -> MultiRunAudit:
    """Run (or load from ``out``) the ``runs`` runs and estimate epsilon from their scores."""
    if settings.kind is not CanaryKind.GRADIENT:
        raise ValueError("--runs audits gradient canaries only; drop --canary-kind input")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 2:
        raise ValueError(f"--runs must be an integer >= 2, got {runs!r}")
    out.mkdir(parents=True, exist_ok=True)
    jobs = [RunJob(cell, settings, i) for i in range(runs)]
    done = {job.index: _load(out, job) for job in jobs}
    cached = sum(r is not None for r in done.values())
    pending = [job for job in jobs if done[job.index] is None]
    failed = []
    for result in executor.run(pending, dataset, compute_run):
        if isinstance(result, CellFailed):
            failed.append(f"run {result.job.index}: {result.error}")
            continue
        _save(out, result)
        done[result.job.index] = result
        log.info("audit run %d of %d done", result.job.index + 1, runs)
    if failed:
        raise RuntimeError(f"{len(failed)} run(s) failed (rerun to retry): {'; '.join(failed)}")
    return estimate([done[i] for i in range(runs)], confidence=settings.confidence, cached=cached)


def estimate(results: list[RunScores], *, confidence: float, cached: int = 0) -> MultiRunAudit:
    """The several-run estimators over ``results`` (module docstring)."""
    claims = {round(r.claim_epsilon, 9) for r in results}
    if len(claims) != 1 or len({r.delta for r in results}) != 1:
        raise RuntimeError(f"the runs claim different (eps, delta): {sorted(claims)}")
    delta, half = results[0].delta, len(results) // 2

    def pooled(runs: list[RunScores]) -> tuple[np.ndarray, np.ndarray]:
        scores = np.concatenate([r.scores for r in runs])
        included = np.concatenate([r.included for r in runs])
        return scores[included], scores[~included]

    threshold = best_threshold(*pooled(results[:half]), delta=delta, confidence=confidence)
    cp, rates = clopper_pearson_epsilon(
        *pooled(results[half:]), threshold=threshold, delta=delta, confidence=confidence
    )
    gdp = gdp_epsilon(*pooled(results), delta=delta, confidence=confidence)
    return MultiRunAudit(
        runs=len(results),
        m=len(results[0].scores),
        claim_epsilon=results[0].claim_epsilon,
        delta=delta,
        clopper_pearson=cp,
        rates=rates,
        gdp=gdp.epsilon,
        gdp_mu=gdp.mu,
        gdp_thresholds=gdp.thresholds,
        one_run_mean=float(np.mean([r.one_run for r in results])),
        one_run_fdp_mean=float(np.mean([r.one_run_fdp for r in results])),
        train_seconds=float(sum(r.train_seconds for r in results)),
        cached=cached,
    )
