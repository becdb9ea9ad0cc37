"""One way to train a cell's target: the sweep cell and the audits' extra run share it."""

from __future__ import annotations

import torch

from audit.empirical.canary_hooks import Switches
from audit.empirical.one_run import extra_run
from audit.sweep.cell_run import run_cell
from tests.audit.empirical.fixtures import CTX, tiny_cell, tiny_data


def test_the_cell_and_the_audit_train_the_same_target() -> None:
    cell, data = tiny_cell(), tiny_data()
    outcome = run_cell(cell, data, CTX, acc_real=0.5, code_version="t", baseline_hash="b")
    audited = extra_run(cell, data, CTX, Switches()).model.state_dict()
    assert outcome.model_state.keys() == audited.keys()
    assert all(torch.equal(outcome.model_state[k], audited[k]) for k in audited)
