"""Target classifier for faces: a ResNet-10-sized residual network trained from scratch.

The trade-off paper fine-tunes an ImageNet VGG16 on LFW; no pretrained weights install offline here,
so the suite trains this network from scratch (augmentation, label smoothing and early stopping on
validation accuracy: :class:`models.classifier_training.ClassifierSettings`). Measured on
LFW20's real split in docs/lfw20-faces.md.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

#: Channels of the four stages (one basic block each; stride 2 from the second on).
STAGE_WIDTHS = (32, 64, 128, 256)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and an identity (or 1x1 projection) shortcut."""

    def __init__(self, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(h)) + self.shortcut(x))


class ResNetClassifier(nn.Module):
    """Stem (3x3 conv, stride 2 on inputs of 32x32 and larger), four basic blocks
    (:data:`STAGE_WIDTHS`, about 1.2 M parameters at width 1), global average pool, dropout,
    logits.

    Input (B, C, H, W) in [0, 1], any H, W >= 4; output (B, num_classes) logits. ``width``
    scales every stage's channels.
    """

    def __init__(
        self, *, channels: int, num_classes: int, width: float = 1.0, dropout: float = 0.2
    ) -> None:
        super().__init__()
        widths = [max(8, round(w * width)) for w in STAGE_WIDTHS]
        self.stem_stride = 2
        self.stem = nn.Sequential(
            nn.Conv2d(channels, widths[0], 3, stride=self.stem_stride, padding=1, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(),
        )
        blocks, in_ch = [], widths[0]
        for i, out_ch in enumerate(widths):
            blocks.append(BasicBlock(in_ch, out_ch, stride=1 if i == 0 else 2))
            in_ch = out_ch
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Dropout(dropout),
            nn.Linear(in_ch, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return self.head(self.blocks(self.stem(x * 2.0 - 1.0)))
