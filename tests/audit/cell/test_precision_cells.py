"""``--precision``: a run option in every cell's hash but float32's, one precision per run
directory, a mixed-precision cell drawing its float32 twin's noise, and a bad request refused
with one line and exit status 2 before any work."""

from __future__ import annotations

import pandas as pd
import pytest

from audit import io
from audit.mechanisms.mechanism import training_seed
from audit.sweep.plan import build_cells
from audit.sweep.real_accuracy import _acc_real_key
from audit.sweep.runner import run_sweep
from benchmark import main
from tests.audit.sweep.test_runner import TINY_ARGS, _config


def _cells(tmp_path, precision):
    config = _config(tmp_path, mechs=("cdp",), grid=(1.0,), precision=precision)
    return [cell for pair in build_cells(config, data_sha256="d" * 64) for cell in pair]


def test_precision_is_in_the_hash_but_not_in_the_draws(tmp_path):
    plain, low = _cells(tmp_path, "float32"), _cells(tmp_path, "bf16")
    for a, b in zip(plain, low, strict=True):
        assert "precision" not in dict(a.options)  # float32 hashes as before the option
        assert a.precision == "float32" and b.precision == "bf16"
        assert a.config_hash != b.config_hash
        assert b.draws == a and a.draws is a
        assert a.noise_key == b.noise_key  # the same DP noise, shuffling and seeds: paired
        assert training_seed(a) == training_seed(b)


def test_acc_real_is_cached_per_precision_and_float32_keys_are_unchanged(tmp_path):
    from audit.datasets import load_dataset

    dataset = load_dataset("digits")
    plain, low = _cells(tmp_path, "float32")[0], _cells(tmp_path, "bf16")[0]
    key, other = _acc_real_key(dataset, plain, "cpu"), _acc_real_key(dataset, low, "cpu")
    assert key != other and "precision" not in key and '["precision", "bf16"]' in other


def test_a_bf16_sweep_runs_end_to_end_and_keeps_its_own_directory(tmp_path):
    """Emulated bf16 here (this CPU has none): the rows and the refusal are what is checked."""
    result = run_sweep(_config(tmp_path, precision="bf16"))
    assert result.ran == 1
    frame = pd.read_csv(result.csv_path)
    assert frame.mi_ap.between(0, 1).all() and frame.acc.between(0, 1).all()
    assert (frame.precision == "bf16").all()
    cell = next((tmp_path / "cells").iterdir())
    assert io.read_json(cell / "config.json")["config"]["options"]["precision"] == "bf16"
    with pytest.raises(
        ValueError, match=r"--precision float32: .* holds bf16 cells.*another --out"
    ):
        run_sweep(_config(tmp_path))


def test_a_precision_the_device_lacks_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    import dpvae_core.precision as precision

    monkeypatch.setattr(precision, "native_bf16_cpu", lambda: False)
    argv = ["--dataset", "digits", "--profile", "quick", "--out", str(tmp_path), *TINY_ARGS]
    for value, message in [
        ("bf16", "--precision bf16: this CPU has no native bf16"),
        ("fp16", "--precision fp16 needs a CUDA device, got --device cpu"),
    ]:
        assert main([*argv, "--precision", value]) == 2
        error = capsys.readouterr().err.strip()
        assert error.count("\n") == 0 and message in error
    assert not tmp_path.joinpath("cells").exists()  # refused before any work
