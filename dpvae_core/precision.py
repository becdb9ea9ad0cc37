"""Arithmetic precision: IEEE float32 where a result must be float32, mixed precision elsewhere.

**Mixed precision** (``--precision bf16`` or ``fp16``; :func:`mixed_precision`) runs convolutions
and matrix products under ``torch.autocast`` in the lower precision: non-private VAE training,
VAE-LDP's perturbation-model training, generation, every attack's decoding and the target
classifier. What a privacy claim or a score's ranking rests on stays float32: the models'
encoders and decoders return float32 (:func:`models.vae.ConditionalConvVAE.decode`), the VAE loss
is computed in float32 outside autocast, and the blocks below switch autocast off.

**IEEE float32** (:func:`ieee_float32`, :func:`float32_training`). On Ampere and later GPUs
cuDNN runs float32 convolutions in TF32 (a 10-bit mantissa) by default
(``torch.backends.cudnn.allow_tf32`` is True), and matrix products may too. Three places must
not:

- DP-Adam, term-wise DP-Adam and DP2-VAE training (:func:`float32_training`): the per-example
  norms, the clipping and the clipped sums are computed by convolutions and matrix products, and
  the privacy claim takes each clipped per-example gradient to have norm at most C. In TF32 the
  norms and the sums carry relative errors near 1e-3 instead of float32's 1e-7, so a clipped
  gradient could exceed C by about a thousandth; the design keeps these computations in float32.
- VAE-LDP's release (:meth:`models.perturbation.NoiseBound.perturb`): the bounded mean, the
  noise floor and the Gaussian noise the claim reads;
- the face descriptor (:mod:`models.face_embedding`), whose codes must match dlib's.

All three also switch autocast off, on any device, so an enclosing mixed-precision block never
reaches them. On the CPU nothing else changes (there is no TF32 there).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any, TypeVar

import torch

from dpvae_core.validation import parse_enum

F = TypeVar("F", bound=Callable[..., Any])


class Precision(str, Enum):
    """The arithmetic of a cell's non-private computations (``--precision``)."""

    FLOAT32 = "float32"
    BF16 = "bf16"
    FP16 = "fp16"


DTYPES = {Precision.BF16: torch.bfloat16, Precision.FP16: torch.float16}


def parse_precision(value: Precision | str) -> Precision:
    """The :class:`Precision` named by ``value``; ValueError quoting it and the allowed ones."""
    return parse_enum(Precision, value, "precision")


def native_bf16_cpu() -> bool:
    """Whether this CPU computes bf16 in hardware (AVX-512 BF16 or AMX), as oneDNN sees it."""
    return bool(
        torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    )


def check_precision_supported(precision: Precision | str, device: str | torch.device) -> Precision:
    """``precision`` if ``device`` computes it natively, else ValueError saying what is allowed.

    float32 runs everywhere; bf16 on a CUDA GPU with bf16 (Ampere and later) or a CPU with
    AVX-512 BF16 or AMX (elsewhere PyTorch emulates it, slower than float32); fp16 on CUDA only
    (the CPU has no fp16 arithmetic to gain from)."""
    precision = parse_precision(precision)
    dev = torch.device(device)
    if precision is Precision.FLOAT32:
        return precision
    if precision is Precision.FP16 and dev.type != "cuda":
        raise ValueError(
            f"--precision fp16 needs a CUDA device, got --device {device}; use bf16 or float32"
        )
    if precision is Precision.BF16:
        if dev.type == "cuda" and torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
            raise ValueError(
                f"--precision bf16: {torch.cuda.get_device_name(dev)} has no bf16; "
                "use fp16 or float32"
            )
        if dev.type == "cpu" and not native_bf16_cpu():
            raise ValueError(
                "--precision bf16: this CPU has no native bf16 (AVX-512 BF16 or AMX), where it "
                "would run slower than float32; use --precision float32"
            )
    return precision


@contextmanager
def mixed_precision(device: str | torch.device, precision: Precision | str) -> Iterator[None]:
    """Within the block, autocast to ``precision`` on ``device`` (nothing for float32).

    The block may hold a whole training loop: autocast's cache of lower-precision weight copies
    is off, since with it every forward pass in one block reuses the copies of the weights as
    they were at the first (the loss stays flat while Adam moves the float32 weights; measured
    on LFW20, issue 27). Each pass casts the weights afresh, a small cost beside the
    activations'."""
    precision = parse_precision(precision)
    if precision is Precision.FLOAT32:
        yield
        return
    with torch.autocast(torch.device(device).type, dtype=DTYPES[precision], cache_enabled=False):
        yield


def grad_scaler(device: str | torch.device) -> torch.amp.GradScaler:
    """A loss scaler for a training loop run in the current autocast state: active where it is
    fp16 (whose small gradients would underflow), a pass-through otherwise (float32, bf16)."""
    kind = torch.device(device).type
    fp16 = torch.is_autocast_enabled(kind) and torch.get_autocast_dtype(kind) == torch.float16
    return torch.amp.GradScaler(kind, enabled=fp16)


@contextmanager
def ieee_float32(device: str | torch.device) -> Iterator[None]:
    """Within the block, on ``device``, autocast is off; on a CUDA device convolutions (cuDNN)
    and matrix products also run in IEEE float32, not TF32. The previous settings are restored
    after."""
    kind = torch.device(device).type
    with torch.autocast(kind, enabled=False):
        if kind != "cuda":
            yield
            return
        conv, matmul = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
        try:
            yield
        finally:
            torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = conv, matmul


def float32_training(fn: F) -> F:
    """Decorator of a DP training loop whose arguments include ``settings`` (with a ``device``):
    the whole call runs under :func:`ieee_float32` on that device."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        settings = signature.bind(*args, **kwargs).arguments["settings"]
        with ieee_float32(settings.device):
            return fn(*args, **kwargs)

    return inner  # type: ignore[return-value]


def upcast(t: torch.Tensor) -> torch.Tensor:
    """``t`` in float32 where it is in a lower precision (bf16, fp16), else as it is (float32
    and float64 unchanged): what a model returns under mixed precision."""
    return t.float() if t.dtype in (torch.bfloat16, torch.float16) else t
