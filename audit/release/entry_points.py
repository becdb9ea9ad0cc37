"""A model released outside the suite: a decoder, or an encoder and decoder, given as a Python
entry point (``PKG.MOD:FN`` or ``path/to/file.py:FN``) that returns it, and checked on one
batch before any attack runs.

The entry point returns either an :class:`ExternalModel` (plain callables, the latent size and
the label convention) or a module that already follows the suite's protocol
(:class:`attacks.threat.LatentDecoder`: ``decode(z, y)`` and an int ``latent_dim``, plus
``encode(x, y)`` -> (mu, logvar) for a whole VAE), whose labels are taken as class indices.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

log = logging.getLogger(__name__)

Decode = Callable[..., torch.Tensor]
Encode = Callable[..., tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class ExternalModel:
    """A released decoder (and, for a whole VAE, its encoder) as plain callables.

    Attributes:
        decode: latents z (B, latent_dim) -> records (B, *shape) in the records' range;
            ``decode(z, y)`` with labels y (B,) int64 when ``conditional``, else ``decode(z)``.
        latent_dim: the latent size d; the prior is N(0, I_d).
        encode: records x (B, *shape) -> (mu, logvar) of q(z | x), each (B, latent_dim);
            ``encode(x, y)`` when ``conditional``; None for a decoder-only release.
        conditional: whether the model takes class labels (the records' ``y``).
    """

    decode: Decode
    latent_dim: int
    encode: Encode | None = None
    conditional: bool = False

    def __post_init__(self) -> None:
        if not callable(self.decode) or (self.encode is not None and not callable(self.encode)):
            raise ValueError("ExternalModel needs a callable decode (and encode, if given)")
        d = self.latent_dim
        if not isinstance(d, int) or isinstance(d, bool) or d < 1:
            raise ValueError(f"latent_dim must be a positive integer, got {d!r}")


class ReleasedModel(nn.Module):
    """An :class:`ExternalModel` under the suite's protocol: ``decode(z, y)``, ``encode(x, y)``
    where it has an encoder, ``latent_dim``; unconditional models ignore ``y``."""

    def __init__(self, model: ExternalModel) -> None:
        super().__init__()
        self.external = model
        self.latent_dim = model.latent_dim
        for part in (model.decode, model.encode):  # their modules follow train()/eval()
            owner = getattr(part, "__self__", None)
            if isinstance(owner, nn.Module) and owner is not self:
                self.add_module(f"part{len(self._modules)}", owner)
        if model.encode is not None:
            self.encode = self._encode

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.external.decode(z, y) if self.external.conditional else self.external.decode(z)

    def _encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        encode = self.external.encode
        mu, logvar = encode(x, y) if self.external.conditional else encode(x)
        return mu, logvar


def as_released(obj: object, *, whole: bool, where: str) -> nn.Module:
    """``obj`` (what an entry point returned) as a model the attacks take; ``whole``: the
    release is a whole VAE, so an encoder is required."""
    if isinstance(obj, ExternalModel):
        if whole and obj.encode is None:
            raise ValueError(f"{where} returned an ExternalModel without encode; a --vae needs one")
        return ReleasedModel(obj)
    has_decoder = callable(getattr(obj, "decode", None)) and isinstance(
        getattr(obj, "latent_dim", None), int
    )
    if not has_decoder or (whole and not callable(getattr(obj, "encode", None))):
        needs = (
            "decode(z, y), encode(x, y) and an int latent_dim"
            if whole
            else ("decode(z, y) and an int latent_dim")
        )
        raise ValueError(
            f"{where} returned {type(obj).__name__}, which lacks {needs}; return an "
            "audit.release.ExternalModel or a module with them"
        )
    if not isinstance(obj, nn.Module):
        raise ValueError(
            f"{where} returned {type(obj).__name__}, not a torch.nn.Module; wrap it "
            "in an audit.release.ExternalModel"
        )
    return obj


@contextmanager
def user_code(where: str) -> Iterator[None]:
    """Run the user's code (``where`` names it): what it prints goes to the log (shown with
    ``-v``) rather than into the command's output, and a ``sys.exit`` in it is refused in one
    line instead of ending the command."""
    printed = io.StringIO()
    try:
        with redirect_stdout(printed), redirect_stderr(printed):
            yield
    except SystemExit as exc:
        raise ValueError(
            f"{where} called sys.exit({exc.code!r}); an entry point and the model it returns "
            "must return, not exit"
        ) from None
    finally:
        if printed.getvalue():
            log.info("%s printed: %s", where, printed.getvalue().rstrip())


def load_entry_point(spec: str, *, flag: str) -> Callable[[], object]:
    """The function named by ``spec``: ``PKG.MOD:FN`` (importable) or ``path/to/file.py:FN``."""
    where = f"{flag} {spec!r}"
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name.isidentifier():
        raise ValueError(f"{where}: expected PKG.MOD:FN or path/to/file.py:FN")
    with user_code(where):
        try:
            module = _import(target)
        except Exception as exc:  # the user's module: any failure is bad input
            raise ValueError(
                f"{where}: cannot import {target!r} ({type(exc).__name__}: {exc})"
            ) from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"{where}: {target!r} has no function {name!r}")
    return fn


def _import(target: str) -> object:
    if not target.endswith(".py"):
        return importlib.import_module(target)
    path = Path(target).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no file {path}")
    name = f"_release_{path.stem}_{abs(hash(path)) % 10**8}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_model(spec: str, *, whole: bool, device: str = "cpu") -> nn.Module:
    """The model an entry point returns (``--vae`` when ``whole``, else ``--decoder``), on
    ``device``, in eval mode."""
    flag = "--vae" if whole else "--decoder"
    fn = load_entry_point(spec, flag=flag)
    with user_code(f"{flag} {spec!r}"):
        try:
            obj = fn()
        except Exception as exc:  # the user's code
            raise ValueError(f"{flag} {spec!r} failed ({type(exc).__name__}: {exc})") from None
    return as_released(obj, whole=whole, where=f"{flag} {spec!r}").to(device).eval()


def check_model(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    value_range: tuple[float, float],
    where: str,
) -> None:
    """Run ``model`` on one batch (the records ``x``, labels ``y``; B >= 1) and refuse it, in
    one line, where it fails or returns the wrong shape, non-finite values or values outside
    ``value_range``."""
    device = next(iter(model.parameters()), torch.empty(0)).device
    x, y = x.to(device), y.to(device)
    shape, d = tuple(x.shape[1:]), model.latent_dim
    z = torch.randn(len(x), d, generator=torch.Generator().manual_seed(0))
    z[0] = 0  # the prior's mode and seeded draws from it
    with torch.inference_mode(), user_code(where):
        try:
            out = model.decode(z.to(device), y)
        except Exception as exc:  # the user's code
            raise ValueError(
                f"{where}: decode failed on one batch of {len(x)} latents of size {d} "
                f"({type(exc).__name__}: {exc})"
            ) from None
        _check_output(out, (len(x), *shape), value_range, f"{where}: decode")
        if callable(getattr(model, "encode", None)):
            try:
                mu, logvar = model.encode(x, y)
            except Exception as exc:  # the user's code
                raise ValueError(
                    f"{where}: encode failed on one batch of {len(x)} records of shape {shape} "
                    f"({type(exc).__name__}: {exc})"
                ) from None
            for name, value in (("mu", mu), ("logvar", logvar)):
                _check_output(value, (len(x), d), None, f"{where}: encode's {name}")


def _check_output(
    out: object, shape: tuple[int, ...], value_range: tuple[float, float] | None, where: str
) -> None:
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != shape:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"{where} returned {got}; expected a tensor of shape {shape}")
    if not bool(torch.isfinite(out).all()):
        raise ValueError(f"{where} returned NaN or infinite values")
    if value_range is not None:
        low, high = float(out.min()), float(out.max())
        if low < value_range[0] or high > value_range[1]:
            raise ValueError(
                f"{where} returned values in [{low:.4g}, {high:.4g}]; the records lie in "
                f"[{value_range[0]:g}, {value_range[1]:g}]"
            )
