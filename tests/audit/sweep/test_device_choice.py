"""A sweep's ``--device auto`` and ``--precision auto``: resolved once before any cell, printed,
recorded per cell; a float32 cell keeps its hash; one precision per ``--out`` on resume."""

from __future__ import annotations

import json

import pytest
import torch

import dpvae_core.precision as precision
from audit import io
from audit.datasets import load_dataset
from audit.results import claim_run
from audit.sweep import device_choice
from audit.sweep.device_choice import held_precision, resolve_sweep
from audit.sweep.plan import build_cells
from benchmark import main
from tests.audit.sweep.test_runner import TINY_ARGS, _config


@pytest.fixture
def cpu_only(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def _native(monkeypatch, native: bool) -> None:
    monkeypatch.setattr(precision, "native_bf16_cpu", lambda: native)


def _hashes(config) -> list[str]:
    return [cell.config_hash for pair in build_cells(config, data_sha256="d" * 64) for cell in pair]


@pytest.mark.parametrize(("native", "expected"), [(False, "float32"), (True, "bf16")])
def test_auto_resolves_to_a_stored_precision_and_the_explicit_ones_hashes(
    tmp_path, monkeypatch, cpu_only, native, expected
):
    _native(monkeypatch, native)
    dataset = load_dataset("digits")
    auto = _config(tmp_path, mechs=("cdp",), grid=(1.0,), device="auto", precision="auto")
    with pytest.raises(ValueError, match="'auto' must be resolved before cells are built"):
        build_cells(auto)  # auto never reaches a cell
    resolved, choices = resolve_sweep(auto, dataset, tmp_path)
    assert (resolved.device, resolved.precision) == ("cpu", expected)
    assert choices.lines()[0] == "device: cpu (auto: no CUDA GPU)"
    assert choices.lines()[1].startswith(f"precision: {expected} (auto: this CPU ")
    explicit = _config(tmp_path, mechs=("cdp",), grid=(1.0,), precision=expected)
    assert _hashes(resolved) == _hashes(explicit)
    if expected == "float32":  # the hashes float32 cells had before --precision existed
        assert _hashes(resolved) == _hashes(_config(tmp_path, mechs=("cdp",), grid=(1.0,)))
        assert all("precision" not in dict(c.options) for c, _ in build_cells(resolved))


def test_auto_into_an_out_takes_its_precision_or_refuses_in_one_line(
    tmp_path, monkeypatch, cpu_only
):
    dataset = load_dataset("digits")
    assert held_precision(tmp_path) is None
    bf16 = _config(tmp_path, precision="bf16")
    claim_run(tmp_path, [cell.canonical() for cell, _ in build_cells(bf16, data_sha256="d" * 64)])
    assert held_precision(tmp_path) == "bf16"
    auto = _config(tmp_path, precision="auto")
    _native(monkeypatch, True)
    resolved, choices = resolve_sweep(auto, dataset, tmp_path)
    assert resolved.precision == "bf16" and "holds bf16 cells" in choices.precision.reason
    _native(monkeypatch, False)  # another machine: no bf16 here, so auto cannot resume it
    with pytest.raises(ValueError) as refused:
        resolve_sweep(auto, dataset, tmp_path)
    message = str(refused.value)
    assert "\n" not in message and f"--precision auto: {tmp_path} holds bf16 cells" in message
    assert "resume it on a machine that computes bf16, or sweep into another --out" in message
    # an explicit other precision: refused before any work, as the manifest itself refuses it
    message = "--precision float32: .* holds bf16 cells, .* resume it with --precision bf16"
    with pytest.raises(ValueError, match=message):
        resolve_sweep(_config(tmp_path), dataset, tmp_path)
    with pytest.raises(ValueError, match=r'precision: "bf16" vs \(unset\).*another --out'):
        claim_run(tmp_path, [c.canonical() for c, _ in build_cells(_config(tmp_path))])


def test_a_gpu_probes_the_runs_own_vae_shapes(tmp_path, monkeypatch, cpu_only):
    """On CUDA (mocked: this machine has none), auto times the sweep's target VAE."""
    monkeypatch.setattr(precision, "cuda_bf16", lambda: True)
    seen = {}

    def fake_probe(make_vae, record_shape, num_classes, **kwargs):
        seen.update(kwargs, shape=record_shape, classes=num_classes, vae=make_vae())
        return "the probe"

    import models.precision_probe

    monkeypatch.setattr(models.precision_probe, "vae_step_probe", fake_probe)
    for ratio, expected in ((0.88, "float32"), (1.4, "bf16")):
        monkeypatch.setattr(device_choice, "bf16_speedup", lambda run, r=ratio: r)
        dataset = load_dataset("digits")
        config = _config(tmp_path, precision="auto")
        chosen = device_choice._precision(config, dataset, tmp_path, "cuda")
        assert chosen.precision.value == expected and chosen.speedup == ratio
    assert seen["shape"] == dataset.shape and seen["classes"] == dataset.num_classes
    assert seen["batch_size"] == config.profile.batch_size and seen["device"] == "cuda"
    assert seen["vae"].latent_dim == config.profile.latent_dim


def test_the_default_command_prints_and_records_its_choices(tmp_path, monkeypatch, capsys):
    """No --device, no --precision: auto, resolved before any cell, printed first, recorded in
    the cell (the precision in its config, the device and both reasons in its metadata); a
    resume on a machine without bf16 is refused in one line with nothing run."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    _native(monkeypatch, True)
    tiny = TINY_ARGS[: TINY_ARGS.index("--device")]  # the rest pins cpu and float32
    argv = ["--dataset", "digits", "--profile", "quick", "--no-progress", "--no-report", *tiny]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "device: cpu (auto: no CUDA GPU)"
    assert out[1] == "precision: bf16 (auto: this CPU computes bf16 natively)"
    assert out[2] == "workers: 1 (auto: on the CPU one cell at a time uses every core)"
    assert out[3].startswith("1 cell(s) run, 0 reused")
    cell = next((tmp_path / "cells").iterdir())
    assert io.read_json(cell / "config.json")["config"]["options"]["precision"] == "bf16"
    meta = json.loads((cell / "metadata.json").read_text())
    assert meta["device"] == "cpu"
    assert meta["choices"] == {
        "device": "auto: no CUDA GPU",
        "precision": "auto: this CPU computes bf16 natively",
    }
    _native(monkeypatch, False)
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--precision auto:" in err and "holds bf16 cells" in err
