"""The reconstruction and sample grids from saved models and the cells' attack_index.npz."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from audit import io, results
from audit.cell.membership import attack_data, attack_index, cell_data
from audit.config import CellConfig
from audit.datasets import Dataset, load_dataset, stratified_split
from audit.mechanisms import CellData
from audit.profiles import PROFILES, ProfileName
from audit.report import grids, write_report
from models.vae import ConditionalConvVAE
from tests.test_layers import ROOT, import_graph

from .synthetic import SETTINGS, synthetic_runs, write_runs

TINY = replace(PROFILES[ProfileName.QUICK], epochs=1, max_train=30, latent_dim=4)


def _cell(mech: str, pname: str, value: float | None) -> CellConfig:
    return CellConfig("digits", mech, pname, value, 0, TINY, (("profile_name", "quick"),))


def _cell_data(cell: CellConfig) -> tuple[Dataset, CellData]:
    dataset = load_dataset("digits")
    split = stratified_split(dataset.y, fractions=dataset.split_fractions, seed=cell.seed)
    return dataset, cell_data(dataset, split, cell)


def _real_cell(run_dir: Path, mech: str, pname: str, value: float | None) -> str:
    """A cell directory as the sweep writes it, with an untrained digits VAE."""
    cell = _cell(mech, pname, value)
    cell_dir = run_dir / "cells" / cell.config_hash
    io.write_json(cell_dir / "config.json", {"config": cell.canonical(), "hash": cell.config_hash})
    model = ConditionalConvVAE(channels=1, height=8, width=8, num_classes=10, latent_dim=4)
    io.save_state(cell_dir / "model.pt", {"model": model.state_dict()})
    _, data = _cell_data(cell)
    results.write_attack_index(cell_dir, attack_index(data, cell))
    return cell.config_hash


def _old_records(data: CellData, cell: CellConfig, k: int) -> tuple[torch.Tensor, ...]:
    """What the grids showed when the report recomputed D_atk (the reference): up to k members
    then k non-members of ``attack_data``, classes in turn."""
    atk = attack_data(data, cell)
    y = atk.y.numpy()
    picked = []
    for m in (atk.is_member, ~atk.is_member):
        idx = np.flatnonzero(m)
        rank = {c: 0 for c in np.unique(y)}
        order = []
        for i in idx:  # the first of each class, then the second, ...
            order.append((rank[y[i]], y[i], i))
            rank[y[i]] += 1
        picked += [i for _, _, i in sorted(order)][:k]
    return atk.x[picked], atk.y[picked], torch.from_numpy(atk.is_member[picked])


@pytest.mark.parametrize("max_train", [30, None])
def test_saved_attack_set_shows_the_records_the_pipeline_attacked(max_train):
    """attack_index.npz's rows give the grids exactly the records a recomputed D_atk gave."""
    profile = replace(TINY, max_train=max_train)
    cell = replace(_cell("none", "none", None), profile=profile)
    dataset, data = _cell_data(cell)
    attacked = attack_index(data, cell)
    atk = attack_data(data, cell)
    np.testing.assert_array_equal(attacked.is_member, atk.is_member)
    np.testing.assert_array_equal(dataset.y[attacked.index], atk.y.numpy())
    np.testing.assert_array_equal(dataset.x[attacked.index], atk.x.numpy())
    np.testing.assert_array_equal(dataset.y[attacked.train_index], data.train[1].numpy())
    for k in (0, 1, 4):
        got = grids._cell_records(dataset, attacked, k)
        for a, b in zip(got, _old_records(data, cell, k), strict=True):
            assert torch.equal(a, b)


def test_a_cell_without_attack_set_is_skipped_with_a_note(tmp_path):
    """A cell finished before attack_index.npz existed: its grid row is left out, and the note
    says how to get it back; the report never recomputes the cell."""
    frame = synthetic_runs(seeds=(0,), settings=SETTINGS[:2]).assign(dataset="digits", acc_base=0.1)
    run_dir = tmp_path / "run"
    hashes = {
        "none": _real_cell(run_dir, "none", "none", None),
        "cdp": _real_cell(run_dir, "cdp", "noise_multiplier", 0.1),
    }
    frame["config_hash"] = [hashes["none" if m == "none" else "cdp"] for m in frame.mech]
    (run_dir / "cells" / hashes["cdp"] / "attack_index.npz").unlink()
    report = write_report(write_runs(run_dir, frame), formats=("png",))
    (note,) = [s for s in report.skipped if hashes["cdp"] in s]
    assert "no attack_index.npz" in note and "--overwrite" in note
    assert "digits-quick-reconstructions_none.png" in {p.name for p in report.figures}


def test_the_report_never_imports_the_pipeline():
    graph = import_graph(ROOT)
    seen, todo = set(), [m for m in graph if m == "audit.report" or m.startswith("audit.report.")]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph[module]
    assert "audit.sweep.cell_run" not in seen and "audit.sweep.runner" not in seen


def test_image_grids_from_saved_models(tmp_path):
    frame = synthetic_runs(seeds=(0,), settings=SETTINGS[:3]).assign(dataset="digits", acc_base=0.1)
    run_dir = tmp_path / "run"
    hashes = {
        "none": _real_cell(run_dir, "none", "none", None),
        "cdp-0.1": _real_cell(run_dir, "cdp", "noise_multiplier", 0.1),
        "cdp-1": _real_cell(run_dir, "cdp", "noise_multiplier", 1.0),
    }
    frame["config_hash"] = [
        hashes["none"] if m == "none" else hashes[f"cdp-{v:g}"]
        for m, v in zip(frame.mech, frame.param_value, strict=True)
    ]
    (run_dir / "cells" / hashes["cdp-1"] / "model.pt").write_bytes(b"not a model")
    report = write_report(write_runs(run_dir, frame))
    names = {p.name for p in report.figures}
    assert {"digits-quick-reconstructions_cdp.png", "digits-quick-samples_cdp.pdf"} <= names
    assert any(hashes["cdp-1"] in s and "image grids" in s for s in report.skipped)


def test_samples_grid_shows_every_class(tmp_path, monkeypatch):
    """The grid drew 2 * 4 samples, so digits showed classes 0-7 only."""
    from matplotlib.figure import Figure

    titles: dict[str, list[str]] = {}

    def record(rows, *, column_titles, title):
        titles[title] = list(column_titles)
        return Figure()

    monkeypatch.setattr(grids, "image_grid", record)
    frame = synthetic_runs(seeds=(0,), settings=SETTINGS[:2]).assign(dataset="digits", acc_base=0.1)
    run_dir = tmp_path / "run"
    hashes = {
        "none": _real_cell(run_dir, "none", "none", None),
        "cdp": _real_cell(run_dir, "cdp", "noise_multiplier", 0.1),
    }
    frame["config_hash"] = [hashes["none" if m == "none" else "cdp"] for m in frame.mech]
    write_report(write_runs(run_dir, frame), formats=("png",))
    (samples,) = [t for t in titles if "generated samples" in t]
    assert set(titles[samples]) == {str(c) for c in range(10)}
    assert "latent code ~ N(0, I)" in samples and "noise multiplier z" in samples
