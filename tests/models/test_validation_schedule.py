"""The validation schedule: it thins out the validation passes and never changes training."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from models.dp import DPSettings, GradSampleMode, train_dp_vae
from models.training import (
    EVERY_EPOCH,
    VAETrainSettings,
    ValidationSchedule,
    evaluate_vae_loss,
    train_vae,
)
from models.vae import ConditionalConvVAE

CLASSES, LATENT = 3, 4


def small_vae() -> ConditionalConvVAE:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return ConditionalConvVAE(
            channels=1, height=8, width=8, num_classes=CLASSES, latent_dim=LATENT
        )


def data(n: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 8, 8, generator=gen), torch.randint(0, CLASSES, (n,), generator=gen)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"every": 0}, "every must be a positive integer"), ({"records": 0}, "records must be")],
)
def test_schedule_validates(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ValidationSchedule(**kwargs)


def test_due_epochs_include_the_last():
    schedule = ValidationSchedule(every=4)
    assert [e for e in range(10) if schedule.due(e, 10)] == [3, 7, 9]
    assert all(EVERY_EPOCH.due(e, 3) for e in range(3))


def test_subset_is_fixed_and_capped():
    val = data(20, seed=1)
    a = ValidationSchedule(records=5).subset(val, seed=3)
    b = ValidationSchedule(records=5).subset(val, seed=3)
    assert len(a[0]) == 5 and torch.equal(a[0], b[0])
    assert ValidationSchedule(records=50).subset(val, seed=3)[0] is val[0]


@pytest.mark.parametrize("dp", [False, True])
def test_schedule_changes_history_only(dp):
    """Same weights whether D_val is scored after every epoch or by the thinned schedule."""
    train, val = data(24, seed=2), data(12, seed=4)
    base = VAETrainSettings(epochs=5, batch_size=8, lr=1e-2, beta=1.0, seed=3)
    models, histories = [], []
    for schedule in (EVERY_EPOCH, ValidationSchedule(every=2, records=4)):
        vae = small_vae()
        settings = replace(base, validation=schedule)
        if dp:
            noise = DPSettings(
                noise_multiplier=1.0,
                clip_norm=1.0,
                noise_seed=0,
                grad_sample_mode=GradSampleMode.EW,
            )
            histories.append(train_dp_vae(vae, train, val, settings, noise))
        else:
            histories.append(train_vae(vae, train, val, settings))
        models.append(vae)
    for a, b in zip(models[0].state_dict().values(), models[1].state_dict().values(), strict=True):
        assert torch.equal(a, b)
    full, thin = histories
    assert full.train_loss == thin.train_loss
    assert all(math.isfinite(v) for v in full.val_loss)
    assert [math.isfinite(v) for v in thin.val_loss] == [False, True, False, True, True]
    # the last epoch is scored on all of D_val, as before
    assert thin.val_loss[-1] == full.val_loss[-1]
    assert thin.val_loss[-1] == evaluate_vae_loss(models[1], val, beta=1.0, seed=4)
    assert thin.last_val_loss == thin.val_loss[-1]
