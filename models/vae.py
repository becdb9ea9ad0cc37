"""The trade-off paper's conditional convolutional VAE, with a depth that adapts to the input
size."""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn
from torch.nn import functional as F

from dpvae_core.precision import upcast

ENCODER_CHANNELS = (32, 64, 128, 256)
LEAKY_SLOPE = 0.2

#: ``record(conv, h, out)``: one folded upsample and convolution (:func:`folded_training`).
FoldRecord = Callable[[nn.Conv2d, torch.Tensor, torch.Tensor], None]


def padded_side(height: int, width: int) -> int:
    """Smallest power of two >= max(height, width) and >= 8 (the VAE works on that square)."""
    side = max(height, width, 8)
    return 1 << math.ceil(math.log2(side))


class ConditionalConvVAE(nn.Module):
    """Conditional conv VAE of the trade-off paper (Section 4, Figure 2a).

    Encoder: n conv layers 4x4 stride 2 (32/64/128/256 channels, LeakyReLU) down to 4x4, then dense
    layers for mu and log-variance; the one-hot label is appended to the flattened features.
    Decoder: dense (z ++ one-hot) -> 4x4xC -> n x [nearest upsample x2, conv 3x3] -> sigmoid.
    n = log2(side / 4) where side is the input padded to a power of two (8x8 -> 1, 32x32 -> 3,
    64x64 -> 4), so the trade-off paper's 64x64 model is exactly the n = 4 case.

    Shapes: x is (B, C, H, W) in [0, 1]; y is (B,) int64 labels in [0, num_classes).
    """

    def __init__(
        self,
        *,
        channels: int,
        height: int,
        width: int,
        num_classes: int,
        latent_dim: int = 100,
    ) -> None:
        super().__init__()
        if min(channels, height, width, num_classes, latent_dim) < 1:
            raise ValueError(
                f"VAE sizes must be positive, got channels={channels}, height={height}, "
                f"width={width}, num_classes={num_classes}, latent_dim={latent_dim}"
            )
        self.channels, self.height, self.width = channels, height, width
        self.num_classes, self.latent_dim = num_classes, latent_dim
        self.side = padded_side(height, width)
        depth = int(math.log2(self.side // 4))
        widths = ENCODER_CHANNELS[:depth] if depth <= 4 else ENCODER_CHANNELS + (256,) * (depth - 4)
        self.depth, self.top_channels = depth, widths[-1]

        enc: list[nn.Module] = []
        in_ch = channels
        for out_ch in widths:
            enc += [nn.Conv2d(in_ch, out_ch, 4, stride=2, padding=1), nn.LeakyReLU(LEAKY_SLOPE)]
            in_ch = out_ch
        self.encoder = nn.Sequential(*enc, nn.Flatten())
        feat = self.top_channels * 16
        self.fc_mu = nn.Linear(feat + num_classes, latent_dim)
        self.fc_logvar = nn.Linear(feat + num_classes, latent_dim)

        self.fc_dec = nn.Linear(latent_dim + num_classes, feat)
        dec: list[nn.Module] = []
        out_widths = list(reversed(widths[:-1])) + [channels]
        in_ch = self.top_channels
        for i, out_ch in enumerate(out_widths):
            dec += [
                nn.Upsample(scale_factor=2, mode="nearest"),
                nn.Conv2d(in_ch, out_ch, 3, padding=1),
            ]
            if i < len(out_widths) - 1:
                dec.append(nn.LeakyReLU(LEAKY_SLOPE))
            in_ch = out_ch
        self.decoder = nn.Sequential(*dec)

    def _one_hot(self, y: torch.Tensor) -> torch.Tensor:
        return F.one_hot(y.long(), self.num_classes).to(torch.get_default_dtype())

    def _pad(self, x: torch.Tensor) -> torch.Tensor:
        return F.pad(x, (0, self.side - self.width, 0, self.side - self.height))

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return (mu, logvar) of q(z | x, y), each (B, latent_dim)."""
        h = torch.cat([self.encoder(self._pad(x)), self._one_hot(y).to(x.dtype)], dim=1)
        # float32 out under mixed precision (dpvae_core.precision); a no-op in float32
        return upcast(self.fc_mu(h)), upcast(self.fc_logvar(h))

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Map latents (B, latent_dim) and labels (B,) to images (B, C, H, W) in [0, 1]."""
        h = F.leaky_relu(
            self.fc_dec(torch.cat([z, self._one_hot(y).to(z.dtype)], dim=1)), LEAKY_SLOPE
        )
        h = h.view(-1, self.top_channels, 4, 4)
        # the same function by fewer operations (``folded_decoder``) in evaluation mode and in
        # non-private training (``folded_training``); else the modules, whose hooks (or expanded
        # weights) DP-Adam's engines read
        if self.training and self not in _FOLDING:
            out = self.decoder(h)
        else:
            out = folded_decoder(self.decoder, h, records=_records(self))
        # the sigmoid in float32 under mixed precision: scores and losses read these values
        return torch.sigmoid(upcast(out))[:, :, : self.height, : self.width]

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One reparameterised pass; ``noise`` is N(0, I) of shape (B, latent_dim), from the caller.

        Returns (reconstruction, mu, logvar, z).
        """
        mu, logvar = self.encode(x, y)
        z = mu + torch.exp(0.5 * logvar) * noise
        return self.decode(z, y), mu, logvar, z


def folded_upsample_conv(weight: torch.Tensor) -> torch.Tensor:
    """The kernel (in, out, 4, 4) of the stride-2 transposed convolution (padding 1) that equals
    a nearest 2x upsample followed by ``weight``'s 3x3 convolution (padding 1).

    Per axis, output row 2i reads the upsampled rows 2i-1, 2i, 2i+1, i.e. input rows i-1, i, i;
    row 2i+1 reads input rows i, i, i+1. So the 3 taps (a, b, c) at offsets -1, 0, +1 fold into
    the transposed convolution's 4 taps (c, b + c, a + b, a) (tap k reaches output 2j - 1 + k from
    input j), and the zero padding of the upsampled image is the transposed convolution's
    cropping at the edges. Sums of weights in ``weight``'s dtype, autocast off."""
    with torch.autocast(weight.device.type, enabled=False):
        k = weight
        for dim in (2, 3):
            a, b, c = k.unbind(dim)
            k = torch.stack((c, b + c, a + b, a), dim)
        k = k.transpose(0, 1)
    layout = (
        torch.channels_last
        if weight.is_contiguous(memory_format=torch.channels_last)
        else torch.contiguous_format
    )
    return k.contiguous(memory_format=layout)


#: The models that decode by :func:`folded_decoder` in training mode too, each with the entries
#: of the :func:`folded_training` blocks open on it (a block's recorder, or None): held here,
#: not on the model, so that no copy of a model (``copy.deepcopy``, pickling) inherits them.
_FOLDING: weakref.WeakKeyDictionary[ConditionalConvVAE, list[_Fold]] = weakref.WeakKeyDictionary()


class _Fold:
    """One open :func:`folded_training` block: its recorder or None."""

    def __init__(self, record: FoldRecord | None) -> None:
        self.record = record


def _records(model: ConditionalConvVAE) -> list[FoldRecord]:
    """The recorders of the :func:`folded_training` blocks open on ``model``."""
    return [fold.record for fold in _FOLDING.get(model, ()) if fold.record is not None]


def folded_decoder(
    decoder: nn.Sequential, h: torch.Tensor, *, records: Sequence[FoldRecord] = ()
) -> torch.Tensor:
    """``decoder(h)`` for :class:`ConditionalConvVAE`'s decoder (nearest 2x upsample, 3x3 conv,
    LeakyReLU, ...): each upsample and conv as one transposed convolution
    (:func:`folded_upsample_conv`), 16 multiply-adds per input pixel and channel pair where the
    pair took 36 and the upsample copied 4 times the input. Equal up to the order of float sums
    (2.1-2.5x faster on LFW20's 64x64 decoder, one CPU thread, float32 and bf16)."""
    layers = list(decoder)
    i = 0
    while i < len(layers):
        layer = layers[i]
        if isinstance(layer, nn.Upsample):
            conv = layers[i + 1]
            out = F.conv_transpose2d(
                h, folded_upsample_conv(conv.weight), conv.bias, stride=2, padding=1
            )
            for record in records:
                record(conv, h, out)
            h = out
            i += 2
        else:
            h = layer(h)
            i += 1
    return h


@contextmanager
def folded_training(model: nn.Module, record: FoldRecord | None = None) -> Iterator[None]:
    """Within the block, ``model`` (where it is a :class:`ConditionalConvVAE`) decodes by
    :func:`folded_decoder` in training mode too, autograd taking the gradients through the fold
    to the 3x3 weights (1.2x a bf16 and 1.4x a float32 non-private training step on LFW20's
    shapes, one CPU thread), and ``record(conv, h, out)`` sees each folded convolution: ``conv``
    the decoder's ``nn.Conv2d`` whose parameters the fold reads, ``h`` the input of the upsample
    it follows, ``out`` its output in the autograd graph. Used by non-private training and by
    book-keeping clipping (:class:`models.dp.book_keeping.BookKeepingGradients`, whose
    per-record gradients of such a conv read exactly h and dL/d out) during its forward pass;
    Opacus's engines read the conv modules and never run inside it. Blocks nest."""
    if not isinstance(model, ConditionalConvVAE):
        yield
        return
    fold = _Fold(record)
    _FOLDING.setdefault(model, []).append(fold)
    try:
        yield
    finally:
        folds = _FOLDING[model]
        folds.remove(fold)  # by identity: a _Fold has no __eq__
        if not folds:
            del _FOLDING[model]


def vae_loss_terms(
    x: torch.Tensor, recon: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-example (reconstruction, KL) terms, each of shape (B,).

    Reconstruction is the binary cross-entropy summed over all pixels (a Bernoulli decoder, the
    usual choice for images in [0, 1] and Keras' VAE objective); KL is
    KL(N(mu, diag(exp(logvar))) || N(0, I)) in closed form. A record whose reconstruction has a
    NaN (a diverged model's output) gets a NaN reconstruction term instead of an error; finite
    reconstructions get the same values and gradients as without the masks (no host sync).
    Computed in float32 with autocast off (autocast refuses ``binary_cross_entropy``), whatever
    the caller's precision (:mod:`dpvae_core.precision`).
    """
    with torch.autocast(recon.device.type, enabled=False):
        return _loss_terms(upcast(x), upcast(recon), upcast(mu), upcast(logvar))


def _loss_terms(
    x: torch.Tensor, recon: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    prob = recon.clamp(1e-6, 1 - 1e-6)  # +-inf clamp to the bounds; only NaN is left to mask
    nan = prob.isnan()
    rec = F.binary_cross_entropy(prob.masked_fill(nan, 0.5), x, reduction="none").flatten(1).sum(1)
    rec = rec.masked_fill(nan.flatten(1).any(1), math.nan)
    kl = 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(1)
    return rec, kl
