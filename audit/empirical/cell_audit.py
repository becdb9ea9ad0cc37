"""A sweep cell's empirical audit (``--canary-audit``): the matching audit of its mechanism, as the
``epsilon_lower*`` columns of its rows. Which audit applies is the mechanism's to say
(:class:`~audit.mechanisms.mechanism.Mechanism`):

- a local randomizer (ldp, vae-ldp): the mechanism's own worst-case-input audit of it
  (:meth:`~audit.mechanisms.mechanism.Mechanism.local_audits`, against the claim of the
  ``epsilon`` column at the cell's delta);
- DP-SGD training (cdp, cdp-termwise, dp2vae:
  :attr:`~audit.mechanisms.mechanism.Mechanism.one_run_audit`): the one-run audit
  (:func:`audit.empirical.one_run.audit_one_run`) twice, each ONE extra training run of the
  cell's mechanism and settings (about the cost of the cell's own training): gradient canaries
  (the white-box bound on the implementation: ``epsilon_lower``) and input canaries scored by
  the strongest attack of the release (the bound a user's adversary gets:
  ``epsilon_lower_input``). Both run at every delta: whether a bound is provable is for the
  computation to decide (there is no rule on 2 m delta: its term is 2 m delta times a
  probability that can be tiny, and the f-DP bound can prove a lot where Steinke et al.'s
  gives 0: m = r = v = 100 at delta 0.02 give 4.30 and 0);
- the baseline: nothing to audit.

M (local audits) and m (canaries) come from the profile (:data:`DRAWS`, :data:`CANARIES`,
:data:`INPUT_CANARIES`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from audit.config import CellConfig
from audit.empirical.bounds import (
    OneRunBound,
    one_run_p_value,
    threshold_test_p_value,
)
from audit.empirical.estimators import Estimator, one_run_fdp_p_value
from audit.empirical.local import DRAWS, LocalAudit
from audit.mechanisms import CellData, Context, available_mechanisms, get_mechanism
from audit.privacy.claim import PrivacyClaim
from dpvae_core.seeding import derive_seed

#: Gradient canaries m of the one-run audit, by profile (quick: small, one extra short run).
CANARIES = {"quick": 100, "standard": 1000, "paper": 1000}
#: Input canaries m, by profile: the included half joins D_train (about m/2 records more to
#: train on), so fewer than gradient canaries.
INPUT_CANARIES = {"quick": 100, "standard": 200, "paper": 1000}
CELL_AUDIT_TAG = "cell-audit"


@dataclass(frozen=True)
class CellAudit:
    """The ``epsilon_lower*`` columns of a cell's rows, and a note for its ``privacy_notes``.

    ``bound``: the lower bound at 95 % confidence (NaN: not audited); ``kind``: how it was
    obtained; ``m``: draws M per input or canaries m (0: none); ``ceiling``: the most this audit
    could prove (all tests right); ``seconds``: the audit's time, extra training run included.
    ``p_value`` (and the f-DP and input ones): the p-value of the cell's claim given the same
    data (the smallest ``1 - confidence`` at which the bound would exceed it; NaN: no bound or
    no finite claim), which the gate compares with a family-wise corrected level
    (:func:`audit.check.checking.bound_violations`).
    """

    bound: float = math.nan
    kind: str = ""
    m: int = 0
    ceiling: float = math.nan
    seconds: float = 0.0
    note: str = ""
    input_bound: float = math.nan
    input_m: int = 0
    input_ceiling: float = math.nan
    estimator: str = ""
    fdp_bound: float = math.nan
    input_fdp_bound: float = math.nan
    p_value: float = math.nan
    fdp_p_value: float = math.nan
    input_p_value: float = math.nan
    input_fdp_p_value: float = math.nan

    def columns(self) -> dict[str, Any]:
        return {
            "epsilon_lower": self.bound,
            "epsilon_lower_estimator": self.estimator,
            "epsilon_lower_fdp": self.fdp_bound,
            "epsilon_lower_input_fdp": self.input_fdp_bound,
            "epsilon_lower_kind": self.kind,
            "epsilon_lower_m": self.m,
            "epsilon_lower_ceiling": self.ceiling,
            "epsilon_lower_input": self.input_bound,
            "epsilon_lower_input_m": self.input_m,
            "epsilon_lower_input_ceiling": self.input_ceiling,
            "epsilon_lower_p": self.p_value,
            "epsilon_lower_fdp_p": self.fdp_p_value,
            "epsilon_lower_input_p": self.input_p_value,
            "epsilon_lower_input_fdp_p": self.input_fdp_p_value,
        }


NOT_AUDITED = CellAudit()


def audited_mechanisms() -> list[str]:
    """The mechanisms with an empirical audit, in registration order: the DP-SGD ones' one-run
    audit (:attr:`~audit.mechanisms.mechanism.Mechanism.one_run_audit`) or a mechanism's own
    local audits (:meth:`~audit.mechanisms.mechanism.Mechanism.local_audits`)."""
    return [m for m in available_mechanisms() if get_mechanism(m).audited]


def local_mechanisms() -> tuple[str, ...]:
    """The audited mechanisms whose audit is their own local one
    (:meth:`~audit.mechanisms.mechanism.Mechanism.local_audits`); the others get the one-run
    audit (:func:`audit.empirical.one_run.one_run_mechanisms`)."""
    return tuple(m for m in audited_mechanisms() if not get_mechanism(m).one_run_audit)


def audit_cell(cell: CellConfig, data: CellData, ctx: Context, claim: PrivacyClaim) -> CellAudit:
    """The cell's audit when ``cell.audit`` is set (else :data:`NOT_AUDITED`): the one-run audit
    where it applies, else the mechanism's local audit against the claim of the ``epsilon``
    column; :data:`NOT_AUDITED` for a mechanism without an audit (the baseline)."""
    mechanism = get_mechanism(cell.mech)
    if not cell.audit or not mechanism.audited:
        return NOT_AUDITED
    profile = cell.option("profile_name", "quick")
    seed = derive_seed(cell.seed, CELL_AUDIT_TAG) % 2**31
    if mechanism.one_run_audit:
        return _audit_dp_training(cell, data, ctx, claim, profile=profile, seed=seed)
    audits = mechanism.local_audits(cell, data, draws=DRAWS[profile], seed=seed, delta=claim.delta)
    return _from_local(audits[-1], claim)


def _p_at(claim: PrivacyClaim, p_value: Callable[[float], float]) -> float:
    """``p_value(claim.epsilon)``, or NaN where the claim is not a finite epsilon (nothing to
    reject)."""
    return p_value(claim.epsilon) if math.isfinite(claim.epsilon) else math.nan


def _from_local(audit: LocalAudit, claim: PrivacyClaim) -> CellAudit:
    return CellAudit(
        bound=audit.epsilon,
        p_value=_p_at(claim, lambda eps: threshold_test_p_value(audit.bound, eps)),
        kind="local-worst-case",
        estimator=Estimator.LOCAL_WORST_CASE.value,
        m=audit.draws,
        ceiling=audit.ceiling,
        seconds=audit.seconds,
        note=f"{audit.mechanism} on {audit.pair}, M = {audit.draws} draws per input, against "
        f"the {audit.claim_kind} claim {audit.claim:.6g}, {audit.seconds:.1f} s",
    )


def _audit_dp_training(
    cell: CellConfig,
    data: CellData,
    ctx: Context,
    claim: PrivacyClaim,
    *,
    profile: str,
    seed: int,
) -> CellAudit:
    from audit.empirical.one_run import audit_one_run
    from audit.empirical.one_run_settings import CanaryKind, OneRunSettings

    kind = "one-run-gradient"
    m, m_input = CANARIES[profile], INPUT_CANARIES[profile]
    audits = {
        canary: audit_one_run(
            cell, data, ctx, OneRunSettings(kind=canary, canaries=count, seed=seed)
        )
        for canary, count in ((CanaryKind.GRADIENT, m), (CanaryKind.INPUT, m_input))
    }
    grad, inp = audits[CanaryKind.GRADIENT], audits[CanaryKind.INPUT]
    b, bi = grad.bound, inp.bound

    def steinke(x: OneRunBound) -> float:
        return _p_at(
            claim,
            lambda eps: one_run_p_value(m=x.m, r=x.r, v=x.v, epsilon=eps, delta=x.delta),
        )

    def fdp(x: OneRunBound) -> float:
        if not 0 < x.delta < 1:
            return math.nan
        return _p_at(
            claim,
            lambda eps: one_run_fdp_p_value(m=x.m, r=x.r, v=x.v, epsilon=eps, delta=x.delta),
        )

    return CellAudit(
        bound=b.epsilon,
        p_value=steinke(b),
        fdp_p_value=fdp(b),
        input_p_value=steinke(bi),
        input_fdp_p_value=fdp(bi),
        kind=kind,
        estimator=Estimator.ONE_RUN.value,
        fdp_bound=grad.fdp_epsilon,
        input_fdp_bound=inp.fdp_epsilon,
        m=b.m,
        ceiling=b.ceiling,
        seconds=grad.seconds + inp.seconds,
        input_bound=bi.epsilon,
        input_m=bi.m,
        input_ceiling=bi.ceiling,
        note=f"one-run audits (Steinke et al. 2023) at delta {b.delta:.3g}: m = {b.m} gradient "
        f"canaries, guesses k+ = {grad.k_plus}, k- = {grad.k_minus} ({grad.guess_rule} rule), "
        f"{b.v} of r = {b.r} right, f-DP bound {grad.fdp_epsilon:.4g}, extra run "
        f"{grad.train_seconds:.1f} s; "
        f"m = {bi.m} input canaries ({inp.score}), {bi.v} of r = {bi.r} right, f-DP bound "
        f"{inp.fdp_epsilon:.4g}, extra run "
        f"{inp.train_seconds:.1f} s; against the claim {grad.claim.epsilon:.6g} (input run: "
        f"{inp.claim.epsilon:.6g} for its N_train)",
    )
