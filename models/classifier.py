"""Target classifier for images: a small CNN (the paper's VGG16 weights cannot be fetched here)."""

from __future__ import annotations

from torch import nn


class SmallCNN(nn.Module):
    """Two conv blocks (32, 64 channels), adaptive max pool to 2x2, dense 128, dropout, logits.

    Input (B, C, H, W) in [0, 1], any H, W >= 4; output (B, num_classes) logits.
    """

    def __init__(self, *, channels: int, num_classes: int, dropout: float = 0.3) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(channels, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveMaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * 4, 128),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(128, num_classes),
        )

    def forward(self, x):  # noqa: D102
        return self.net(x)
