"""Mixed precision (``--precision bf16``/``fp16``, :mod:`dpvae_core.precision`): what runs in the
lower precision does, and what a privacy claim or a score rests on stays float32.

This CPU has no native bf16, so these tests run bf16 autocast emulated (slow, but exact in what
it computes): the dtypes and the float32 islands are what is checked; speed is measured by
``benchmarks/bench_precision_cells.py`` on a device that has bf16.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from dpvae_core.precision import (
    Precision,
    check_precision_supported,
    grad_scaler,
    ieee_float32,
    mixed_precision,
    native_bf16_cpu,
    parse_precision,
    upcast,
)
from models.classifier_training import ClassifierSettings, train_classifier
from models.dp.dp_adam import DPSettings, train_dp_vae
from models.factory import model_family
from models.perturbation import PerturbationVAE
from models.training import VAETrainSettings, train_vae, vae_loss_terms

SHAPES = {"image": (1, 8, 8), "series": (12, 3), "points": (5,)}


def _records(shape, n=6, classes=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, *shape, generator=gen), torch.arange(n) % classes


def _vae(shape, classes=3, seed=0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return model_family(shape, classes).target_vae(latent_dim=4, per_example_gradients=False)


class DtypeProbe:
    """Records the output dtypes of a model's convolutions and linear layers."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.seen: set[torch.dtype] = set()
        self.handles = [
            m.register_forward_hook(self._hook)
            for m in model.modules()
            if isinstance(m, torch.nn.Conv2d | torch.nn.ConvTranspose2d | torch.nn.Linear)
        ]

    def _hook(self, module, inputs, output) -> None:
        self.seen.add(output.dtype)

    def close(self) -> None:
        for h in self.handles:
            h.remove()


@pytest.mark.parametrize("modality", sorted(SHAPES))
def test_every_family_computes_in_bf16_and_returns_float32(modality):
    if modality == "series" and not native_bf16_cpu():
        pytest.skip("oneDNN's bf16 LSTM needs a CPU with native bf16 (this one emulates bf16)")
    shape = SHAPES[modality]
    vae = _vae(shape).eval()
    x, y = _records(shape)
    probe = DtypeProbe(vae)
    with torch.no_grad(), mixed_precision("cpu", "bf16"):
        mu, logvar = vae.encode(x, y)
        out = vae.decode(mu, y)
    probe.close()
    assert torch.bfloat16 in probe.seen  # the layers did run in bf16
    assert mu.dtype == logvar.dtype == out.dtype == torch.float32
    with torch.no_grad():  # in float32 the same calls give float32 layers and outputs
        probe = DtypeProbe(vae)
        assert vae.decode(*vae.encode(x, y)[:1], y).dtype == torch.float32
        probe.close()
    assert probe.seen == {torch.float32}


def test_the_bernoulli_loss_is_float32_whatever_the_inputs_precision():
    x, _ = _records((1, 8, 8))
    recon = torch.rand_like(x)
    mu, logvar = torch.randn(6, 4), torch.randn(6, 4)
    want = vae_loss_terms(x, recon, mu, logvar)
    with mixed_precision("cpu", "bf16"):
        got = vae_loss_terms(x, recon, mu, logvar)
        low = vae_loss_terms(x, recon.bfloat16(), mu.bfloat16(), logvar.bfloat16())
    for a, b in zip(want, got, strict=True):
        assert torch.equal(a, b)  # float32 inputs: the same float32 values under autocast
    assert all(t.dtype == torch.float32 for t in low)


def test_upcast_raises_low_precision_only():
    assert upcast(torch.zeros(1, dtype=torch.bfloat16)).dtype == torch.float32
    assert upcast(torch.zeros(1, dtype=torch.float16)).dtype == torch.float32
    assert upcast(torch.zeros(1, dtype=torch.float64)).dtype == torch.float64


def _settings(precision: str) -> VAETrainSettings:
    return VAETrainSettings(epochs=2, batch_size=4, lr=1e-2, beta=1.0, seed=1, precision=precision)


def test_train_vae_runs_its_steps_in_the_settings_precision_with_float32_weights():
    x, y = _records((1, 8, 8), n=12)
    seen = {}
    for precision in ("float32", "bf16"):
        vae = _vae((1, 8, 8))
        probe = DtypeProbe(vae)
        history = train_vae(vae, (x, y), (x[:4], y[:4]), _settings(precision))
        probe.close()
        seen[precision] = probe.seen
        assert all(p.dtype == torch.float32 for p in vae.parameters())
        assert all(torch.isfinite(torch.tensor(history.train_loss)))
    assert seen == {"float32": {torch.float32}, "bf16": {torch.bfloat16}}


def test_bf16_training_learns_as_float32_does():
    """One autocast block holds the whole loop; with autocast's weight-cast cache on, every
    forward pass reused the first step's bf16 weights and the loss stayed flat (LFW20: 8573 in
    every epoch against float32's 8323 after 6). Here the two precisions' epoch losses must fall
    alike: bf16 within 2 % of float32's fall at every epoch (float32 falls by about a third)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.tensor(digits.images[:96, None] / 16, dtype=torch.float32)
    y = torch.tensor(digits.target[:96] % 3)
    losses = {}
    for precision in ("float32", "bf16"):
        vae = _vae((1, 8, 8), seed=2)
        settings = replace(_settings(precision), epochs=6, batch_size=8)
        history = train_vae(vae, (x, y), (x[:8], y[:8]), settings)
        losses[precision] = torch.tensor(history.train_loss)
    f32, low = losses["float32"], losses["bf16"]
    fall = f32[0] - f32[-1]
    assert fall > 0.2 * f32[0]
    assert torch.all((low - f32).abs() < 0.02 * fall), (f32, low)


def test_the_classifier_trains_in_its_settings_precision():
    x, y = _records((1, 8, 8), n=12)
    family = model_family((1, 8, 8), 3)
    seen = {}
    for precision in ("float32", "bf16"):
        probes = []

        def make(kind=None, probes=probes):
            model = family.classifier(kind)
            probes.append(DtypeProbe(model))
            return model

        settings = ClassifierSettings(epochs=1, patience=1, batch_size=4, precision=precision)
        train_classifier(make, (x, y), (x[:4], y[:4]), settings)
        seen[precision] = probes[0].seen
    assert seen == {"float32": {torch.float32}, "bf16": {torch.bfloat16}}


def test_dp_adam_runs_in_its_settings_precision_inside_an_enclosing_bf16_block():
    """A float32 cell's DP-Adam runs every layer in float32 under a bf16 autocast around it; a
    bf16 cell's runs its per-example gradients' passes in bf16 (the norms, clipping, sum and
    noise stay float32 on certified bounds: tests/models/dp/test_bk_bound.py)."""
    x, y = _records((1, 8, 8), n=12)
    dp = DPSettings(noise_multiplier=1.0, clip_norm=1.0, noise_seed=0)
    seen = {}
    for precision in ("float32", "bf16"):
        vae = model_family((1, 8, 8), 3).target_vae(latent_dim=4, per_example_gradients=True)
        probe = DtypeProbe(vae)
        with mixed_precision("cpu", "bf16"):
            train_dp_vae(vae, (x, y), (x[:4], y[:4]), _settings(precision), dp)
        probe.close()
        seen[precision] = probe.seen
    assert seen == {"float32": {torch.float32}, "bf16": {torch.float32, torch.bfloat16}}


def test_vae_ldp_perturbation_is_the_float32_one_inside_a_bf16_block():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = PerturbationVAE(
            channels=1, height=8, width=8, num_classes=3, latent_dim=4, sigma=0.5, mean_bound=3.0
        )
    x, y = _records((1, 8, 8))
    want = model.perturb(x, y, generator=torch.Generator().manual_seed(5))
    with mixed_precision("cpu", "bf16"):
        got = model.perturb(x, y, generator=torch.Generator().manual_seed(5))
        # the same model's encoder in bf16 gives other means: the block above is what keeps them
        mu_low, _ = model.encode_std(x, y)
    with ieee_float32("cpu"):
        mu, _ = model.encode_std(x, y)
    assert torch.equal(want, got)
    assert not torch.equal(mu, mu_low)


def test_grad_scaler_is_active_under_fp16_autocast_only():
    assert not grad_scaler("cpu").is_enabled()
    with mixed_precision("cpu", "bf16"):
        assert not grad_scaler("cpu").is_enabled()
    with torch.autocast("cpu", dtype=torch.float16):
        assert grad_scaler("cpu").is_enabled()


def test_precision_names_and_device_support(monkeypatch):
    import dpvae_core.precision as precision

    assert parse_precision("bf16") is Precision.BF16
    message = r"unknown precision 'fp32'; choose one of: float32, bf16, fp16"
    with pytest.raises(ValueError, match=message):
        parse_precision("fp32")
    assert check_precision_supported("float32", "cpu") is Precision.FLOAT32
    with pytest.raises(ValueError, match="fp16 needs a CUDA device"):
        check_precision_supported("fp16", "cpu")
    monkeypatch.setattr(precision, "native_bf16_cpu", lambda: False)
    with pytest.raises(ValueError, match="this CPU has no native bf16"):
        check_precision_supported("bf16", "cpu")
    monkeypatch.setattr(precision, "native_bf16_cpu", lambda: True)
    assert check_precision_supported("bf16", "cpu") is Precision.BF16
