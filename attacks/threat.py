"""Threat models: what a release gives the attacker, and what each attack needs.

A mechanism releases the whole VAE, the decoder only, or synthetic data D_gen only; the attacker
may also hold reference records (drawn from the population, in neither D_train nor D_atk) and
reference models trained on them. A mechanism declares which of the three it publishes as a
:class:`ReleaseKind` (:func:`released_capabilities` says what each gives); :class:`Release` holds
what is available; an attack declares ``needs`` (required) and ``uses`` (optional extras that add
calibrated variants) as frozensets of :class:`Capability`, and :func:`applicable` /
:func:`require` compare the two.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar, Protocol, runtime_checkable

import torch


class Capability(Enum):
    """One thing a release (or the attacker's side knowledge) can provide."""

    ENCODER = "encoder"
    """q(z | x, y): ``model.encode`` of the released VAE."""
    DECODER = "decoder"
    """p(x | z, y): a callable ``decode(z, y)`` with its ``latent_dim``."""
    SAMPLES = "samples"
    """D_gen: generated records with their labels."""
    REFERENCE_RECORDS = "reference-records"
    """Records from the population, in neither D_train nor D_atk."""
    REFERENCE_MODELS = "reference-models"
    """Models of the target's kind trained on reference records (calibration, offline LiRA)."""


class ReleaseKind(Enum):
    """What a mechanism publishes of the model it trained (the DP2-VAE paper releases the decoder
    only)."""

    WHOLE_VAE = "whole-vae"
    """The trained VAE, encoder and decoder (cdp, cdp-termwise, ldp, vae-ldp, none)."""
    DECODER_ONLY = "decoder-only"
    """The decoder alone; the attacker can sample it, so D_gen comes with it (dp2vae)."""
    SAMPLES_ONLY = "samples-only"
    """Synthetic data D_gen alone (any mechanism, when a user publishes only generated data)."""

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this release gives the attacker (:func:`released_capabilities`)."""
        return released_capabilities(self)


_RELEASED: dict[ReleaseKind, frozenset[Capability]] = {
    ReleaseKind.WHOLE_VAE: frozenset({Capability.ENCODER, Capability.DECODER, Capability.SAMPLES}),
    ReleaseKind.DECODER_ONLY: frozenset({Capability.DECODER, Capability.SAMPLES}),
    ReleaseKind.SAMPLES_ONLY: frozenset({Capability.SAMPLES}),
}


def released_capabilities(kind: ReleaseKind) -> frozenset[Capability]:
    """The capabilities a release of ``kind`` gives: whole VAE -> encoder, decoder and samples;
    decoder only -> decoder and samples (the attacker samples the decoder); samples only ->
    samples. Reference records and models are the attacker's side knowledge, never released."""
    if not isinstance(kind, ReleaseKind):
        valid = ", ".join(k.value for k in ReleaseKind)
        raise ValueError(f"release kind must be a ReleaseKind ({valid}), got {kind!r}")
    return _RELEASED[kind]


@runtime_checkable
class LatentGenerativeModel(Protocol):
    """A conditional latent-variable generative model, as the attacks see it (e.g. a VAE).

    ``torch.nn.Module`` subclasses provide ``training`` and ``train``; the attacks switch the
    model to eval mode while they run and restore its mode afterwards.
    """

    training: bool

    def train(self, mode: bool = True) -> object:
        """Set training mode (``nn.Module.train``)."""
        ...

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mu, logvar) of q(z | x, y), each (B, latent_dim), for x (B, *shape) and y (B,)."""
        ...

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Reconstructions (B, *shape) from latents z (B, latent_dim) and labels y (B,) int64."""
        ...


class Threat(Protocol):
    """What :func:`missing` reads of an attack (class or instance): its name and needs."""

    name: ClassVar[str]
    needs: ClassVar[frozenset[Capability]]


@runtime_checkable
class LatentDecoder(Protocol):
    """A conditional decoder as the decoder-only attacks see it (``ConditionalConvVAE`` fits)."""

    latent_dim: int

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Records (B, *shape) from latents z (B, latent_dim) and labels y (B,) int64."""
        ...


@dataclass(frozen=True)
class Records:
    """Labelled records without membership: D_gen or the reference records.

    Attributes:
        x: (n, *shape) floating, finite records, n >= 1.
        y: (n,) int64 labels.
    """

    x: torch.Tensor
    y: torch.Tensor

    def __post_init__(self) -> None:
        if self.x.dim() < 2 or not self.x.is_floating_point() or self.x.shape[0] < 1:
            raise ValueError(
                f"x must be a floating tensor (n, *shape) with n >= 1, got dtype {self.x.dtype} "
                f"and shape {tuple(self.x.shape)}"
            )
        n = self.x.shape[0]
        if self.y.shape != (n,) or self.y.dtype != torch.int64:
            raise ValueError(
                f"y must be an int64 tensor of shape ({n},) to match x, got dtype {self.y.dtype} "
                f"and shape {tuple(self.y.shape)}"
            )
        if not bool(torch.isfinite(self.x).all()):
            n_bad = int((~torch.isfinite(self.x)).sum())
            raise ValueError(f"x must be finite, got {n_bad} NaN or infinite values")

    def __len__(self) -> int:
        return int(self.x.shape[0])

    @property
    def record_shape(self) -> tuple[int, ...]:
        """Shape of one record."""
        return tuple(self.x.shape[1:])


def _is_decoder(obj: object) -> bool:
    latent_dim = getattr(obj, "latent_dim", None)
    return callable(getattr(obj, "decode", None)) and isinstance(latent_dim, int)


@dataclass(frozen=True)
class Release:
    """What the attacker holds. Every field is optional; the attacks read what they need.

    Attributes:
        model: the released VAE (encoder and decoder, with an int ``latent_dim``), or None when
            only part of it is released.
        decoder: the released decoder; defaults to ``model`` when the whole VAE is released.
        samples: D_gen, generated records with their labels.
        reference: reference records, in neither D_train nor D_atk.
        reference_models: models of the target's architecture trained on reference records (any
            sequence, stored as a tuple), by the target's training procedure, its privacy
            mechanism included (the shadow models of Carlini et al. 2022); empty when the
            attacker has none. The likelihood attack needs their encoders as well as their
            decoders. Calibrated variants against them: ``calibrated``, ``lira-offline``.
        nonprivate_reference_models: a second set, of the same architecture on the same
            records, trained WITHOUT the target's privacy mechanism; its calibrated variants are
            labelled ``calibrated-nonprivate`` and ``lira-offline-nonprivate``
            (:data:`attacks.attack.NONPRIVATE_VARIANTS`). Empty where the attacker has none or
            the first set is non-private already.

    Examples:
        Whole VAE plus D_gen and reference data (cdp, ldp, none):
        ``Release(model=vae, samples=Records(x_gen, y_gen), reference=Records(x_ref, y_ref))``;
        decoder only (dp2vae): ``Release(decoder=vae)``; D_gen only:
        ``Release(samples=Records(x_gen, y_gen), reference=Records(x_ref, y_ref))``.
    """

    model: LatentGenerativeModel | None = None
    decoder: LatentDecoder | None = None
    samples: Records | None = None
    reference: Records | None = None
    reference_models: tuple[LatentGenerativeModel, ...] = field(default=())
    nonprivate_reference_models: tuple[LatentGenerativeModel, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.model is not None:
            if not callable(getattr(self.model, "encode", None)) or not _is_decoder(self.model):
                raise ValueError(
                    "model must have encode(x, y), decode(z, y) and an int latent_dim, got "
                    f"{type(self.model).__name__}"
                )
            if self.decoder is None:
                object.__setattr__(self, "decoder", self.model)
        if self.decoder is not None and not _is_decoder(self.decoder):
            raise ValueError(
                "decoder must have decode(z, y) and an int latent_dim, got "
                f"{type(self.decoder).__name__}"
            )
        for label, records in (("samples", self.samples), ("reference", self.reference)):
            if records is not None and not isinstance(records, Records):
                raise ValueError(f"{label} must be Records(x, y) or None, got {records!r}")
        for label in ("reference_models", "nonprivate_reference_models"):
            models = getattr(self, label)
            if isinstance(models, (str, bytes)) or not hasattr(models, "__iter__"):
                raise ValueError(f"{label} must be a sequence of models, got {models!r}")
            models = tuple(models)
            for k, ref in enumerate(models):
                if not _is_decoder(ref):
                    raise ValueError(
                        f"{label}[{k}] must have decode(z, y) and an int latent_dim, got "
                        f"{type(ref).__name__}"
                    )
            object.__setattr__(self, label, models)

    def reference_sets(self) -> tuple[tuple[tuple[LatentGenerativeModel, ...], bool], ...]:
        """(models, non-private) of each non-empty reference set: the mechanism-copying set
        first (non-private False), then the non-private one."""
        sets = ((self.reference_models, False), (self.nonprivate_reference_models, True))
        return tuple((models, nonprivate) for models, nonprivate in sets if models)

    @classmethod
    def of_kind(
        cls,
        kind: ReleaseKind,
        *,
        model: LatentGenerativeModel,
        samples: Records | None,
        reference: Records | None = None,
        reference_models: tuple[LatentGenerativeModel, ...] = (),
    ) -> Release:
        """What a mechanism of release ``kind`` publishes of its trained ``model`` and D_gen
        ``samples``, with the attacker's side knowledge (``reference``, ``reference_models``).

        Its capabilities are ``released_capabilities(kind)`` plus the side knowledge given.
        """
        released_capabilities(kind)  # refuses anything but a ReleaseKind
        if kind is ReleaseKind.WHOLE_VAE:
            held: dict[str, object] = {"model": model}
        elif kind is ReleaseKind.DECODER_ONLY:
            held = {"decoder": model}
        else:
            held = {}
        return cls(**held, samples=samples, reference=reference, reference_models=reference_models)

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this release provides."""
        present = {
            Capability.ENCODER: self.model is not None,
            Capability.DECODER: self.decoder is not None,
            Capability.SAMPLES: self.samples is not None,
            Capability.REFERENCE_RECORDS: self.reference is not None,
            Capability.REFERENCE_MODELS: bool(self.reference_sets()),
        }
        return frozenset(cap for cap, ok in present.items() if ok)


def missing(attack: Threat, release: Release | ReleaseKind) -> frozenset[Capability]:
    """The capabilities ``attack`` needs that ``release`` (a release, or a kind of release)
    lacks; empty when it applies."""
    return frozenset(attack.needs - release.capabilities)


def applicable(attack: Threat, release: Release | ReleaseKind) -> bool:
    """Whether ``release`` (a release, or a kind of release) provides all ``attack`` needs."""
    return not missing(attack, release)


def require(attack: Threat, release: Release) -> None:
    """Raise a ValueError naming what ``attack`` needs and ``release`` lacks."""
    lacking = missing(attack, release)
    if lacking:
        names = ", ".join(sorted(cap.value for cap in lacking))
        have = ", ".join(sorted(cap.value for cap in release.capabilities)) or "nothing"
        raise ValueError(
            f"attack {attack.name!r} needs {names}, which this release lacks (it has {have}); "
            "check applicable(attack, release) before running it"
        )
