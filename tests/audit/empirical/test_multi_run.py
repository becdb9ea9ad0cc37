"""The multi-run audit: runs cached and resumed, the estimators over pooled scores."""

from __future__ import annotations

import numpy as np
import pytest

from audit.empirical.estimators import best_threshold, clopper_pearson_epsilon, gdp_epsilon
from audit.empirical.multi_run import RunJob, RunScores, estimate, multi_run_audit
from audit.empirical.one_run_settings import OneRunSettings
from tests.audit.empirical.fixtures import tiny_cell


def _fake(job: RunJob, mu: float = 2.0) -> RunScores:
    rng = np.random.default_rng(job.index)
    included = rng.random(job.settings.canaries) < 0.5
    scores = rng.normal(0, 1, job.settings.canaries) + mu * included
    return RunScores(job, scores, included, 4.0, 1e-5, 1.0, 1.5, 2.0)


class FakeExecutor:
    """Yields fabricated runs (no training) and counts what it was asked for."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def run(self, jobs, dataset, compute):
        for job in jobs:
            self.asked.append(job.index)
            yield _fake(job)


def test_runs_are_cached_and_a_rerun_trains_nothing(tmp_path) -> None:
    settings = OneRunSettings(canaries=400)
    first, second = FakeExecutor(), FakeExecutor()
    a = multi_run_audit(tiny_cell(), None, settings, runs=4, out=tmp_path, executor=first)
    b = multi_run_audit(tiny_cell(), None, settings, runs=4, out=tmp_path, executor=second)
    assert first.asked == [0, 1, 2, 3] and second.asked == []
    assert (a.gdp, a.clopper_pearson, b.cached) == (b.gdp, b.clopper_pearson, 4)
    more = FakeExecutor()
    multi_run_audit(tiny_cell(), None, settings, runs=6, out=tmp_path, executor=more)
    assert more.asked == [4, 5]  # resumes: only the new runs train


def test_estimates_split_runs_for_the_threshold_and_pool_all_for_gdp() -> None:
    runs = [_fake(RunJob(tiny_cell(), OneRunSettings(canaries=300), i)) for i in range(4)]

    def pooled(rs):
        s = np.concatenate([r.scores for r in rs])
        i = np.concatenate([r.included for r in rs])
        return s[i], s[~i]

    t = best_threshold(*pooled(runs[:2]), delta=1e-5)
    cp, _ = clopper_pearson_epsilon(*pooled(runs[2:]), threshold=t, delta=1e-5)
    got = estimate(runs, confidence=0.95)
    assert got.clopper_pearson == cp > 0
    assert got.gdp == gdp_epsilon(*pooled(runs), delta=1e-5).epsilon > 0
    assert (got.one_run_mean, got.one_run_fdp_mean, got.train_seconds) == (1.0, 1.5, 8.0)


def test_runs_claiming_different_epsilons_are_refused() -> None:
    cell, settings = tiny_cell(), OneRunSettings(canaries=50)
    a, b = _fake(RunJob(cell, settings, 0)), _fake(RunJob(cell, settings, 1))
    b = RunScores(b.job, b.scores, b.included, 5.0, 1e-5, 1.0, 1.0, 1.0)
    with pytest.raises(RuntimeError, match="different"):
        estimate([a, b], confidence=0.95)


def test_run_keys_differ_by_index_and_settings() -> None:
    cell = tiny_cell()
    keys = {
        RunJob(cell, OneRunSettings(canaries=50), 0).key,
        RunJob(cell, OneRunSettings(canaries=50), 1).key,
        RunJob(cell, OneRunSettings(canaries=60), 0).key,
        RunJob(tiny_cell(z=2.0), OneRunSettings(canaries=50), 0).key,
    }
    assert len(keys) == 4
