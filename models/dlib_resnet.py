"""dlib's face-recognition ResNet (``dlib_face_recognition_resnet_model_v1.dat``) in PyTorch.

The network is ``anet_type`` of dlib's ``examples/dnn_face_recognition_ex.cpp`` (the same type
``tools/python/src/face_recognition.cpp`` loads): a 150x150 RGB input, a 7x7 stride-2 stem of 32
filters, a 3x3 stride-2 max pool, then residual levels of 32, 64, 128, 256 and 256 filters in which
affine layers (frozen batch norm: a per-channel scale and shift) stand for batch norm, a global
average pool and a 128-output fully connected layer without bias. Its output is the raw 128-d
vector: ``loss_metric_::to_label`` copies the last layer's output, so it is not normalised (its
norm is about 1.4 on LFW faces, not 1).

:func:`load` reads the ``.dat`` file itself (no dlib import) with :func:`models.dlib_format.parse`,
which checks every layer against the architecture and raises
:class:`models.dlib_format.DlibFormatError` on anything else.

The forward pass follows dlib's CPU code (``dlib/cuda/cpu_dlib.cpp``): convolutions and pools
with the paddings stored in the file (0 at stride 2, half the window at stride 1), a pool's output
side ``1 + (n + 2 pad - window) // stride``, and ``add_prev`` of two tensors of different shapes
(the down-sampling residuals: more channels, and at 256 filters a 3x3 block output against a 4x4
pooled shortcut) as the sum of both zero-padded to the larger shape. The input layer
(``input_rgb_image_sized``) maps pixel ``v`` of channel red, green, blue to
``(v - mean) / 256`` with the file's per-channel means (122.782, 117.001, 104.298).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from models.dlib_format import INPUT_SIDE, Network, parse


def _zero_padded_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """dlib's ``tt::add(dest, src1, src2)``: dest has the larger of each dimension; each source
    adds where it is defined (zero elsewhere)."""
    if a.shape == b.shape:
        return a + b
    shape = [max(p, q) for p, q in zip(a.shape, b.shape, strict=True)]
    out = a.new_zeros(shape).contiguous(memory_format=_layout(a))
    out[: a.shape[0], : a.shape[1], : a.shape[2], : a.shape[3]] += a
    out[: b.shape[0], : b.shape[1], : b.shape[2], : b.shape[3]] += b
    return out


def _layout(t: torch.Tensor) -> torch.memory_format:
    if (
        t.dim() == 4
        and t.is_contiguous(memory_format=torch.channels_last)
        and not t.is_contiguous()
    ):
        return torch.channels_last
    return torch.contiguous_format


class DlibResNet(nn.Module):
    """dlib's face-recognition network; ``forward`` takes (N, 3, 150, 150) uint8 (or 0..255
    float) RGB chips and returns the (N, 128) float32 descriptors.

    ``fold_affine`` folds each affine layer that follows a convolution into it (weights times
    the scale, the shift as the bias): the same function with one pass over the activations
    fewer (about 15% of the CPU time); the products round differently, by float32 rounding
    (descriptors agree with the unfolded network to about 1e-6)."""

    def __init__(self, net: Network, *, fold_affine: bool = True) -> None:
        super().__init__()
        self.register_buffer("means", torch.tensor(net.means, dtype=torch.float32).view(1, 3, 1, 1))
        layers = net.layers
        self.specs = [layer.spec for layer in layers]
        self.skipped = {i for i, layer in enumerate(layers) if layer.disabled}
        self.convs = nn.ModuleDict()
        self.fused_relu: dict[int, bool] = {}
        for i, layer in enumerate(layers):
            if layer.spec.kind == "con":
                weight, bias = torch.from_numpy(layer.weight.copy()), layer.bias
                bias = None if bias is None else torch.from_numpy(bias.copy())
                after = layers[i + 1] if i + 1 < len(layers) else None
                if (
                    fold_affine and not layer.relu and after is not None
                    and after.spec.kind == "affine" and not after.disabled
                    and after.scale.shape[1:] == (1, 1)
                ):  # fmt: skip
                    scale = torch.from_numpy(after.scale.reshape(-1).copy())
                    shift = torch.from_numpy(after.shift.reshape(-1).copy())
                    weight = weight * scale[:, None, None, None]
                    bias = shift if bias is None else bias * scale + shift
                    self.skipped.add(i + 1)
                conv = nn.Conv2d(
                    weight.shape[1], weight.shape[0], layer.spec.window, stride=layer.spec.stride,
                    padding=layer.padding, bias=bias is not None,
                )  # fmt: skip
                conv.weight.data = weight
                if bias is not None:
                    conv.bias.data = bias
                conv.requires_grad_(False)
                self.convs[str(i)] = conv
                self.fused_relu[i] = layer.relu
            elif layer.spec.kind == "affine" and not layer.disabled:
                self.register_buffer(f"scale{i}", torch.from_numpy(layer.scale.copy())[None])
                self.register_buffer(f"shift{i}", torch.from_numpy(layer.shift.copy())[None])
            elif layer.spec.kind == "fc_no_bias":
                self.register_buffer("fc", torch.from_numpy(layer.weight.copy()))

    def normalise(self, chips: torch.Tensor) -> torch.Tensor:
        """``input_rgb_image_sized::to_tensor``: ``(v - mean) / 256`` per channel, float32."""
        return (chips.to(torch.float32) - self.means) / 256.0

    def forward(self, chips: torch.Tensor) -> torch.Tensor:
        if chips.dim() != 4 or chips.shape[1:] != (3, INPUT_SIDE, INPUT_SIDE):
            raise ValueError(
                f"expected (N, 3, {INPUT_SIDE}, {INPUT_SIDE}) chips, got {chips.shape}"
            )
        x = self.normalise(chips)
        if self.convs["0"].weight.is_contiguous(memory_format=torch.channels_last):
            x = x.contiguous(memory_format=torch.channels_last)
        tags: dict[int, torch.Tensor] = {}
        for i, spec in enumerate(self.specs):
            if i in self.skipped:
                continue
            kind = spec.kind
            if kind == "con":
                x = self.convs[str(i)](x)
                if self.fused_relu[i]:
                    x = F.relu(x, inplace=True)
            elif kind == "affine":
                x = torch.addcmul(getattr(self, f"shift{i}"), x, getattr(self, f"scale{i}"))
            elif kind == "relu":  # in place unless a tag still holds x
                x = F.relu(x, inplace=all(x is not t for t in tags.values()))
            elif kind == "max_pool":
                x = F.max_pool2d(x, spec.window, spec.stride)
            elif kind == "avg_pool" and spec.window:
                x = F.avg_pool2d(x, spec.window, spec.stride)
            elif kind == "avg_pool":  # avg_pool_everything
                x = x.mean(dim=(2, 3))
            elif kind == "tag":
                tags[spec.tag] = x
            elif kind == "skip":
                x = tags[spec.tag]
            elif kind == "add_prev":
                x = _zero_padded_sum(x, tags[spec.tag])
            elif kind == "fc_no_bias":
                x = x.reshape(len(x), -1) @ self.fc
        return x


def load(path: str | Path, *, fold_affine: bool = True) -> DlibResNet:
    """The network in dlib's ``.dat`` file at ``path`` (eval mode, frozen, on the CPU)."""
    path = Path(path)
    return DlibResNet(parse(path.read_bytes(), str(path)), fold_affine=fold_affine).eval()
