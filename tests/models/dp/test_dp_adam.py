"""DP-Adam machinery: per-example gradients against an obviously correct loop, clipping, noise.

The reference for every grad-sample mode is Opacus's own test idea (``tests/grad_samples``):
one backward pass per example, in float64 so that rtol 1e-5 measures the method, not rounding.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from opacus.optimizers import DPOptimizer
from scipy import stats
from torch import nn

from models.dp import (
    CLIP_EPS,
    DPSettings,
    GradSampleMode,
    PerExampleGradients,
    SampleLoss,
    check_per_example_objective,
    clip_and_sum,
    median_gradient_norm,
    noisy_average,
    per_unit_norms,
    private_gradient,
    standard_dp_noise_std_with_batch_term,
    train_dp_vae,
)
from models.training import VAETrainSettings, vae_per_example_loss
from models.vae import ConditionalConvVAE

LATENT, CLASSES = 4, 3


def small_vae(*, seed: int = 0, dtype: torch.dtype = torch.float64) -> ConditionalConvVAE:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        vae = ConditionalConvVAE(
            channels=1, height=8, width=8, num_classes=CLASSES, latent_dim=LATENT
        )
    return vae.to(dtype)


def batch(n: int, *, seed: int = 1, dtype: torch.dtype = torch.float64):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, 8, 8, generator=gen, dtype=dtype)
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    noise = torch.randn(n, LATENT, generator=gen, dtype=dtype)
    return x, y, noise


def naive_per_example_grads(vae: nn.Module, x, y, noise) -> list[torch.Tensor]:
    """One forward/backward per example: obviously correct, slow."""
    params = list(vae.parameters())
    rows = []
    for i in range(len(x)):
        vae.zero_grad(set_to_none=True)
        vae_per_example_loss(
            vae, x[i : i + 1], y[i : i + 1], noise[i : i + 1], beta=1.0
        ).sum().backward()
        rows.append([p.grad.detach().clone() for p in params])
    vae.zero_grad(set_to_none=True)
    if not rows:
        return [p.new_zeros((0, *p.shape)) for p in params]
    return [torch.stack([r[k] for r in rows]) for k in range(len(params))]


def naive_clipped_sum(grads: list[torch.Tensor], clip_norm: float) -> list[torch.Tensor]:
    out = [g.new_zeros(g.shape[1:]) for g in grads]
    for i in range(grads[0].shape[0]):
        norm = math.sqrt(sum(float(g[i].pow(2).sum()) for g in grads))
        factor = min(1.0, clip_norm / (norm + CLIP_EPS))
        out = [o + factor * g[i] for o, g in zip(out, grads, strict=True)]
    return out


@pytest.mark.parametrize(
    "mode", [GradSampleMode.HOOKS, GradSampleMode.FUNCTORCH, GradSampleMode.EW]
)
@pytest.mark.parametrize("n", [0, 1, 5])
def test_per_example_gradients_match_a_one_example_loop(mode, n):
    vae = small_vae()
    x, y, noise = batch(n)
    expected = naive_per_example_grads(vae, x, y, noise)
    engine = PerExampleGradients(SampleLoss(vae, beta=1.0), mode)
    got, values = engine.gradients(x, y, noise)
    engine.close()
    assert values.shape == (n,)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-10)


@pytest.mark.parametrize("mode", list(GradSampleMode))
@pytest.mark.parametrize("n", [0, 1, 5])
def test_clipped_sum_matches_the_loop_in_every_mode(mode, n):
    vae = small_vae()
    x, y, noise = batch(n)
    grads = naive_per_example_grads(vae, x, y, noise)
    clip = float(per_unit_norms(grads).median()) if n else 1.0  # about half of them clipped
    engine = PerExampleGradients(SampleLoss(vae, beta=1.0), mode)
    got = engine.clipped_sum(x, y, noise, clip_norm=clip)
    engine.close()
    for g, e in zip(got.grads, naive_clipped_sum(grads, clip), strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-10)
    assert got.norms.shape == (n,)
    if n:
        torch.testing.assert_close(got.norms, per_unit_norms(grads), rtol=1e-5, atol=0)


def test_engine_leaves_the_model_plain():
    vae = small_vae()
    engine = PerExampleGradients(SampleLoss(vae, beta=1.0), GradSampleMode.HOOKS)
    engine.gradients(*batch(3))
    engine.close()
    assert not any(hasattr(p, "grad_sample") for p in vae.parameters())
    assert all(p.grad is None for p in vae.parameters())


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 6),
    shapes=st.lists(st.lists(st.integers(1, 3), min_size=0, max_size=2), min_size=1, max_size=3),
    clip=st.floats(0.0, 5.0),
    grouped=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_clip_and_sum_matches_a_naive_loop(n, shapes, clip, grouped, seed):
    gen = torch.Generator().manual_seed(seed)
    grads = [3 * torch.randn(n, *s, generator=gen, dtype=torch.float64) for s in shapes]
    groups, num_groups, units = None, 0, grads
    if grouped:
        num_groups = 3
        groups = torch.randint(0, num_groups, (n,), generator=gen)
        units = [torch.stack([g[groups == j].sum(0) for j in range(num_groups)]) for g in grads]
    summed, norms = clip_and_sum(grads, clip_norm=clip, groups=groups, num_groups=num_groups)
    for s, e in zip(summed, naive_clipped_sum(units, clip), strict=True):
        torch.testing.assert_close(s, e, rtol=1e-7, atol=1e-12)
    assert norms.shape == (units[0].shape[0],)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 6), clip=st.floats(1e-3, 10.0), seed=st.integers(0, 2**16))
def test_every_clipped_gradient_has_norm_at_most_c(n, clip, seed):
    gen = torch.Generator().manual_seed(seed)
    grads = [
        10 * torch.randn(n, 4, 3, generator=gen, dtype=torch.float64),
        torch.randn(n, 5, generator=gen, dtype=torch.float64),
    ]
    for i in range(n):
        one = [g[i : i + 1] for g in grads]
        summed, _ = clip_and_sum(one, clip_norm=clip)
        norm = math.sqrt(sum(float(s.double().pow(2).sum()) for s in summed))
        assert norm <= clip + 1e-6


def test_clipped_vae_gradients_have_norm_at_most_c():
    vae = small_vae()
    x, y, noise = batch(6)
    engine = PerExampleGradients(SampleLoss(vae, beta=1.0), GradSampleMode.EW)
    grads, _ = engine.gradients(x, y, noise)
    engine.close()
    clip = 0.5 * float(per_unit_norms(grads).min())  # every example is clipped
    for i in range(6):
        summed, _ = clip_and_sum([g[i : i + 1] for g in grads], clip_norm=clip)
        assert float(per_unit_norms([s[None] for s in summed])[0]) <= clip + 1e-6


def test_noisy_sum_equals_opacus_dpoptimizer():
    """Clip, noise and scale exactly as Opacus's DPOptimizer.pre_step does (same generator)."""
    gen = torch.Generator().manual_seed(0)
    params = [
        nn.Parameter(torch.randn(3, 4, generator=gen)),
        nn.Parameter(torch.randn(5, generator=gen)),
    ]
    for p in params:
        p.grad_sample = torch.randn(7, *p.shape, generator=gen)
    grad_samples = [p.grad_sample.clone() for p in params]
    opt = DPOptimizer(
        torch.optim.SGD(params, lr=0.0),
        noise_multiplier=1.3,
        max_grad_norm=0.7,
        expected_batch_size=8,
        loss_reduction="mean",
        generator=torch.Generator().manual_seed(5),
    )
    opt.pre_step()
    summed, _ = clip_and_sum(grad_samples, clip_norm=0.7)
    mine = noisy_average(
        summed,
        clip_norm=0.7,
        noise_multiplier=1.3,
        denominator=8,
        generator=torch.Generator().manual_seed(5),
    )
    for p, m in zip(params, mine, strict=True):
        torch.testing.assert_close(p.grad, m, rtol=1e-6, atol=1e-7)


class ZeroGradientLoss(nn.Module):
    """phi times 0: every per-example gradient is exactly zero."""

    def __init__(self, vae: ConditionalConvVAE) -> None:
        super().__init__()
        self.inner = SampleLoss(vae, beta=1.0)

    def forward(self, x, y, noise):
        return 0.0 * self.inner(x, y, noise)


def std_consistent(samples: np.ndarray, sigma: float, *, alpha: float = 1e-6) -> bool:
    """Two-sided chi-square test of the sample variance (known mean 0) at level ``alpha``:
    sum(x^2) / sigma^2 ~ chi2(N) when the samples are N(0, sigma^2)."""
    n = samples.size
    statistic = float(np.sum(samples.astype(np.float64) ** 2)) / sigma**2
    low, high = stats.chi2.ppf([alpha / 2, 1 - alpha / 2], df=n)
    return bool(low <= statistic <= high)


def pure_noise_updates(*, z: float, clip: float, expected_batch: int, steps: int) -> np.ndarray:
    vae = small_vae(dtype=torch.float32)
    engine = PerExampleGradients(ZeroGradientLoss(vae), GradSampleMode.EW)
    dp = DPSettings(noise_multiplier=z, clip_norm=clip, noise_seed=0)
    gen = torch.Generator().manual_seed(123)
    out = []
    for step in range(steps):
        x, y, noise = batch(5 + step, seed=step, dtype=torch.float32)
        index = torch.arange(len(x))
        grads, sample = private_gradient(
            engine, (x, y, noise, index), dp=dp, expected_batch_size=expected_batch, generator=gen
        )
        assert all(float(g.abs().max()) == 0 for g in sample.grads)
        out.append(torch.cat([g.flatten() for g in grads]).numpy())
    engine.close()
    return np.concatenate(out)


@pytest.mark.statistical
def test_update_of_zero_gradients_is_gaussian_with_std_zc_over_b():
    z, clip, expected_batch = 1.7, 0.9, 32
    updates = pure_noise_updates(z=z, clip=clip, expected_batch=expected_batch, steps=12)
    sigma = z * clip / expected_batch
    assert updates.size > 100_000
    assert std_consistent(updates, sigma)
    # the mean: a z-test at 5 standard errors (two-sided p ~ 6e-7)
    assert abs(updates.mean()) <= 5 * sigma / math.sqrt(updates.size)


@pytest.mark.statistical
def test_the_noise_check_rejects_a_wrong_std():
    """The same check fails for a std 2 % off (its power at N ~ 109k is about 9 sd)
    and for the noise of the sum instead of the average."""
    z, clip, expected_batch = 1.7, 0.9, 32
    updates = pure_noise_updates(z=z, clip=clip, expected_batch=expected_batch, steps=12)
    sigma = z * clip / expected_batch
    assert not std_consistent(updates, 1.02 * sigma)
    assert not std_consistent(updates, 0.98 * sigma)
    assert not std_consistent(updates, z * clip)


def test_standard_dp_refuses_a_batch_wise_term():
    check_per_example_objective(divergence=None, alpha=None, batch_size=32)
    check_per_example_objective(divergence=None, alpha=0.0, batch_size=32)
    with pytest.raises(
        ValueError, match=r"cannot train a batch-wise divergence.*63 z\*C.*cdp-termwise"
    ):
        check_per_example_objective(divergence="mmd", alpha=None, batch_size=32)
    with pytest.raises(ValueError, match="alpha=5.0"):
        check_per_example_objective(divergence=None, alpha=5.0, batch_size=32)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"noise_multiplier": -1.0}, "noise_multiplier"),
        ({"noise_multiplier": math.nan}, "noise_multiplier"),
        ({"clip_norm": 0.0}, "clip_norm"),
        ({"grad_sample_mode": "vmap"}, "unknown grad-sample mode 'vmap'; choose one of: hooks"),
    ],
)
def test_dp_settings_validate(kwargs, message):
    base = {"noise_multiplier": 1.0, "clip_norm": 1.0, "noise_seed": 0}
    with pytest.raises(ValueError, match=message):
        DPSettings(**{**base, **kwargs})


def train_pair(n: int = 24):
    x, y, _ = batch(n, seed=9, dtype=torch.float32)
    return (x, y), (x[:6], y[:6])


def run(seed_noise: int = 0, *, mode: GradSampleMode = GradSampleMode.EW, epochs: int = 2):
    vae = small_vae(dtype=torch.float32)
    train, val = train_pair()
    settings = VAETrainSettings(epochs=epochs, batch_size=8, lr=1e-2, beta=1.0, seed=3)
    dp = DPSettings(
        noise_multiplier=1.0, clip_norm=1.0, noise_seed=seed_noise, grad_sample_mode=mode
    )
    history = train_dp_vae(vae, train, val, settings, dp)
    return vae, history


def test_training_runs_the_accounted_steps_and_is_reproducible():
    vae, history = run()
    assert history.dp.steps == math.ceil(2 * 24 / 8)
    assert history.dp.clip_norm == 1.0 and history.dp.grad_sample_mode.value == "ew"
    assert len(history.train_loss) == len(history.val_loss) == 2
    again, _ = run()
    for a, b in zip(vae.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    other, _ = run(seed_noise=1)
    assert not torch.equal(vae.fc_mu.weight, other.fc_mu.weight)


@pytest.mark.parametrize("other", [GradSampleMode.HOOKS, GradSampleMode.BK])
def test_training_modes_agree(other):
    ew, _ = run(mode=GradSampleMode.EW, epochs=1)
    got, _ = run(mode=other, epochs=1)
    for a, b in zip(ew.state_dict().values(), got.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_median_clip_norm_is_positive_and_leaves_the_model_alone():
    vae = small_vae(dtype=torch.float32)
    before = copy.deepcopy(vae.state_dict())
    train, _ = train_pair()
    settings = VAETrainSettings(epochs=1, batch_size=8, lr=1e-2, beta=1.0, seed=3)
    c = median_gradient_norm(vae, train, settings, epochs=2)
    assert math.isfinite(c) and c > 0
    for key, value in vae.state_dict().items():
        assert torch.equal(value, before[key])
    engine = PerExampleGradients(SampleLoss(vae, beta=1.0), GradSampleMode.EW)
    grads, _ = engine.gradients(*batch(24, seed=9, dtype=torch.float32))
    engine.close()
    first = float(per_unit_norms(grads[:]).median())
    assert 0.1 * first < c < 10 * first  # the same order as the initial median norm


def test_an_empty_poisson_batch_releases_pure_noise():
    vae = small_vae(dtype=torch.float32)
    engine = PerExampleGradients(SampleLoss(vae, beta=1.0))
    x, y, noise = batch(0, dtype=torch.float32)
    dp = DPSettings(noise_multiplier=1.0, clip_norm=2.0, noise_seed=0)
    grads, sample = private_gradient(
        engine,
        (x, y, noise, torch.arange(0)),
        dp=dp,
        expected_batch_size=4,
        generator=torch.Generator().manual_seed(0),
    )
    engine.close()
    assert sample.norms.shape == (0,) and sample.values.shape == (0,)
    assert all(torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)


def test_standard_dp_noise_with_batch_term_is_never_below_paper_table1():
    std = standard_dp_noise_std_with_batch_term(batch_size=32, clip_norm=0.5, noise_multiplier=1.0)
    assert std == pytest.approx((2 * 32 - 1) * 0.5)
    assert std >= 32 * 0.5
