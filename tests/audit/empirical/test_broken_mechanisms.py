"""Every estimator against broken and correct mechanisms (issue 28), on the tiny cells.

The one-run estimators (Steinke et al.'s ``one-run`` and the f-DP ``one-run-fdp``) are tested in
``test_one_run.py``; here the several-run ones, Clopper-Pearson (threshold from the first run,
the bound on the second) and GDP (Nasr et al. 2023, over both), on R = 2 real training runs of
m = 200 gradient canaries each, seeded as :func:`audit.empirical.multi_run.compute_run` seeds a
run. Each estimator is a 95 % lower bound, so a correct mechanism exceeds its claim with
probability at most 5 % per estimator and seed; the seeds are fixed, so the outcome is too. Each
test first checks that the estimator's ceiling (every score on the right side of the threshold)
lies above the claim, so that a broken mechanism can show.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from audit.empirical.estimators import clopper_pearson_epsilon, gdp_epsilon
from audit.empirical.multi_run import MultiRunAudit, RunJob, RunScores, estimate
from audit.empirical.one_run import audit_one_run
from audit.empirical.one_run_settings import Broken, OneRunSettings
from dpvae_core.seeding import derive_seed
from tests.audit.empirical.fixtures import CTX, tiny_cell, tiny_data, tiny_dp_cell

RUNS, M = 2, 200
#: z per mechanism where the claim (delta 1e-5) is below every estimator's ceiling at m = 200:
#: cdp z = 3 claims 1.63, cdp-termwise z = 6 claims 1.88, dp2vae z = 250 claims 1.69.
Z = {"cdp": 3.0, "cdp-termwise": 6.0, "dp2vae": 250.0}


def _cell(mech: str, seed: int):
    return tiny_cell(z=Z[mech], seed=seed) if mech == "cdp" else tiny_dp_cell(mech, Z[mech], seed)


def _multi_run(mech: str, *, seed: int, broken: Broken = Broken.NONE) -> MultiRunAudit:
    # without clipping a canary of norm 100 z C outweighs the noise z C (as in test_one_run)
    norm = 100 * Z[mech] if broken is Broken.NO_CLIP and mech != "cdp" else 10.0
    settings = OneRunSettings(canaries=M, broken=broken, canary_norm=norm)
    results = []
    for i in range(RUNS):
        run_seed = derive_seed(seed, "broken-mechanism-test", i) % 2**31
        audit = audit_one_run(
            _cell(mech, run_seed), tiny_data(), CTX, replace(settings, seed=run_seed)
        )
        results.append(RunScores.of(RunJob(_cell(mech, seed), settings, i), audit))
    return estimate(results, confidence=0.95)


def _ceilings(audit: MultiRunAudit) -> tuple[float, float]:
    """Clopper-Pearson's and GDP's bounds had every canary been separated: the counts of the
    held-out run (Clopper-Pearson) and of both runs (GDP)."""
    r = audit.rates
    cp, _ = clopper_pearson_epsilon(
        np.ones(r.positives), np.zeros(r.negatives), threshold=0.5, delta=audit.delta
    )
    n_in = round(audit.runs * audit.m / 2)
    gdp = gdp_epsilon(np.ones(n_in), np.zeros(audit.runs * audit.m - n_in), delta=audit.delta)
    return cp, gdp.epsilon


def _check_ceilings(audit: MultiRunAudit) -> None:
    cp_ceiling, gdp_ceiling = _ceilings(audit)
    # m = 200 a run: about 100 in and 100 out in the held-out run give a Clopper-Pearson ceiling
    # near 3.3, and 400 pooled scores a GDP ceiling above 10; both above claims of 1.6-1.9
    assert min(cp_ceiling, gdp_ceiling) > audit.claim_epsilon


@pytest.mark.statistical
@pytest.mark.parametrize("broken", [Broken.NO_NOISE, Broken.NO_CLIP])
def test_several_run_estimators_exceed_the_claim_of_a_broken_cdp(broken: Broken) -> None:
    audit = _multi_run("cdp", seed=0, broken=broken)
    _check_ceilings(audit)
    assert audit.claim_epsilon == pytest.approx(1.629, abs=1e-3)
    assert min(audit.clopper_pearson, audit.gdp) > audit.claim_epsilon
    # and each run's own one-run bounds (test_one_run.py checks them run by run)
    assert min(audit.one_run_mean, audit.one_run_fdp_mean) > audit.claim_epsilon


@pytest.mark.statistical
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_several_run_estimators_stay_below_the_claim_of_a_correct_cdp(seed: int) -> None:
    audit = _multi_run("cdp", seed=seed)
    _check_ceilings(audit)
    bounds = (audit.clopper_pearson, audit.gdp, audit.one_run_mean, audit.one_run_fdp_mean)
    assert max(bounds) < audit.claim_epsilon


@pytest.mark.slow
@pytest.mark.parametrize("broken", [Broken.NO_NOISE, Broken.NO_CLIP])
@pytest.mark.parametrize("mech", ["cdp-termwise", "dp2vae"])
def test_several_run_estimators_exceed_the_claims_of_other_broken_mechanisms(
    mech: str, broken: Broken
) -> None:
    audit = _multi_run(mech, seed=0, broken=broken)
    _check_ceilings(audit)
    assert min(audit.clopper_pearson, audit.gdp) > audit.claim_epsilon


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("mech", ["cdp-termwise", "dp2vae"])
def test_several_run_estimators_stay_below_the_claims_of_other_correct_mechanisms(
    mech: str, seed: int
) -> None:
    audit = _multi_run(mech, seed=seed)
    _check_ceilings(audit)
    assert max(audit.clopper_pearson, audit.gdp) < audit.claim_epsilon
