"""The ensemble trains each member as train_vae trains it alone (models/ensemble.py).

Bit for bit: each member's draws (shuffles, reparameterisation noise) and its Adam update from a
given gradient. Within a derived tolerance: the trained weights and the loss histories, since a
batched convolution sums in another order than the solo one.

The tolerance. Ensemble and solo compute the same sums of the same terms in another order. A sum
of n terms reordered changes by at most 2 gamma_n times the sum of the terms' magnitudes,
gamma_n = n u / (1 - n u) (Higham, Accuracy and Stability of Numerical Algorithms, 3.1), u the
unit roundoff (2^-24 float32, 2^-53 float64). The longest sum of the test's model is a decoder
convolution's weight gradient, over batch x height x width positions (6 x 16 x 16 = 1536). A
relative perturbation of at most 2 gamma_n per step, over the T steps of a member's training,
moves its weights by at most 2 T gamma_n of their displacement, to first order and where the
sums do not cancel (cancellation, a LeakyReLU kink or Adam's normalisation of a near-zero
gradient can amplify it; the margins below say they do not here): the tolerance on
||w_ensemble - w_solo|| / ||w_solo - w_init||. Measured on this test's members (distance
against tolerance): float64 1.7e-14, 8.1e-14, 2.7e-14 against 4.1e-12, 3.1e-12, 4.1e-12;
float32 5.2e-6, 3.8e-5, 2.3e-5 against 2.2e-3, 1.6e-3, 2.2e-3. Planted bugs: members 0 and 1
trained with each other's seeds are 1.07 away; padding weighted 1/width instead of 1/b puts the
members 0.24, 0.065, 0.26 away.
"""

from __future__ import annotations

import pytest
import torch

import models.ensemble as ensemble
from models.ensemble import EnsembleMember, ensemble_recipe, train_vae_ensemble
from models.training import VAETrainSettings, ValidationSchedule, train_vae
from models.vae import ConditionalConvVAE

SIDE, CLASSES, LATENT, BATCH, EPOCHS = 16, 4, 8, 6, 3
SIZES = (20, 17, 20)  # 4, 3 and 4 steps an epoch: out of phase, last batches 2, 5 and 2


def _model(index: int, dtype: torch.dtype) -> ConditionalConvVAE:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1000 + index)
        vae = ConditionalConvVAE(
            channels=3, height=SIDE, width=SIDE, num_classes=CLASSES, latent_dim=LATENT
        )
    return vae.to(dtype)


def _members(dtype: torch.dtype, seeds=(100, 101, 102), *, data_seed: int = 1):
    gen = torch.Generator().manual_seed(data_seed)

    def records(n):
        x = torch.rand(n, 3, SIDE, SIDE, generator=gen, dtype=torch.float64).to(dtype)
        return x, torch.randint(0, CLASSES, (n,), generator=gen)

    data = [records(n) for n in SIZES]
    val = records(7)
    schedule = ValidationSchedule(every=2, records=4)
    return [
        EnsembleMember(
            model=_model(i, dtype),
            train=data[i],
            val=val,
            settings=VAETrainSettings(
                epochs=EPOCHS, batch_size=BATCH, lr=1e-3, beta=1.0, seed=s, validation=schedule
            ),
        )
        for i, s in enumerate(seeds)
    ]


def _solo(members) -> list:
    return [train_vae(m.model, m.train, m.val, m.settings) for m in members]


def _flat(model) -> torch.Tensor:
    return torch.cat([p.detach().double().flatten() for p in model.parameters()])


def _tolerance(dtype: torch.dtype, n_records: int) -> float:
    u = torch.finfo(dtype).eps / 2
    n = BATCH * SIDE * SIDE
    gamma = n * u / (1 - n * u)
    steps = EPOCHS * -(-n_records // BATCH)
    return 2 * steps * gamma


def _distances(dtype, *, ensemble_seeds=(100, 101, 102)) -> list[float]:
    """Per member: ||w_ens - w_solo|| / ||w_solo - w_init||, solo under seeds 100-102."""
    solo, together = _members(dtype), _members(dtype, ensemble_seeds)
    init = [_flat(m.model) for m in solo]
    _solo(solo)
    train_vae_ensemble(together)
    return [
        float((_flat(e.model) - _flat(s.model)).norm() / (_flat(s.model) - w0).norm())
        for s, e, w0 in zip(solo, together, init, strict=True)
    ]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_members_equal_their_solo_training(dtype):
    solo, together = _members(dtype), _members(dtype)
    init = [_flat(m.model) for m in solo]
    histories = _solo(solo)
    ens_histories = train_vae_ensemble(together)
    rows = zip(solo, together, init, histories, ens_histories, SIZES, strict=True)
    for s, e, w0, h, eh, n in rows:
        tol = _tolerance(dtype, n)
        moved = (_flat(s.model) - w0).norm()
        assert float((_flat(e.model) - _flat(s.model)).norm() / moved) <= tol
        assert not e.model.training and e.model.fc_mu.weight.dtype == dtype
        for a, b in ((h.train_loss, eh.train_loss), (h.val_loss, eh.val_loss)):
            assert len(a) == len(b) == EPOCHS
            assert [x != x for x in a] == [x != x for x in b]  # NaN where validation skipped
            assert all(abs(x - y) <= tol * abs(x) for x, y in zip(a, b, strict=True) if x == x)


def test_planted_bugs_exceed_the_tolerance(monkeypatch):
    """A member trained with another's seed, or padding weighted 1/width: far outside."""
    tol = _tolerance(torch.float64, max(SIZES))
    swapped = _distances(torch.float64, ensemble_seeds=(101, 100, 102))
    assert min(swapped[:2]) > 1e6 * tol and swapped[2] <= tol

    original = ensemble._batch_weights

    def wide(counts, width, loss):
        real, _ = original(counts, width, loss)
        return real, real.to(loss.dtype) / width

    monkeypatch.setattr(ensemble, "_batch_weights", wide)
    padded = _distances(torch.float64)
    assert padded[1] > 100 * tol  # the 17-record member, padded on its last batch of each epoch
    assert padded[0] > 100 * tol  # the 20-record members' last batch is padded to 5 too


def test_members_draw_their_solo_noise(monkeypatch):
    """Each member's reparameterisation noise, batch by batch, is bit for bit its solo run's
    (the noise follows each epoch's shuffle in the member's generator, so the shuffles are too)."""
    drawn: dict[int, list[torch.Tensor]] = {}
    real_noise = ensemble.training_noise

    def record(model, n, *, generator):
        noise = real_noise(model, n, generator=generator)
        drawn.setdefault(id(model), []).append(noise)
        return noise

    solo, together = _members(torch.float32), _members(torch.float32)
    monkeypatch.setattr("models.training.training_noise", record)
    monkeypatch.setattr(ensemble, "training_noise", record)
    _solo(solo)
    train_vae_ensemble(together)
    for s, e, n in zip(solo, together, SIZES, strict=True):
        a, b = drawn[id(s.model)], drawn[id(e.model)]
        assert len(a) == len(b) == EPOCHS * -(-n // BATCH) + 2  # and two validation passes
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_one_adam_over_members_is_each_members_adam():
    """Adam over all members' parameters updates each as its own Adam would, bit for bit, and
    skips a member without a gradient (its moments and step count untouched); stepping it with
    a zero gradient instead would move it (what the test would catch)."""
    solo = [_model(i, torch.float32) for i in range(2)]
    joint = [_model(i, torch.float32) for i in range(2)]
    opts = [torch.optim.Adam(m.parameters(), lr=1e-3) for m in solo]
    shared = torch.optim.Adam([p for m in joint for p in m.parameters()], lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    for step in range(4):
        stepping = (0, 1) if step % 2 == 0 else (0,)
        shared.zero_grad(set_to_none=True)
        for i in stepping:
            for p, q in zip(solo[i].parameters(), joint[i].parameters(), strict=True):
                q.grad = torch.randn(p.shape, generator=gen)
                p.grad = q.grad.clone()
            opts[i].step()
        shared.step()
    for a, b in zip(solo, joint, strict=True):
        assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    zero = _model(1, torch.float32)
    before = _flat(zero)
    adam = torch.optim.Adam(zero.parameters(), lr=1e-3)
    for p in zero.parameters():
        p.grad = torch.ones_like(p)
    adam.step()
    for p in zero.parameters():
        p.grad = torch.zeros_like(p)
    moved = _flat(zero)
    adam.step()
    assert not torch.equal(_flat(zero), moved) and not torch.equal(moved, before)


def test_members_must_share_a_recipe():
    members = _members(torch.float32)
    assert ensemble_recipe(members[0]) == ensemble_recipe(members[1])
    other = EnsembleMember(
        model=members[1].model,
        train=members[1].train,
        val=members[1].val,
        settings=VAETrainSettings(epochs=2, batch_size=BATCH, lr=1e-3, beta=1.0, seed=1),
    )
    with pytest.raises(ValueError, match="share model and settings"):
        train_vae_ensemble([members[0], other])
    wider = EnsembleMember(
        model=ConditionalConvVAE(
            channels=3, height=SIDE, width=SIDE, num_classes=CLASSES, latent_dim=LATENT + 1
        ),
        train=members[1].train,
        val=members[1].val,
        settings=members[1].settings,
    )
    with pytest.raises(ValueError, match="share model and settings"):
        train_vae_ensemble([members[0], wider])


def test_where_it_is_used():
    assert ensemble.ensemble_pays("cuda") and ensemble.ensemble_pays("cuda:1", "bf16")
    assert not ensemble.ensemble_pays("cpu")
    assert not ensemble.ensemble_pays("cuda", "fp16")
