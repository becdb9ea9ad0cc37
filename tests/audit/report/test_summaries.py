"""The report's summaries: t-intervals over seeds, the held-out worst case as a measure."""

from __future__ import annotations

import math

import numpy as np
import pytest

from audit.report.stats import column_intervals, t_interval
from audit.report.summaries import load_runs, setting_summary

from .synthetic import synthetic_runs, write_runs


def test_t_interval_edge_cases_and_vectorised_form():
    assert t_interval([]).format() == "n/a"
    assert t_interval([math.nan, 0.5, 0.7]).n == 2  # NaN (undefined phi) is ignored
    assert t_interval([math.inf, math.inf]).format() == "∞"
    samples = np.random.default_rng(0).random((4, 7))
    mean, hw = column_intervals(samples)
    for j in range(7):
        ref = t_interval(samples[:, j])
        assert (mean[j], hw[j]) == pytest.approx((ref.mean, ref.half_width))


def test_the_held_out_worst_case_is_a_measure_and_the_attack_power(tmp_path):
    """With worst-case columns, each cell gets a 'worst case' row (its held-out MI AP and phi),
    and the attack power the sweet spots compare with their limits is that held-out figure, not
    the maximum over the measures (here 0.2 below every measure's MI AP)."""
    from audit.report.summaries import WORST_CASE

    frame = synthetic_runs(seeds=(0,))
    plain = setting_summary(load_runs(write_runs(tmp_path / "plain", frame)))
    frame = frame.assign(worst_mi_ap=frame["mi_ap"] - 0.2, phi_worst=0.5)
    rows = load_runs(write_runs(tmp_path / "worst", frame))
    worst = rows[rows["distance"] == WORST_CASE]
    assert len(worst) == frame["config_hash"].nunique()
    assert (worst["phi"] == 0.5).all()
    summary = setting_summary(rows)
    lowered = plain["attack_power"].to_numpy() - summary["attack_power"].to_numpy()
    assert lowered.min() > 0.1  # every setting: the held-out figure, not the max
