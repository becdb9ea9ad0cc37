"""A cell's target and reference models trained together (audit/cell/ensemble_training.py):
each model as the usual path trains it alone, the references handed to the attack step as
trained by this cell. The ensemble runs on CUDA only; these tests let it run on the CPU.

Tolerance: the weights' distance ||w_together - w_alone|| / ||w_alone - w_init|| is at most
2 T gamma_n in float32 (tests/models/test_ensemble.py derives it), n = batch x 8 x 8 digits
pixels (the longest sum: a decoder convolution's weight gradient), T the model's steps.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import models.ensemble as ensemble
from audit.cell import reference_training
from audit.cell.ensemble_training import train_together
from audit.cell.membership import reference_records
from audit.cell.reference_training import reference_set
from audit.cell.references import cell_reference_specs
from audit.cell.target import start_target, train_target
from audit.sweep.cell_run import run_cell
from tests.audit.empirical.fixtures import CTX, TINY_PROFILE, tiny_cell, tiny_data

PROFILE = replace(TINY_PROFILE, epochs=2, reference_models=2)


def _cell(mech: str, name: str, value):
    return replace(
        tiny_cell(),
        mech=mech,
        param_name=name,
        param_value=value,
        mech_options=None,
        profile=PROFILE,
        attacks=("likelihood",),
    )


def _data():
    """tiny_data with 160 D_test records, so that the cell has reference records."""
    data = tiny_data()
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.from_numpy(bunch.images[160:320, None] / 16.0).float()
    y = torch.from_numpy(bunch.target[160:320]).long()
    return replace(data, test=(x, y), n_total=256)


NONE = ("none", "none", None)
LDP = ("ldp", "eps_i", 4.0)


@pytest.fixture
def on_cpu(monkeypatch):
    monkeypatch.setattr(ensemble, "ENSEMBLE_DEVICE_TYPES", frozenset({"cpu"}))


def _flat(state) -> torch.Tensor:
    return torch.cat([v.detach().double().flatten() for v in state.values()])


def _close(together, alone, init, *, records: int, batch: int) -> None:
    u = torch.finfo(torch.float32).eps / 2
    n = batch * 8 * 8
    steps = PROFILE.epochs * -(-records // batch)
    moved = (_flat(alone) - _flat(init)).norm()
    assert float((_flat(together) - _flat(alone)).norm() / moved) <= 2 * steps * n * u / (1 - n * u)


def _init(cell, data):
    """The target's initial weights."""
    return start_target(cell, data, CTX).model.state_dict()


def test_on_the_cpu_nothing_trains_together():
    together = train_together(_cell(*NONE), _data(), CTX)
    assert together.target is None and together.started is None and together.references == ()


@pytest.mark.parametrize("mech", [NONE, LDP])
def test_target_and_references_equal_their_solo_training(on_cpu, monkeypatch, mech):
    cell, data = _cell(*mech), _data()
    together = train_together(cell, data, CTX)
    specs = cell_reference_specs(cell, data)
    assert together.target is not None and together.started is None
    assert len(together.references) == 2 * len(specs)  # mech none: one set; ldp: two
    alone = train_target(cell, data, CTX)
    _close(
        together.target.model.state_dict(),
        alone.model.state_dict(),
        _init(cell, data),
        records=64,
        batch=PROFILE.batch_size,
    )
    assert together.target.claim == alone.claim
    assert len(together.target.trained.history.train_loss) == PROFILE.epochs
    reference = reference_records(data, cell)
    calls = []
    real = reference_training.train_vae
    monkeypatch.setattr(
        reference_training, "train_vae", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    for spec in specs:
        solo = reference_set(spec, reference)
        trained = len(calls)
        fresh = reference_set(spec, reference, fresh=together.references)
        assert len(calls) == trained and fresh.trained == (0, 1)  # this cell trained them
        for a, b in zip(fresh.models, solo.models, strict=True):
            assert (a.key, a.index) == (b.key, b.index) and (a.records == b.records).all()
            assert a.state.keys() == b.state.keys()
            init = reference_training.start_reference(spec, reference, a.index).member
            _close(
                a.state,
                b.state,
                init.model.state_dict(),
                records=spec.recipe.records_per_model,
                batch=spec.recipe.batch_size,
            )


def test_a_dp_cell_trains_its_nonprivate_references_together(on_cpu):
    cell, data = tiny_cell(), _data()
    cell = replace(cell, profile=PROFILE, attacks=("likelihood",))
    copying, plain = cell_reference_specs(cell, data)
    together = train_together(cell, data, CTX)
    assert together.target is None and together.started is not None  # DP-Adam trains alone
    assert {(m.key, m.index) for m in together.references} == {(plain.key, 0), (plain.key, 1)}
    started = train_target(cell, data, CTX, start=together.started).model.state_dict()
    fresh = train_target(cell, data, CTX).model.state_dict()
    assert all(torch.equal(started[k], fresh[k]) for k in fresh)  # the same DP-Adam run
    cached = train_together(cell, data, CTX, cached=together.references)
    assert cached.references == ()  # nothing left to train together (the copying set is DP)


def test_the_cell_hands_its_references_to_the_cache(on_cpu):
    cell, data = _cell(*NONE), _data()
    outcome = run_cell(cell, data, CTX, acc_real=0.5, code_version="t", baseline_hash="b")
    (references,) = outcome.references
    assert references.trained == (0, 1) and len(references.new_models) == 2
