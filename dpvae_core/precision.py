"""IEEE float32 on CUDA where a result must be float32.

On Ampere and later GPUs cuDNN runs float32 convolutions in TF32 (a 10-bit mantissa) by default
(``torch.backends.cudnn.allow_tf32`` is True), and matrix products may too. Two places must not:

- DP-Adam, term-wise DP-Adam and DP2-VAE training (:func:`float32_training`): the per-example
  norms, the clipping and the clipped sums are computed by convolutions and matrix products, and
  the privacy claim takes each clipped per-example gradient to have norm at most C. In TF32 the
  norms and the sums carry relative errors near 1e-3 instead of float32's 1e-7, so a clipped
  gradient could exceed C by about a thousandth; the design keeps these computations in float32.
- the face descriptor (:mod:`models.face_embedding`), whose codes must match dlib's.

On the CPU nothing changes (there is no TF32 there).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import torch

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def ieee_float32(device: str | torch.device) -> Iterator[None]:
    """Within the block, on a CUDA ``device``, convolutions (cuDNN) and matrix products run in
    IEEE float32, not TF32; the previous settings are restored after. A no-op on other
    devices."""
    if torch.device(device).type != "cuda":
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
