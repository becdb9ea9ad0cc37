"""DP training keeps its per-example norms, clipping and clipped sums in IEEE float32 on CUDA:
cuDNN's default TF32 (``torch.backends.cudnn.allow_tf32``) is switched off for the whole of
DP-Adam (term-wise DP-Adam runs through it) and DP2-VAE, and restored after
(:mod:`dpvae_core.precision`). Checked without a GPU: the flags are plain settings, and the
loops are stopped at their first step, where the flags are read."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import models.dp.dp2vae_loop as dp2vae_loop
import models.dp.dp_adam as dp_adam
from dpvae_core.precision import ieee_float32


class Stop(Exception):
    """Raised where a loop's first step would begin."""


@pytest.fixture
def tf32_on():
    """cuDNN and matmul TF32 on (cuDNN's default), restored after the test."""
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before


def _flags() -> tuple[bool, bool]:
    return torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32


def test_ieee_float32_switches_tf32_off_on_cuda_and_restores_it(tf32_on):
    with ieee_float32("cuda"):
        assert _flags() == (False, False)
    assert _flags() == (True, True)
    with pytest.raises(Stop), ieee_float32("cuda:0"):
        raise Stop
    assert _flags() == (True, True)  # restored after an error too
    with ieee_float32("cpu"):
        assert _flags() == (True, True)  # nothing to change on the CPU


class _Model:
    """Stands in for the VAE up to the loops' first step."""

    def to(self, *args, **kwargs):
        return self

    def train(self):
        return self


def _seen_at_first_step(monkeypatch, module, call) -> tuple[bool, bool]:
    seen = []

    def first_step(**kwargs):
        seen.append(_flags())
        raise Stop

    monkeypatch.setattr(module, "dp_sgd_steps", first_step)
    with pytest.raises(Stop):
        call()
    return seen[0]


def test_dp_adam_runs_in_float32_on_cuda(monkeypatch, tf32_on):
    settings = SimpleNamespace(device="cuda", batch_size=2, epochs=1, seed=0)
    pair = (torch.zeros(4, 1, 2, 2), torch.zeros(4, dtype=torch.long))

    def call():
        dp_adam.train_dp_vae(_Model(), pair, pair, settings, SimpleNamespace())

    assert _seen_at_first_step(monkeypatch, dp_adam, call) == (False, False)
    assert _flags() == (True, True)
    settings.device = "cpu"
    assert _seen_at_first_step(monkeypatch, dp_adam, call) == (True, True)


def test_dp2vae_runs_in_float32_on_cuda(monkeypatch, tf32_on):
    settings = SimpleNamespace(device="cuda", batch_size=2, epochs=1, seed=0)
    pair = (torch.zeros(4, 1, 2, 2), torch.zeros(4, dtype=torch.long))
    dp2 = SimpleNamespace(subsets=2, max_batch_size=None)
    monkeypatch.setattr(dp2vae_loop, "_pretrain_all", lambda *a: ((), 0))
    monkeypatch.setattr(dp2vae_loop, "reinitialise_decoder", lambda *a, **k: None)

    def call():
        dp2vae_loop.train_dp2vae(_Model(), pair, settings, SimpleNamespace(clip_norm=1.0), dp2)

    assert _seen_at_first_step(monkeypatch, dp2vae_loop, call) == (False, False)
    assert _flags() == (True, True)
