"""Paper 003's multitask LSTM VAE for sensor series (Section 4, Figure 2b)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from opacus.layers import DPLSTM
from torch import nn
from torch.nn import functional as F

#: Units of the encoder LSTM and of the decoder's first LSTM (paper 003, Figure 2b).
PAPER_HIDDEN = 164


@dataclass(frozen=True)
class LossWeights:
    """lambda_1 (KL), lambda_2 (reconstruction MSE), lambda_3 (classifier CE); paper 003, Sec. 4."""

    kl: float = 0.01
    reconstruction: float = 50.0
    classifier: float = 0.5

    def __post_init__(self) -> None:
        for name in ("kl", "reconstruction", "classifier"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 <= value < float("inf")):
                raise ValueError(f"loss weight {name} must be a finite number >= 0, got {value!r}")


class LstmVAE(nn.Module):
    """Multitask LSTM VAE of paper 003 (MotionSense).

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
        hidden: int = PAPER_HIDDEN,
        weights: LossWeights = LossWeights(),  # noqa: B008 (frozen, hence immutable)
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

    @property
    def record_shape(self) -> tuple[int, int]:
        """(T, F) of one record."""
        return self.length, self.features

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mu, logvar) of q(z | x), each (B, latent_dim); ``y`` is ignored."""
        out, _ = self.encoder(x)
        last = out[:, -1]
        return self.fc_mu(last), self.fc_logvar(last)

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Series (B, T, F) in (-1, 1) from latents (B, latent_dim); ``y`` is ignored."""
        repeated = z.unsqueeze(1).expand(-1, self.length, -1)
        h, _ = self.decoder(repeated)
        out, _ = self.output(h)
        return out.contiguous()  # DPLSTM's batch-first output is a transposed view

    def classify(self, mu: torch.Tensor) -> torch.Tensor:
        """Class logits (B, num_classes) of the auxiliary classifier on mu."""
        return self.classifier(mu)

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
        """Paper 003's multitask loss per example (B,).

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
