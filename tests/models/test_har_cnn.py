"""HAR-CNN, the series target classifier (the trade-off paper, Section 4)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from models.classifier_training import ClassifierSettings, accuracy, train_classifier
from models.har_cnn import MIN_LENGTH, HarCNN


def test_architecture_matches_the_paper():
    model = HarCNN(features=12, num_classes=6)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv1d)]
    drops = [m for m in model.modules() if isinstance(m, nn.Dropout)]
    dense = [m for m in model.head if isinstance(m, nn.Linear)]
    assert [c.out_channels for c in convs] == [48, 96, 128] and convs[0].in_channels == 12
    assert [d.p for d in drops] == [0.3, 0.3, 0.3]
    assert [(d.in_features, d.out_features) for d in dense] == [(128, 64), (64, 6)]


@pytest.mark.parametrize("length", [MIN_LENGTH, 100, 500])
def test_logits_for_series_of_any_admissible_length(length):
    model = HarCNN(features=6, num_classes=4).eval()
    assert model(torch.zeros(3, length, 6)).shape == (3, 4)


def test_too_short_series_are_refused():
    with pytest.raises(ValueError, match=f"T >= {MIN_LENGTH}"):
        HarCNN(features=6, num_classes=4)(torch.zeros(2, MIN_LENGTH - 1, 6))


def test_learns_two_frequencies():
    gen = torch.Generator().manual_seed(0)
    t = torch.arange(100) / 10.0
    freq = torch.tensor([0.5, 2.0])
    y = torch.arange(64) % 2
    phase = torch.rand(64, 1, generator=gen) * 6.28
    x = torch.sin(6.28 * freq[y][:, None] * t + phase)[:, :, None].repeat(1, 1, 3)
    x = x + 0.1 * torch.randn(x.shape, generator=gen)
    settings = ClassifierSettings(epochs=15, patience=15, seed=0)
    model = train_classifier(
        lambda: HarCNN(features=3, num_classes=2), (x[:48], y[:48]), (x[48:], y[48:]), settings
    )
    assert accuracy(model, (x[48:], y[48:])) >= 0.9
