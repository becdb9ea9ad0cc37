"""DP-Adam's ensemble trains each member as train_dp_vae trains it alone (models/dp/dp_ensemble.py):
its own Poisson coins, steps, clip norm and Gaussian noise, so its claim is the solo run's.

Tolerance, as in tests/models/test_ensemble.py: ||w_ensemble - w_solo|| / ||w_solo - w_init|| <=
2 T gamma_n, gamma_n = n u / (1 - n u), u the unit roundoff, T the member's steps, n the longest
sum the two runs order differently: a record's gradient norm, a sum of squares over all P
parameters (book-keeping computes it from per-layer norms, the ensemble from materialised
per-record gradients). Measured on these members: float64 1.5e-16, 1.4e-16, 1.5e-16 (against
about 2e-10); float32 7.7e-8, 6.3e-8, 2.2e-7 (against about 0.1). Planted bugs: members 0 and 1
with each other's noise seeds are 1.41 away; padding records not masked (clip factor 1 instead
of 0) put the padded members far outside.
"""

from __future__ import annotations

import pytest
import torch

import models.dp.dp_ensemble as dp_ensemble
from models.dp import DPSettings, train_dp_vae
from models.dp.dp_ensemble import DPEnsembleMember, train_dp_vae_ensemble
from models.training import VAETrainSettings, ValidationSchedule
from models.vae import ConditionalConvVAE

SIDE, CLASSES, LATENT, BATCH, EPOCHS = 16, 4, 8, 6, 3
SIZES = (20, 17, 20)  # Poisson batches of rate 6/20 and 6/17: 10, 9 and 10 steps
NOISE_SEEDS = (7, 8, 9)


def _members(dtype: torch.dtype, noise_seeds=NOISE_SEEDS, *, microbatch: int = 1):
    gen = torch.Generator().manual_seed(1)

    def records(n):
        x = torch.rand(n, 3, SIDE, SIDE, generator=gen, dtype=torch.float64).to(dtype)
        return x, torch.randint(0, CLASSES, (n,), generator=gen)

    data = [records(n) for n in SIZES]
    val = records(7)
    members = []
    for i in range(len(SIZES)):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1000 + i)
            model = ConditionalConvVAE(
                channels=3, height=SIDE, width=SIDE, num_classes=CLASSES, latent_dim=LATENT
            ).to(dtype)
        settings = VAETrainSettings(
            epochs=EPOCHS,
            batch_size=BATCH,
            lr=1e-3,
            beta=1.0,
            seed=100 + i,
            validation=ValidationSchedule(every=2, records=4),
        )
        # C = 1 clips every record (their gradient norms are in the hundreds); z = 0.5
        dp = DPSettings(
            noise_multiplier=0.5, clip_norm=1.0, noise_seed=noise_seeds[i], microbatch=microbatch
        )
        members.append(DPEnsembleMember(model, data[i], val, settings, dp))
    return members


def _flat(model) -> torch.Tensor:
    return torch.cat([p.detach().double().flatten() for p in model.parameters()])


def _tolerance(dtype: torch.dtype, member: DPEnsembleMember, steps: int) -> float:
    u = torch.finfo(dtype).eps / 2
    n = sum(p.numel() for p in member.model.parameters())
    return 2 * steps * n * u / (1 - n * u)


def _distances(dtype, **kwargs) -> list[float]:
    solo, together = _members(dtype), _members(dtype, **kwargs)
    init = [_flat(m.model) for m in solo]
    for m in solo:
        train_dp_vae(m.model, m.train, m.val, m.settings, m.dp)
    train_dp_vae_ensemble(together)
    return [
        float((_flat(e.model) - _flat(s.model)).norm() / (_flat(s.model) - w0).norm())
        for s, e, w0 in zip(solo, together, init, strict=True)
    ]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_members_equal_their_solo_dp_training(dtype):
    solo, together = _members(dtype), _members(dtype)
    init = [_flat(m.model) for m in solo]
    alone = [train_dp_vae(m.model, m.train, m.val, m.settings, m.dp) for m in solo]
    histories = train_dp_vae_ensemble(together)
    assert [h.dp.steps for h in alone] == [10, 9, 10]
    for s, e, w0, h, eh in zip(solo, together, init, alone, histories, strict=True):
        tol = _tolerance(dtype, s, h.dp.steps)
        moved = (_flat(s.model) - w0).norm()
        assert float((_flat(e.model) - _flat(s.model)).norm() / moved) <= tol
        # what the claim reads: the same steps, rate, z and C; the same realised batches
        for field in ("noise_multiplier", "clip_norm", "steps", "sample_rate", "mean_batch_size"):
            assert getattr(eh.dp, field) == getattr(h.dp, field)
        for a, b in ((h.train_loss, eh.train_loss), (h.val_loss, eh.val_loss)):
            assert len(a) == len(b) == EPOCHS
            assert [x != x for x in a] == [x != x for x in b]
            assert all(abs(x - y) <= tol * abs(x) for x, y in zip(a, b, strict=True) if x == x)
        assert not e.model.training


def test_planted_bugs_exceed_the_tolerance(monkeypatch):
    """Members with each other's noise seeds, or padding records not masked: far outside."""
    member = _members(torch.float64)[0]
    tol = _tolerance(torch.float64, member, 10)
    swapped = _distances(torch.float64, noise_seeds=(8, 7, 9))
    assert min(swapped[:2]) > 1e6 * tol and swapped[2] <= tol
    original = dp_ensemble._clipped_sums

    def unmasked(grads, real, clips):
        return original(grads, torch.ones_like(real), clips)

    monkeypatch.setattr(dp_ensemble, "_clipped_sums", unmasked)
    padded = _distances(torch.float64)
    assert max(padded) > 1e6 * tol  # Poisson batches differ in size: some member is padded


def test_refuses_what_it_does_not_run():
    members = _members(torch.float32)
    with pytest.raises(ValueError, match="microbatch 1"):
        train_dp_vae_ensemble(_members(torch.float32, microbatch=2))
    other = DPEnsembleMember(
        members[1].model,
        members[1].train,
        members[1].val,
        VAETrainSettings(epochs=1, batch_size=BATCH, lr=1e-3, beta=1.0, seed=1),
        members[1].dp,
    )
    with pytest.raises(ValueError, match="share model and settings"):
        train_dp_vae_ensemble([members[0], other])
