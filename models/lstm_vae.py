"""The trade-off paper's multitask LSTM VAE for sensor series (Section 4, Figure 2b).

Its LSTMs come in two implementations of one function: Opacus's ``DPLSTM`` (a Python loop over
the time steps, which Opacus can take per-example gradients of) and PyTorch's fused ``nn.LSTM``
(one C++ kernel, several times faster). Both are built from the same random draws and share
``nn.LSTM``'s parameter names, so a state dict moves freely between them; DP-Adam trains with
``DPLSTM`` and everything else (non-private training, generation, the attack) runs on ``nn.LSTM``
(:func:`fuse_lstms`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from opacus.layers import DPLSTM
from torch import nn
from torch.nn import functional as F

from dpvae_core.precision import upcast

#: Units of the encoder LSTM and of the decoder's first LSTM (the trade-off paper, Figure 2b).
LSTM_HIDDEN = 164


def fused_lstm(lstm: DPLSTM) -> nn.LSTM:
    """An ``nn.LSTM`` holding (copies of) ``lstm``'s weights: the same function, fused kernel.

    The global random generator is left untouched (``nn.LSTM`` draws its initial weights from it
    before they are overwritten), so fusing never shifts what later random draws produce.
    """
    if lstm.bidirectional or lstm.proj_size or lstm.dropout:
        raise ValueError("only unidirectional DPLSTMs without projection or dropout are fused")
    reference = next(lstm.parameters())
    with torch.random.fork_rng(devices=[]):
        fused = nn.LSTM(
            lstm.input_size,
            lstm.hidden_size,
            num_layers=lstm.num_layers,
            bias=lstm.bias,
            batch_first=lstm.batch_first,
            device=reference.device,
            dtype=reference.dtype,
        )
    fused.load_state_dict(lstm.state_dict())
    fused.train(lstm.training)
    fused.requires_grad_(reference.requires_grad)
    return fused


def fuse_lstms(module: nn.Module) -> nn.Module:
    """Replace, in place, every Opacus ``DPLSTM`` inside ``module`` by :func:`fused_lstm` of it;
    returns ``module``. A module without DPLSTMs (the conv VAE) is returned unchanged.

    Per-example gradients (Opacus) need the DPLSTMs; anything else runs faster fused. Optimizers
    built before the call still point at the old parameters, so fuse before building one.
    """
    for name, child in list(module.named_children()):
        if isinstance(child, DPLSTM):
            setattr(module, name, fused_lstm(child))
        else:
            fuse_lstms(child)
    return module


#: The names under which a DPLSTM nested in a model lists its weights a second time in the
#: model's state dict (its own state-dict hook drops them only when it is the root module).
_DP_LSTM_ALIAS = re.compile(r"(^|\.)l\d+\.(ih|hh)\.(weight|bias)$")


def without_dp_lstm_aliases(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` without a nested DPLSTM's duplicate keys (``encoder.l0.ih.weight``, ...): the
    keys of the fused model, so that a state saved from either implementation loads into it."""
    return {k: v for k, v in state.items() if not _DP_LSTM_ALIAS.search(k)}


@dataclass(frozen=True)
class LossWeights:
    """lambda_1 (KL), lambda_2 (reconstruction MSE), lambda_3 (classifier CE); the trade-off paper,
    Sec. 4."""

    kl: float = 0.01
    reconstruction: float = 50.0
    classifier: float = 0.5

    def __post_init__(self) -> None:
        for name in ("kl", "reconstruction", "classifier"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 <= value < float("inf")):
                raise ValueError(f"loss weight {name} must be a finite number >= 0, got {value!r}")


class LstmVAE(nn.Module):
    """Multitask LSTM VAE of the trade-off paper (MotionSense).

    Encoder: LSTM (``hidden`` = 164 units) over the series; its last output feeds two dense
    layers for mu and log-variance. Decoder: z repeated T times (Keras' RepeatVector) -> LSTM
    (``hidden`` units) -> LSTM with F units whose outputs are the series; an LSTM's output
    ``o * tanh(c)`` lies in (-1, 1), the range of the normalised data. An auxiliary dense
    classifier reads mu; it clusters the latent space by class (the "multitask" part).

    Shapes: x is (B, T, F), normalised to [-1, 1]; y is (B,) int64 labels. The model is not
    conditional: ``encode`` and ``decode`` accept y for the common VAE interface and ignore it.
    All LSTMs are Opacus ``DPLSTM``s (numerically an ``nn.LSTM``), so that Opacus computes
    exact per-example gradients for DP-Adam.
    """

    def __init__(
        self,
        *,
        length: int,
        features: int,
        num_classes: int,
        latent_dim: int = 100,
        hidden: int = LSTM_HIDDEN,
        weights: LossWeights = LossWeights(),  # noqa: B008 (frozen, hence immutable)
        per_example_gradients: bool = True,
    ) -> None:
        super().__init__()
        if min(length, features, num_classes, latent_dim, hidden) < 1:
            raise ValueError(
                f"LSTM VAE sizes must be positive, got length={length}, features={features}, "
                f"num_classes={num_classes}, latent_dim={latent_dim}, hidden={hidden}"
            )
        self.length, self.features, self.hidden = length, features, hidden
        self.num_classes, self.latent_dim, self.weights = num_classes, latent_dim, weights
        self.encoder = DPLSTM(features, hidden, batch_first=True)
        self.fc_mu = nn.Linear(hidden, latent_dim)
        self.fc_logvar = nn.Linear(hidden, latent_dim)
        self.decoder = DPLSTM(latent_dim, hidden, batch_first=True)
        self.output = DPLSTM(hidden, features, batch_first=True)
        self.classifier = nn.Linear(latent_dim, num_classes)
        if not per_example_gradients:
            fuse_lstms(self)

    @property
    def record_shape(self) -> tuple[int, int]:
        """(T, F) of one record."""
        return self.length, self.features

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mu, logvar) of q(z | x), each (B, latent_dim); ``y`` is ignored."""
        out, _ = self.encoder(x)
        last = out[:, -1]
        return upcast(self.fc_mu(last)), upcast(self.fc_logvar(last))  # float32 under autocast

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Series (B, T, F) in (-1, 1) from latents (B, latent_dim); ``y`` is ignored."""
        repeated = z.unsqueeze(1).expand(-1, self.length, -1)
        h, _ = self.decoder(repeated)
        out, _ = self.output(h)
        # DPLSTM's batch-first output is a transposed view (nn.LSTM's not); float32 under autocast
        return upcast(out.contiguous())

    def classify(self, mu: torch.Tensor) -> torch.Tensor:
        """Class logits (B, num_classes) of the auxiliary classifier on mu."""
        return upcast(self.classifier(mu))

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One reparameterised pass; ``noise`` is standard normal (B, latent_dim).

        Returns (reconstruction, mu, logvar, z), as ``ConditionalConvVAE.forward``.
        """
        mu, logvar = self.encode(x, y)
        z = mu + torch.exp(0.5 * logvar) * noise
        return self.decode(z, y), mu, logvar, z

    def per_example_loss(
        self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor, *, beta: float
    ) -> torch.Tensor:
        """The trade-off paper's multitask loss per example (B,).

        ``weights.reconstruction * MSE(x_hat, x) + beta * weights.kl * KL + weights.classifier *
        CE(classify(mu), y)``: MSE is the mean over the T x F values (Keras' ``mse``), KL is
        KL(N(mu, diag(exp(logvar))) || N(0, I)) summed over the latent dimensions. ``beta``
        scales the KL weight, so the profiles' default beta = 1 is the paper's lambda_1 = 0.01.
        """
        recon, mu, logvar, _ = self(x, y, noise)
        rec = (recon - x).pow(2).flatten(1).mean(1)
        kl = 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(1)
        ce = F.cross_entropy(self.classify(mu), y.long(), reduction="none")
        w = self.weights
        return w.reconstruction * rec + beta * w.kl * kl + w.classifier * ce
