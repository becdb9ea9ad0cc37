"""Which models a cell uses, chosen by the modality of its records (the trade-off paper, Section 4).

Images: the conditional conv VAE, its VAE-LDP variant, the small CNN classifier, generation from
the prior, MSE and SSIM. Series: the multitask LSTM VAE, its VAE-LDP variant, HAR-CNN,
class-specific latent sampling, MSE only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from torch import nn

from dpvae_core.records import Modality, record_modality
from models.classifier import SmallCNN
from models.generation import Generation
from models.har_cnn import HarCNN
from models.lstm_vae import LstmVAE, fuse_lstms
from models.mlp_vae import MlpVAE
from models.perturbation import PerturbationLstmVAE, PerturbationVAE
from models.priors import GaussianMixturePrior
from models.resnet_classifier import ResNetClassifier
from models.training import channels_last_model
from models.vae import ConditionalConvVAE

#: Image classifier kinds a profile may name (``Profile.classifier``); None is the modality's
#: original classifier (images: the small CNN).
#: ``face-embedding`` (:mod:`models.face_embedding`) is dlib's frozen face descriptor with a
#: logistic regression, trained outside the torch loop
#: (``audit.cell.gen_accuracy.classifier_accuracy``).
CLASSIFIERS = ("small-cnn", "resnet", "resnet-half", "face-embedding")
#: Channel multiplier of each residual-net kind (1: about 1.2 M parameters; 0.5: 0.31 M, 4x fewer
#: FLOPs: 32 against 128 MFLOP a forward pass on a 64x64x3 face).
RESNET_WIDTHS = {"resnet": 1.0, "resnet-half": 0.5}
#: How each classifier kind trains (:class:`models.classifier_training.ClassifierSettings`
#: fields; the others keep their defaults: Adam, no augmentation, early stopping on
#: cross-entropy). The residual net's recipe was chosen on LFW20's real D_val
#: (docs/lfw20-faces.md).
RESNET_RECIPE: dict[str, object] = {
    "augment": True,
    "label_smoothing": 0.1,
    "stop_on": "accuracy",
    "weight_decay": 5e-4,
    "batch_size": 32,
    "lr": 2e-3,
}
CLASSIFIER_RECIPES: dict[str, dict[str, object]] = {k: RESNET_RECIPE for k in RESNET_WIDTHS}


@dataclass(frozen=True)
class ModelFamily(ABC):
    """The models for records of ``record_shape`` with ``num_classes`` classes."""

    modality: ClassVar[Modality]
    generation: ClassVar[Generation]

    record_shape: tuple[int, ...]
    num_classes: int

    @abstractmethod
    def target_vae(self, *, latent_dim: int, per_example_gradients: bool = True) -> nn.Module:
        """A fresh target VAE (encode, decode, forward, latent_dim); initialised from torch's
        default generator, which the caller seeds.

        ``per_example_gradients=False`` may give a faster implementation of the same function
        with the same initial weights (series: fused ``nn.LSTM`` instead of Opacus's ``DPLSTM``)
        for training without DP-Adam; the image VAE has one implementation for both.
        """

    @abstractmethod
    def perturbation_vae(self, *, latent_dim: int, sigma: float, mean_bound: float) -> nn.Module:
        """A fresh VAE-LDP perturbation model with the target's architecture (trained without
        per-example gradients, so in its fast implementation)."""

    def for_inference(self, model: nn.Module) -> nn.Module:
        """``model`` in its fastest implementation of the same function, for generation and the
        attack once training is over (in place; the state dict keeps its keys)."""
        return model

    @abstractmethod
    def classifier(self, kind: str | None = None) -> nn.Module:
        """A fresh target classifier: records (B, *record_shape) -> logits (B, num_classes).

        ``kind`` (:data:`CLASSIFIERS`, images only): which one; None is the modality's own.
        """

    def _only_default(self, kind: str | None) -> None:
        if kind is not None:
            raise ValueError(
                f"classifier {kind!r} is for images; {self.modality.value} records use their "
                "own classifier (leave the profile's classifier unset)"
            )


@dataclass(frozen=True)
class ImageModels(ModelFamily):
    modality = Modality.IMAGE
    generation = Generation.PRIOR

    def target_vae(
        self, *, latent_dim: int, per_example_gradients: bool = True
    ) -> ConditionalConvVAE:
        channels, height, width = self.record_shape
        return ConditionalConvVAE(
            channels=channels,
            height=height,
            width=width,
            num_classes=self.num_classes,
            latent_dim=latent_dim,
        )

    def perturbation_vae(
        self, *, latent_dim: int, sigma: float, mean_bound: float
    ) -> PerturbationVAE:
        channels, height, width = self.record_shape
        return PerturbationVAE(
            channels=channels,
            height=height,
            width=width,
            num_classes=self.num_classes,
            latent_dim=latent_dim,
            sigma=sigma,
            mean_bound=mean_bound,
        )

    def for_inference(self, model: nn.Module) -> nn.Module:
        """Convolution weights in channels-last layout (:func:`channels_last_model`)."""
        return channels_last_model(model)

    def classifier(self, kind: str | None = None) -> nn.Module:
        channels = self.record_shape[0]
        if kind in RESNET_WIDTHS:
            return ResNetClassifier(
                channels=channels, num_classes=self.num_classes, width=RESNET_WIDTHS[kind]
            )
        if kind not in (None, "small-cnn"):
            raise ValueError(f"unknown classifier {kind!r}; known: {', '.join(CLASSIFIERS)}")
        return SmallCNN(channels=channels, num_classes=self.num_classes)


@dataclass(frozen=True)
class SeriesModels(ModelFamily):
    modality = Modality.SERIES
    generation = Generation.CLASS_LATENT

    def target_vae(self, *, latent_dim: int, per_example_gradients: bool = True) -> LstmVAE:
        length, features = self.record_shape
        return LstmVAE(
            length=length,
            features=features,
            num_classes=self.num_classes,
            latent_dim=latent_dim,
            per_example_gradients=per_example_gradients,
        )

    def perturbation_vae(
        self, *, latent_dim: int, sigma: float, mean_bound: float
    ) -> PerturbationLstmVAE:
        length, features = self.record_shape
        return PerturbationLstmVAE(
            length=length,
            features=features,
            num_classes=self.num_classes,
            latent_dim=latent_dim,
            sigma=sigma,
            mean_bound=mean_bound,
            per_example_gradients=False,
        )

    def for_inference(self, model: nn.Module) -> nn.Module:
        return fuse_lstms(model)

    def classifier(self, kind: str | None = None) -> HarCNN:
        self._only_default(kind)
        return HarCNN(features=self.record_shape[1], num_classes=self.num_classes)


#: PriVAE, Section 5.2: L = 20 reconstruction samples per record for the pinwheel model.
POINT_SAMPLES = 20
#: Hidden units of the points classifier's two layers.
POINT_CLASSIFIER_HIDDEN = 64


class PointClassifier(nn.Sequential):
    """The target classifier of points (B, D): a two-hidden-layer MLP (ReLU)."""

    def __init__(self, *, features: int, num_classes: int) -> None:
        h = POINT_CLASSIFIER_HIDDEN
        super().__init__(
            nn.Linear(features, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, num_classes)
        )


@dataclass(frozen=True)
class PointModels(ModelFamily):
    """Points (D,), PriVAE's clustering task: the MLP VAE of Mathieu et al. (2019), with the
    mixture prior at the corners of the unit square when the latent space is 2-D (PriVAE,
    Section 5.2; N(0, I) otherwise) and L = 20 reconstruction samples; the VAE is
    unconditional (clustering is unsupervised), so D_gen decodes z ~ q(z | x_j) of a training
    point of the label's class (class-latent generation, as for series)."""

    modality = Modality.POINTS
    generation = Generation.CLASS_LATENT

    def target_vae(self, *, latent_dim: int, per_example_gradients: bool = True) -> MlpVAE:
        prior = GaussianMixturePrior() if latent_dim == 2 else None
        return MlpVAE(
            data_dim=self.record_shape[0],
            latent_dim=latent_dim,
            num_classes=self.num_classes,
            prior=prior,
            samples=POINT_SAMPLES,
        )

    def perturbation_vae(self, *, latent_dim: int, sigma: float, mean_bound: float) -> nn.Module:
        raise ValueError(
            "vae-ldp is defined for images and series, not for points (pinwheel): choose "
            "none, cdp or cdp-termwise"
        )

    def classifier(self, kind: str | None = None) -> PointClassifier:
        self._only_default(kind)
        return PointClassifier(features=self.record_shape[0], num_classes=self.num_classes)


FAMILIES: dict[Modality, type[ModelFamily]] = {
    Modality.IMAGE: ImageModels,
    Modality.SERIES: SeriesModels,
    Modality.POINTS: PointModels,
}


def model_family(record_shape: Sequence[int], num_classes: int) -> ModelFamily:
    """The model family for records of ``record_shape``: (C, H, W) images, (T, F) series or
    (D,) points."""
    shape = tuple(int(s) for s in record_shape)
    return FAMILIES[record_modality(shape)](record_shape=shape, num_classes=num_classes)
