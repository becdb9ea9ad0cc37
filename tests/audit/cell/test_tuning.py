"""Per-setting tuning (``--tune``): what the trials read, the tuned cell's identity, its notes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from audit.cell import tuning
from audit.cell.gen_accuracy import generate_and_classify
from audit.cell.target import train_target
from audit.cell.tuning import (
    NOT_ACCOUNTED,
    TuningRecord,
    search_space,
    start_params,
    trial_cell,
    tune_cell,
    tuned_cell,
    tuning_data,
    tuning_key,
    tuning_notes,
)
from audit.config import SweepConfig
from audit.profiles import PROFILES, ProfileName
from tests.audit.empirical.fixtures import CTX, tiny_cell, tiny_data

NEEDS_OPTUNA = "the tuning runs Optuna's sampler (pip install -e '.[tune]')"


class DataLeak(AssertionError):
    """The tuning read data it must not see."""


class Forbidden:
    """Stands where D_test or D_atk stood: any read of it (indexing, unpacking, its length, an
    attribute) raises :class:`DataLeak`."""

    def __init__(self, what: str) -> None:
        object.__setattr__(self, "what", what)

    def _leak(self, *args: Any, **kwargs: Any) -> Any:
        raise DataLeak(f"the tuning read {self.what}")

    __getitem__ = __iter__ = __len__ = __array__ = __bool__ = _leak

    def __getattr__(self, name: str) -> Any:
        raise DataLeak(f"the tuning read {self.what}.{name}")


def _request(trials: int = 2, seed: int = 0, z: float = 3.0):
    """The tiny cdp cell, planned with ``--tune trials --tune-seed seed``."""
    return replace(tiny_cell(z), options=(("tune_trials", trials), ("tune_seed", seed)))


def _guarded(data):
    """``data`` with D_test, its rows and D_atk's positions replaced by :class:`Forbidden`."""
    return replace(
        data,
        test=Forbidden("D_test"),
        test_index=Forbidden("D_test's rows"),
        attack_members=Forbidden("D_atk's members"),
        attack_nonmembers=Forbidden("D_atk's non-members"),
    )


def _trials(record: TuningRecord) -> list[dict[str, Any]]:
    return [{k: v for k, v in t.items() if k != "seconds"} for t in record.trials]


def test_tuning_never_reads_d_test_or_d_atk() -> None:
    """Tuned with D_test and D_atk unreadable, the trials and the choice are those of the
    tuning that could read them: no trial read them, and none needed to."""
    pytest.importorskip("optuna", reason=NEEDS_OPTUNA)
    cell, data = _request(), tiny_data()
    guarded = tune_cell(cell, _guarded(data), CTX)
    plain = tune_cell(cell, data, CTX)
    assert _trials(guarded) == _trials(plain) and guarded.chosen == plain.chosen
    assert len(guarded.trials) == 2 and guarded.trials[0]["params"] == start_params(
        cell, search_space(cell, tuning_data(data))
    )


def test_a_planted_leak_is_caught(monkeypatch) -> None:
    """The check above can fail: a tuning that scored its trials on D_test (the cell's data
    handed to the trials whole) raises at the first read."""
    pytest.importorskip("optuna", reason=NEEDS_OPTUNA)
    monkeypatch.setattr(tuning, "tuning_data", lambda data: data)
    with pytest.raises(DataLeak, match="D_test"):
        tune_cell(_request(), _guarded(tiny_data()), CTX)


def test_the_first_trial_is_the_untuned_cell() -> None:
    """Trial 0 trains the profile's recipe with the untuned cell's own draws: its objective is
    the untuned cell's accuracy on D_val, so the chosen values never score below it there."""
    pytest.importorskip("optuna", reason=NEEDS_OPTUNA)
    request, data = _request(trials=1), tiny_data()
    (first,) = tune_cell(request, data, CTX).trials
    seen = tuning_data(data)
    assert trial_cell(request, first["params"]) == tiny_cell()
    untuned = tiny_cell()
    acc = generate_and_classify(untuned, seen, train_target(untuned, seen, CTX), CTX).acc
    assert first["value"] == acc


def test_the_trials_see_d_val_where_d_test_stood() -> None:
    data = tiny_data()
    seen = tuning_data(_guarded(data))
    assert seen.test is data.val and seen.train is data.train and seen.val is data.val
    assert seen.test_index is None and seen.attack_members is None


def test_a_tuned_cell_is_hashed_apart_and_runs_as_planned() -> None:
    untuned, request = tiny_cell(), _request()
    hashes = {untuned.config_hash, request.config_hash, _request(seed=1).config_hash}
    assert len(hashes) == 3  # tune=N and the tuning seed are in the hash
    assert len({_request(trials=3).config_hash, request.config_hash}) == 2
    record = TuningRecord(
        tuning_key(request),
        ({"number": 0, "params": {}, "value": 0.5},),
        0,
        {"lr": 1e-4, "batch_size": 32, "classifier_epochs": 1},
    )
    ran = tuned_cell(request, record)
    assert (ran.profile.lr, ran.profile.batch_size) == (1e-4, 32)
    assert ran.canonical() == request.canonical()  # its directory, rows and draws: the plan's
    assert (ran.noise_key, ran.training_key) == (request.noise_key, request.training_key)
    assert ran.noise_key != untuned.noise_key
    with pytest.raises(ValueError, match="is not cell"):
        tuned_cell(_request(z=2.0), record)


def test_sweep_options_only_where_tuned() -> None:
    base = dict(
        dataset="digits",
        mechs=("none",),
        profile_name=ProfileName.QUICK,
        profile=PROFILES[ProfileName.QUICK],
        seeds=(0,),
        out="x",
    )
    assert SweepConfig(**base).tune_options() == ()
    assert SweepConfig(**base, tune=5, tune_seed=2).tune_options() == (
        ("tune_trials", 5),
        ("tune_seed", 2),
    )
    for bad, match in ((0, "positive integer"), (1001, "at most 1000"), (2.5, "positive")):
        with pytest.raises(ValueError, match=match):
            SweepConfig(**base, tune=bad)
    with pytest.raises(ValueError, match="applies with --tune only"):
        SweepConfig(**base, tune_seed=1)


def test_the_rows_say_the_tuning_is_not_accounted() -> None:
    assert tuning_notes(tiny_cell()) == {}
    request = _request()
    record = TuningRecord(tuning_key(request), ({},), 0, {"lr": 1e-4, "batch_size": 32})
    notes = tuning_notes(tuned_cell(request, record))
    assert notes["tuning"].startswith("tuned over 2 trials on D_val")
    assert "lr 0.0001, batch_size 32" in notes["tuning"]
    assert notes["tuning_privacy"].startswith(NOT_ACCOUNTED)
    assert not any("; " in v for v in notes.values())  # privacy_notes joins its notes with "; "


def test_a_record_reads_back_and_a_foreign_one_is_refused() -> None:
    request = _request()
    record = TuningRecord(
        tuning_key(request), ({"number": 0},), 0, {"lr": 1e-4, "batch_size": 32}, {"seconds": 1}
    )
    assert TuningRecord.from_json(record.to_json()) == record
    for chosen in ({"learning_rate": 1e-4}, {"lr": -1.0}):
        with pytest.raises(ValueError):
            TuningRecord.from_json({**record.to_json(), "chosen": chosen})


def test_the_search_space_holds_the_profiles_recipe_and_fits_d_train() -> None:
    data = tiny_data()  # |D_train| = 64
    cell = tiny_cell()
    space = search_space(cell, data)
    assert space.batch_sizes == (16, 32, 64) and space.lr[0] <= cell.profile.lr <= space.lr[1]
    small = replace(data, train=(data.train[0][:40], data.train[1][:40]))
    assert search_space(cell, small).batch_sizes == (16, 32)
    face = replace(cell, profile=replace(cell.profile, classifier="face-embedding"))
    assert search_space(face, data).classifier_lr is None  # a logistic regression: not tuned
    start = start_params(cell, space)
    assert (start["lr"], start["batch_size"], start["classifier_epochs"]) == (2e-3, 16, 1)
