"""Reference VAEs: what they train on, that they differ, and the cache that shares them."""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np
import pytest
import torch

from attacks.threat import Records
from audit.cell import reference_training, references
from audit.cell.reference_training import build_reference_model, reference_set
from audit.cell.references import ReferenceSpec, records_digest, reference_recipe
from audit.results.reference_cache import (
    cache_dir,
    cached_models,
    load_cached,
    save_models,
    save_trained,
)


def _reference(n: int = 24, *, seed: int = 0) -> Records:
    gen = torch.Generator().manual_seed(seed)
    return Records(torch.rand(n, 1, 8, 8, generator=gen), torch.arange(n) % 3)


def _spec(reference: Records, *, n_models: int = 2, n_train: int = 8, seed: int = 0):
    recipe = reference_recipe(
        record_shape=(1, 8, 8),
        num_classes=3,
        latent_dim=2,
        epochs=1,
        batch_size=4,
        lr=1e-3,
        beta=1.0,
        n_reference=len(reference),
        n_train=n_train,
    )
    return ReferenceSpec(
        dataset="digits",
        data_sha256="d" * 64,
        seed=seed,
        recipe=recipe,
        records_sha256=records_digest(reference),
        n_reference=len(reference),
        n_models=n_models,
    )


@pytest.fixture
def count_training(monkeypatch):
    """How many VAEs :mod:`audit.cell.references` trains."""
    calls = []
    real = reference_training.train_vae

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(reference_training, "train_vae", counting)
    return calls


def test_each_model_trains_on_its_own_subset_no_larger_than_d_train():
    reference = _reference(24)
    spec = _spec(reference, n_models=3, n_train=8)
    assert spec.recipe.records_per_model == 8  # min(24 // 2, |D_train| = 8)
    assert _spec(reference, n_train=50).recipe.records_per_model == 12  # half of them
    models = reference_set(spec, reference).models
    subsets = [tuple(m.records) for m in models]
    assert all(len(s) == 8 and len(set(s)) == 8 and max(s) < 24 for s in subsets)
    assert len(set(subsets)) == 3  # the models differ
    assert not torch.equal(models[0].state["fc_mu.weight"], models[1].state["fc_mu.weight"])


def test_same_spec_gives_the_same_models():
    reference = _reference()
    first, again = (reference_set(_spec(reference), reference).models for _ in range(2))
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a.records, b.records)
        assert all(torch.equal(a.state[k], b.state[k]) for k in a.state)


def test_the_key_names_dataset_data_seed_recipe_records_and_r():
    reference = _reference()
    spec = _spec(reference)
    assert spec.key == _spec(reference).key
    changed = [
        replace(spec, seed=1),
        replace(spec, n_models=3),
        replace(spec, data_sha256="e" * 64),
        replace(spec, dataset="lfw-subset"),
        replace(spec, recipe=replace(spec.recipe, epochs=2)),
        replace(spec, recipe=replace(spec.recipe, precision="bf16")),
        _spec(_reference(seed=1)),
    ]
    assert len({spec.key, *(c.key for c in changed)}) == 1 + len(changed)
    # float32, the default, is left out of the key: caches from before the field stay valid
    assert "precision" not in spec.canonical()["recipe"]


def test_a_cached_set_is_loaded_not_trained_again(tmp_path, count_training):
    reference = _reference()
    spec = _spec(reference)
    first = reference_set(spec, reference)
    assert first.trained == (0, 1) and len(count_training) == 2
    save_trained(tmp_path, first)
    assert (cache_dir(tmp_path, spec) / "reference.json").is_file()
    again = reference_set(spec, reference, cached=cached_models(tmp_path, spec))
    assert again.trained == () and len(count_training) == 2  # nothing trained
    for a, b in zip(first.models, again.models, strict=True):
        assert all(torch.equal(a.state[k], b.state[k]) for k in a.state)
    x = reference.x[:3]
    y = reference.y[:3]
    built = [build_reference_model(spec.recipe, m) for m in (first.models[0], again.models[0])]
    torch.testing.assert_close(built[0].encode(x, y), built[1].encode(x, y))
    assert "0 trained in this cell" in again.note() and "2 from the cache" in again.note()


def test_a_partial_or_foreign_model_file_is_not_used(tmp_path, count_training, caplog):
    reference = _reference()
    spec = _spec(reference, n_models=3)
    save_trained(tmp_path, reference_set(spec, reference))
    folder = cache_dir(tmp_path, spec)
    torn = (folder / "model_0.pt").read_bytes()
    (folder / "model_0.pt").write_bytes(torn[: len(torn) // 2])  # as a non-atomic writer leaves
    (folder / ".model_1.pt.abcd1234.tmp").write_bytes(torn)  # a killed atomic write: ignored
    other = _spec(reference, n_models=3, seed=7)
    save_models(tmp_path, other, reference_set(other, reference).models[2:])
    (cache_dir(tmp_path, other) / "model_2.pt").replace(folder / "model_2.pt")  # another key's
    count_training.clear()
    with caplog.at_level(logging.WARNING):
        found = load_cached(tmp_path, spec)
    assert sorted(found) == [1]
    assert "model_0.pt" in caplog.text and "model_2.pt" in caplog.text
    again = reference_set(spec, reference, cached=found.values())
    assert again.trained == (0, 2) and len(count_training) == 2
    save_trained(tmp_path, again)
    assert sorted(load_cached(tmp_path, spec)) == [0, 1, 2]


def test_models_of_another_spec_are_ignored_by_the_set():
    reference = _reference()
    spec, other = _spec(reference), _spec(reference, seed=3)
    foreign = reference_set(other, reference).models
    assert reference_set(spec, reference, cached=foreign).trained == (0, 1)


def test_a_bad_spec_is_refused():
    reference = _reference()
    with pytest.raises(ValueError, match="n_models must be a positive integer"):
        _spec(reference, n_models=0)
    spec = _spec(reference)
    with pytest.raises(ValueError, match="is for 24 reference records, got 10"):
        reference_training.train_reference_model(spec, _reference(10), 0)


def _cell(mech: str, name: str, value: float | None, *, seed: int = 0):
    from audit.config import CellConfig
    from audit.profiles import PROFILES, ProfileName

    profile = replace(
        PROFILES[ProfileName.QUICK], epochs=1, batch_size=4, latent_dim=2, reference_models=2
    )
    return CellConfig(
        dataset="digits",
        mech=mech,
        param_name=name,
        param_value=value,
        seed=seed,
        profile=profile,
        options=(("data_sha256", "d" * 64),),
        attacks=("latent-search", "likelihood"),
    )


def _cell_data(n_train: int = 8):
    from audit.mechanisms import CellData

    gen = torch.Generator().manual_seed(1)
    pair = (torch.rand(n_train, 1, 8, 8, generator=gen), torch.arange(n_train) % 3)
    return CellData(pair, pair, pair, 3, 100)


@pytest.mark.parametrize(
    ("mech", "name", "value"), [("cdp", "noise_multiplier", 1.0), ("ldp", "eps_i", 1.0)]
)
def test_mechanism_copying_models_train_through_the_cells_mechanism(monkeypatch, mech, name, value):
    """Carlini et al.'s shadow models copy the training: a private cell's reference models run
    the target's own code path (prepare, train) with the cell's mechanism and grid value, each
    under its own seed (so its own noise), and differ from the non-private set."""
    from audit.cell import target as target_training

    seen = []
    real = target_training.start_target  # prepare and build, as the target's path does

    def spy(cell, data, ctx):
        seen.append((cell, len(data.train[0])))
        return real(cell, data, ctx)

    monkeypatch.setattr(reference_training, "start_target", spy)
    reference = _reference(24)
    cell = _cell(mech, name, value, seed=5)
    copying = references.cell_spec(cell, _cell_data(), reference)
    plain = references.cell_spec(cell, _cell_data(), reference, copy_mechanism=False)
    assert copying.recipe.mechanism == mech and plain.recipe.nonprivate
    assert copying.key != plain.key
    models = reference_set(copying, reference).models
    assert [(c.mech, c.param_value, n) for c, n in seen] == [(mech, value, 8)] * 2
    seeds = {c.seed for c, _ in seen}
    assert len(seeds) == 2 and cell.seed not in seeds  # each model its own draws
    assert all(c.profile.batch_size == 4 and c.attacks == ("reconstruction",) for c, _ in seen)
    baseline = reference_set(plain, reference).models
    assert len(seen) == 2  # the non-private set does not go through the mechanism
    assert not torch.equal(models[0].state["fc_mu.weight"], baseline[0].state["fc_mu.weight"])
    built = build_reference_model(copying.recipe, models[0])
    assert built.encode(reference.x[:2], reference.y[:2])[0].shape == (2, 2)
    assert f"the cell's mechanism, {mech} {name}=1" in reference_set(copying, reference).note()


def test_a_copying_recipe_caps_its_batch_at_its_records():
    cell = _cell("cdp", "noise_multiplier", 1.0)
    cell = replace(cell, profile=replace(cell.profile, batch_size=16))
    reference = _reference(24)
    spec = references.cell_spec(cell, _cell_data(8), reference)
    assert spec.recipe.records_per_model == 8 and spec.recipe.batch_size == 8  # q = 1, not 2
    plain = references.cell_spec(cell, _cell_data(8), reference, copy_mechanism=False)
    assert plain.recipe.batch_size == 16  # non-private Adam: as before


def test_dp_adam_copies_of_an_lstm_vae_load_in_its_fast_implementation():
    """Series: DP-Adam trains Opacus's DPLSTMs; the cached state is the fused model's, which
    the reference VAE is built in (a state with DPLSTM keys would not load)."""
    gen = torch.Generator().manual_seed(2)
    reference = Records(torch.rand(24, 10, 3, generator=gen) * 2 - 1, torch.arange(24) % 3)
    pair = (reference.x[:8], reference.y[:8])
    from audit.mechanisms import CellData

    cell = _cell("cdp", "noise_multiplier", 1.0)
    spec = references.cell_spec(cell, CellData(pair, pair, pair, 3, 100), reference)
    (model, _) = reference_set(spec, reference).models
    assert not any(".l0.ih." in key for key in model.state)
    built = build_reference_model(spec.recipe, model)
    assert built.encode(reference.x[:2], reference.y[:2])[0].shape == (2, 2)
