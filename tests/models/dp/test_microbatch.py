"""DP-Adam's microbatches (``models.dp.microbatch``): groups fixed per record, each group's
sampled sum clipped at C/2, so that adding or removing one record moves the noiseless released
sum by at most C, the sensitivity the accountant assumes. The adjacency tests build D and D
without one record (records known by their D_train index) and compare the sums exactly; a
planted group clip of C (the trade-off paper's variant) moves it by 2C and is caught."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import models.dp.dp_adam as dp_adam
from models.dp import (
    DPSettings,
    GradSampleMode,
    PerExampleGradients,
    SampleLoss,
    clip_and_sum,
    microbatch_groups,
    private_gradient,
    train_dp_vae,
    unit_clip_norm,
)
from models.training import VAETrainSettings
from tests.models.dp.test_dp_adam import batch, naive_per_example_grads, small_vae, train_pair

C = 2.0
#: Relative slack of the bound: clip_and_sum scales by C / (norm + 1e-6), never above C, and
#: float64 sums of a few vectors of norm <= C err by ~1e-15 relative; 1e-9 covers both.
SLACK = 1e-9


def flat(grads: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([g.reshape(-1) for g in grads])


class LinearLoss(nn.Module):
    """loss_i = w . x_i: record i's gradient is exactly x_i, so a test can set it."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.lin = nn.Linear(dim, 1, bias=False).double()

    def forward(self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return self.lin(x).squeeze(1)


def released_sum(engine, x, index, groups, dp: DPSettings) -> torch.Tensor:
    """The noiseless released sum (z = 0, denominator 1) for the sampled D_train ``index``."""
    n = len(index)
    grads, _ = private_gradient(
        engine,
        (x[index], torch.zeros(n, dtype=torch.long), torch.zeros(n, 1).double(), index),
        dp=dp,
        expected_batch_size=1,
        generator=torch.Generator().manual_seed(0),
        groups=None if groups is None else groups[index],
    )
    return flat(grads)


def test_a_records_group_depends_on_its_index_alone():
    a = microbatch_groups(100, 4, seed=7)
    assert a.shape == (100,) and int(a.max()) < 25 and len(torch.unique(a)) > 20
    # D_train with its last record removed keeps ceil(N/k) = 25 groups: no other record moves
    assert torch.equal(microbatch_groups(98, 4, seed=7), a[:98])
    assert not torch.equal(microbatch_groups(100, 4, seed=8), a)
    assert microbatch_groups(100, 1, seed=7) is None
    sizes = torch.bincount(microbatch_groups(4000, 4, seed=1))
    assert abs(float(sizes.float().mean()) - 4.0) < 1e-9  # 1000 groups, 4000 records


def adversarial_data(k: int, *, dim: int = 6, n: int = 40, seed: int = 0):
    """D_train (n, dim) whose record r has a gradient 10 times as long as, and opposite to, that
    of another member s of its group: the worst case for a group's clipped sum."""
    groups = microbatch_groups(n, k, seed=seed)
    sizes = torch.bincount(groups)
    group = int(torch.nonzero(sizes >= 2)[0])
    r, s = (int(i) for i in torch.nonzero(groups == group)[:2, 0])
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=gen, dtype=torch.float64)
    x[s] *= 5 * C / x[s].norm()  # above every clip norm of the test
    x[r] = -10 * x[s]
    alone = next(i for i in range(n) if groups[i] != group)  # the one member of its group sampled
    return x, groups, r, s, alone


def neighbour_change(k: int, remove: str) -> tuple[float, float]:
    """(||sum(D) - sum(D without the record)||, the record's group clip) for one step that samples
    r and s (one group), ``alone`` (the only sampled member of its group) and five records of
    other groups; ``remove`` is "shared" (r) or "alone"."""
    x, groups, r, s, alone = adversarial_data(k)
    target = r if remove == "shared" else alone
    others = [i for i in range(len(x)) if groups[i] not in (groups[r], groups[alone])][:5]
    index = torch.tensor(sorted({r, s, alone, *others}))
    without = index[index != target]
    engine = PerExampleGradients(LinearLoss(x.shape[1]), GradSampleMode.BK)
    dp = DPSettings(noise_multiplier=0.0, clip_norm=C, noise_seed=0, microbatch=k)
    try:
        diff = released_sum(engine, x, index, groups, dp) - released_sum(
            engine, x, without, groups, dp
        )
    finally:
        engine.close()
    return float(diff.norm()), unit_clip_norm(C, k)


@pytest.mark.parametrize("k", [2, 4])
def test_removing_a_record_from_a_shared_group_moves_the_sum_by_at_most_c(k):
    change, group_clip = neighbour_change(k, "shared")
    assert change <= C * (1 + SLACK)
    assert change >= 0.99 * C  # the worst case is met: the check has no slack to hide in
    assert group_clip == C / 2


def test_removing_a_record_alone_in_its_group_moves_the_sum_by_at_most_c_over_2():
    change, _ = neighbour_change(4, "alone")
    assert change <= C / 2 * (1 + SLACK)


def test_a_planted_group_clip_of_c_breaks_the_bound(monkeypatch):
    """The trade-off paper's variant: microbatches clipped at C, accounted as sensitivity C."""
    monkeypatch.setattr(dp_adam, "unit_clip_norm", lambda clip, k: clip)
    change, _ = neighbour_change(4, "shared")
    assert change > 1.9 * C  # 2C: the bound of the test above fails


def test_vae_gradients_respect_the_bound_for_every_removed_record():
    """The real objective, every record of one full batch removed in turn (q = 1)."""
    vae = small_vae()
    x, y, noise = batch(16, seed=4)
    groups = microbatch_groups(16, 4, seed=3)
    engine = PerExampleGradients(SampleLoss(vae, beta=1.0), GradSampleMode.BK)
    dp = DPSettings(noise_multiplier=0.0, clip_norm=C, noise_seed=0, microbatch=4)

    def release(index: torch.Tensor) -> torch.Tensor:
        grads, _ = private_gradient(
            engine,
            (x[index], y[index], noise[index], index),
            dp=dp,
            expected_batch_size=1,
            generator=torch.Generator().manual_seed(0),
            groups=groups[index],
        )
        return flat(grads)

    try:
        full = release(torch.arange(16))
        changes = [
            float((full - release(torch.cat([torch.arange(r), torch.arange(r + 1, 16)]))).norm())
            for r in range(16)
        ]
    finally:
        engine.close()
    assert max(changes) <= C * (1 + SLACK)
    assert min(changes) > 0


def test_the_grouped_sum_is_the_clipped_sum_of_each_groups_records():
    """private_gradient's grouping against a reference: naive per-record gradients summed per
    group and clipped at C/2 (clip_and_sum, itself tested against a loop)."""
    vae = small_vae()
    x, y, noise = batch(12, seed=5)
    index = torch.arange(12)
    groups = torch.tensor([5, 5, 9, 2, 9, 9, 0, 7, 7, 7, 7, 3])  # absent group ids leave gaps
    grads = naive_per_example_grads(vae, x, y, noise)
    inverse = torch.unique(groups, return_inverse=True)[1]
    want, _ = clip_and_sum(grads, clip_norm=C / 2, groups=inverse, num_groups=6)
    engine = PerExampleGradients(SampleLoss(vae, beta=1.0), GradSampleMode.BK)
    dp = DPSettings(noise_multiplier=0.0, clip_norm=C, noise_seed=0, microbatch=4)
    try:
        got, _ = private_gradient(
            engine,
            (x, y, noise, index),
            dp=dp,
            expected_batch_size=1,
            generator=torch.Generator().manual_seed(0),
            groups=groups,
        )
        singles, _ = private_gradient(
            engine,
            (x, y, noise, index),
            dp=dp,
            expected_batch_size=1,
            generator=torch.Generator().manual_seed(0),
            groups=torch.arange(12) * 3,
        )
    finally:
        engine.close()
    torch.testing.assert_close(flat(got), flat(want), rtol=1e-9, atol=1e-12)
    per_record, _ = clip_and_sum(grads, clip_norm=C / 2)
    torch.testing.assert_close(flat(singles), flat(per_record), rtol=1e-9, atol=1e-12)


def test_training_with_microbatches_runs_the_accounted_steps():
    vae = small_vae(dtype=torch.float32)
    train, val = train_pair()
    settings = VAETrainSettings(epochs=2, batch_size=8, lr=1e-2, beta=1.0, seed=3)
    dp = DPSettings(noise_multiplier=1.0, clip_norm=1.0, noise_seed=0, microbatch=4)
    history = train_dp_vae(vae, train, val, settings, dp)
    assert history.dp.steps == math.ceil(2 * 24 / 8) and history.dp.microbatch == 4
    assert all(torch.isfinite(p).all() for p in vae.parameters())


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "4"])
def test_dp_settings_refuse_a_bad_microbatch(value):
    with pytest.raises(ValueError, match="microbatch must be an integer >= 1"):
        DPSettings(noise_multiplier=1.0, clip_norm=1.0, noise_seed=0, microbatch=value)
