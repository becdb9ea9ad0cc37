"""Target classifier for sensor series: HAR-CNN (Saeed; the trade-off paper, Section 4,
MotionSense)."""

from __future__ import annotations

import torch
from torch import nn

#: Filters of the three Conv1D layers (the trade-off paper's HAR-CNN).
FILTERS = (48, 96, 128)
#: Kernel sizes (along time) of the three Conv1D layers, as in Saeed et al.'s HAR networks.
KERNELS = (24, 16, 8)
DENSE_UNITS = 64
#: Shortest series the unpadded convolutions accept.
MIN_LENGTH = 1 + sum(k - 1 for k in KERNELS)


class HarCNN(nn.Module):
    """Conv1D 48/96/128 (ReLU, each followed by dropout 0.3), global max pool over time,
    dense 64 (ReLU), logits.

    Input (B, T, F) series (channels last, as the VAE's records); output (B, num_classes)
    logits. Convolutions are unpadded (Keras' "valid"), so T must be at least
    :data:`MIN_LENGTH` (46).
    """

    def __init__(self, *, features: int, num_classes: int, dropout: float = 0.3) -> None:
        super().__init__()
        if features < 1 or num_classes < 1:
            raise ValueError(
                f"HAR-CNN needs features >= 1 and num_classes >= 1, got {features}, {num_classes}"
            )
        if not 0 <= dropout < 1:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout!r}")
        layers: list[nn.Module] = []
        in_ch = features
        for out_ch, kernel in zip(FILTERS, KERNELS, strict=True):
            layers += [nn.Conv1d(in_ch, out_ch, kernel), nn.ReLU(), nn.Dropout(dropout)]
            in_ch = out_ch
        self.conv = nn.Sequential(*layers)
        self.head = nn.Sequential(
            nn.Linear(in_ch, DENSE_UNITS), nn.ReLU(), nn.Linear(DENSE_UNITS, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, num_classes) of series x (B, T, F)."""
        if x.dim() != 3 or x.shape[1] < MIN_LENGTH:
            raise ValueError(
                f"HAR-CNN needs series (B, T, F) with T >= {MIN_LENGTH}, got {tuple(x.shape)}"
            )
        h = self.conv(x.transpose(1, 2))
        return self.head(h.amax(dim=2))
