"""Arithmetic precision: IEEE float32 where a result must be float32, mixed precision elsewhere.

**Mixed precision** (``--precision bf16`` or ``fp16``; :func:`mixed_precision`) runs convolutions
and matrix products under ``torch.autocast`` in the lower precision: non-private VAE training,
VAE-LDP's perturbation-model training, generation, every attack's decoding and the target
classifier. What a privacy claim or a score's ranking rests on stays float32: the models'
encoders and decoders return float32 (:func:`models.vae.ConditionalConvVAE.decode`), the VAE loss
is computed in float32 outside autocast, and the blocks below switch autocast off.

**Which precision** (:func:`resolve_precision`): ``--precision auto``, the command line's
default, is bf16 on a CPU with native bf16 and on a CUDA GPU where a short probe of training
steps measures bf16 faster (:func:`bf16_speedup`), float32 elsewhere; resolved once before any
work, and only the resolved value is recorded.

**IEEE float32** (:func:`ieee_float32`, :func:`float32_training`). On Ampere and later GPUs
cuDNN runs float32 convolutions in TF32 (a 10-bit mantissa) by default
(``torch.backends.cudnn.allow_tf32`` is True), and matrix products may too. Three places must
not:

- DP-Adam, term-wise DP-Adam and DP2-VAE training (:func:`float32_training`): the per-example
  norms, the clipping and the clipped sums are computed by convolutions and matrix products, and
  the privacy claim takes each clipped per-example gradient to have norm at most C. In TF32 the
  norms and the sums carry relative errors near 1e-3 instead of float32's 1e-7, so a clipped
  gradient could exceed C by about a thousandth; the design keeps these computations in float32.
  A bf16 cell's DP-Adam (book-keeping) runs only the passes behind its per-example gradients
  under bf16 autocast, inside this block; the norms, clip factors and sum stay IEEE float32,
  on certified bounds (:mod:`models.dp.bk_bound`).
- VAE-LDP's release (:meth:`models.perturbation.NoiseBound.perturb`): the bounded mean, the
  noise floor and the Gaussian noise the claim reads;
- the face descriptor of float32 cells (:mod:`models.face_embedding`), whose codes then match
  dlib's (a bf16 cell's runs under autocast: codes within about 1 %, the classifier's accuracy
  unchanged, ``benchmarks/study_descriptor_precision.py``).

All three also switch autocast off, on any device, so an enclosing mixed-precision block never
reaches them. On the CPU nothing else changes (there is no TF32 there).
"""

from __future__ import annotations

import functools
import inspect
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

import torch

from dpvae_core.validation import AUTO, parse_enum

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


#: The least speed-up (float32 seconds over bf16 seconds in :func:`bf16_speedup`) for which
#: ``--precision auto`` picks bf16 on a CUDA GPU. These models are small: on an H200 bf16 ran
#: 0.86-0.88x as fast as float32 (kernel launches, not arithmetic, set the time), so bf16 must
#: show a clear gain, beyond a short probe's scatter, before it changes a run's arithmetic.
BF16_MIN_SPEEDUP = 1.1


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a run uses and why (``reason``: the flag as given, or what ``auto`` saw);
    ``speedup``: the probe's float32/bf16 time ratio where ``auto`` measured one."""

    precision: Precision
    reason: str
    speedup: float | None = None

    def line(self) -> str:
        """The one line a command prints: ``precision: bf16 (auto: ...)``."""
        return f"precision: {self.precision.value} ({self.reason})"


def cuda_bf16() -> bool:
    """Whether torch's current CUDA device computes bf16 (Ampere and later)."""
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def bf16_speedup(
    run: Callable[[Precision], object],
    *,
    rounds: int = 5,
    timer: Callable[[], float] = time.perf_counter,
) -> float:
    """float32's median seconds over bf16's for ``run(precision)`` (which must return only once
    its work is done: on CUDA, synchronised). Each precision runs once untimed first (cuDNN's
    choice of kernels, allocations), then ``rounds`` times, the two taking turns and the one
    that starts alternating, so that a drift in the machine's speed falls on both alike."""
    pair = (Precision.FLOAT32, Precision.BF16)
    for precision in pair:
        run(precision)
    seconds: dict[Precision, list[float]] = {p: [] for p in pair}
    for i in range(rounds):
        for precision in pair if i % 2 == 0 else pair[::-1]:
            start = timer()
            run(precision)
            seconds[precision].append(timer() - start)
    slow, fast = (statistics.median(seconds[p]) for p in pair)
    return slow / fast if fast > 0 else float("inf")


def resolve_precision(
    value: Precision | str,
    device: str | torch.device,
    *,
    probe: Callable[[], float] | None = None,
) -> PrecisionChoice:
    """The precision ``value`` names on ``device``, resolved once before any work.

    An explicit value must pass :func:`check_precision_supported`. :data:`AUTO`: on a CPU, bf16
    where it computes bf16 natively (AVX-512 BF16 or AMX), else float32; on a CUDA GPU with bf16,
    bf16 only where ``probe()`` (float32 seconds over bf16 seconds of a few training steps of the
    run's VAE, :func:`bf16_speedup`) reaches :data:`BF16_MIN_SPEEDUP`, else float32 (also where
    no probe is given)."""
    if value != AUTO:
        precision = check_precision_supported(value, device)
        return PrecisionChoice(precision, f"--precision {precision.value}")
    dev = torch.device(device)
    if dev.type == "cpu":
        if native_bf16_cpu():
            return PrecisionChoice(Precision.BF16, f"{AUTO}: this CPU computes bf16 natively")
        return PrecisionChoice(
            Precision.FLOAT32, f"{AUTO}: this CPU has no native bf16 (AVX-512 BF16 or AMX)"
        )
    if not cuda_bf16():
        return PrecisionChoice(Precision.FLOAT32, f"{AUTO}: this GPU has no bf16")
    if probe is None:
        return PrecisionChoice(Precision.FLOAT32, f"{AUTO}: bf16 not measured on this GPU")
    speedup = probe()
    verdict = "at least" if speedup >= BF16_MIN_SPEEDUP else "below"
    reason = (
        f"{AUTO}: bf16 ran {speedup:.2f}x as fast as float32 in a probe of training steps on "
        f"this GPU, {verdict} the {BF16_MIN_SPEEDUP:.2f}x bf16 needs"
    )
    chosen = Precision.BF16 if speedup >= BF16_MIN_SPEEDUP else Precision.FLOAT32
    return PrecisionChoice(chosen, reason, speedup)


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
