"""A fully connected VAE for low-dimensional points: PriVAE's pinwheel model (PriVAE, Sec. 5.2).

PriVAE says only "fully-connected neural networks for both encoder and decoder", following
Mathieu et al. (2019), whose pinwheel model (``src/models/vae_pinwheel.py``) is: encoder Linear(2,
100) -> ReLU -> two heads for the posterior's mean and scale; decoder Linear(D, 100) -> ReLU ->
two heads for the mean and scale of a Gaussian likelihood p(x | z). This module keeps that
architecture (``hidden`` = 100 units, ``hidden_layers`` = 1) with two changes of
parameterisation: the encoder's second head outputs the log-variance directly (the interface
every VAE here shares; Mathieu et al. use softplus(h) + 1e-6 as the standard deviation), and the
decoder's standard deviation is softplus(h) + :data:`MIN_DECODER_STD` (a floor against the
variance collapse a free Gaussian likelihood allows on 400 points).

Every trainable parameter sits in an ``nn.Linear``, so Opacus's grad-sample modes and the
book-keeping clipper (``models.dp.book_keeping``) compute its per-example gradients.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from dpvae_core.precision import upcast
from dpvae_core.validation import check_positive_int
from models.priors import GaussianMixturePrior, diagonal_gaussian_log_prob, monte_carlo_kl

#: Mathieu et al.'s pinwheel model: one hidden layer of 100 units in encoder and decoder.
MLP_HIDDEN = 100
#: Floor of the decoder's standard deviation (in data units).
MIN_DECODER_STD = 1e-3


def _mlp(in_dim: int, hidden: int, layers: int) -> nn.Sequential:
    mods: list[nn.Module] = [nn.Linear(in_dim, hidden), nn.ReLU()]
    for _ in range(layers - 1):
        mods += [nn.Linear(hidden, hidden), nn.ReLU()]
    return nn.Sequential(*mods)


class MlpVAE(nn.Module):
    """Gaussian-encoder, Gaussian-decoder MLP VAE on points (B, data_dim).

    The interface of ``models.vae.ConditionalConvVAE``: ``encode(x, y) -> (mu, logvar)``,
    ``decode(z, y)`` (the likelihood's mean), ``forward(x, y, noise)``, ``latent_dim``,
    ``num_classes``; plus ``per_example_loss`` (``models.training.OwnObjective``).
    The clustering task is unsupervised and Mathieu et al.'s model unconditional, so labels are
    ignored unless ``conditional=True``, which appends the one-hot label to the encoder's input
    and to z (as the conv VAE does). The layer names ``encoder``, ``fc_mu`` and ``fc_logvar``
    are those ``models.dp.termwise_loop.encoder_parameters`` reads.

    ``prior`` is the p(z) of the sample-wise KL: None for N(0, I) (closed form), or a
    :class:`models.priors.GaussianMixturePrior` (Monte-Carlo, PriVAE, Eq. 11). ``samples``:
    L, the reparameterised samples per record the training loops draw (:attr:`noise_shape`).
    """

    def __init__(
        self,
        *,
        data_dim: int = 2,
        latent_dim: int = 2,
        num_classes: int = 4,
        hidden: int = MLP_HIDDEN,
        hidden_layers: int = 1,
        conditional: bool = False,
        prior: GaussianMixturePrior | None = None,
        samples: int = 1,
    ) -> None:
        super().__init__()
        for name, value in (
            ("data_dim", data_dim),
            ("latent_dim", latent_dim),
            ("num_classes", num_classes),
            ("hidden", hidden),
            ("hidden_layers", hidden_layers),
            ("samples", samples),
        ):
            check_positive_int(name, value)
        if prior is not None and prior.dim != latent_dim:
            raise ValueError(f"the prior is {prior.dim}-dimensional but latent_dim is {latent_dim}")
        self.data_dim, self.latent_dim, self.num_classes = data_dim, latent_dim, num_classes
        self.conditional, self.prior, self.samples = conditional, prior, samples
        extra = num_classes if conditional else 0
        self.encoder = _mlp(data_dim + extra, hidden, hidden_layers)
        self.fc_mu = nn.Linear(hidden, latent_dim)
        self.fc_logvar = nn.Linear(hidden, latent_dim)
        self.decoder = _mlp(latent_dim + extra, hidden, hidden_layers)
        self.fc_out_mean = nn.Linear(hidden, data_dim)
        self.fc_out_scale = nn.Linear(hidden, data_dim)

    @property
    def noise_shape(self) -> tuple[int, ...]:
        """Shape of one record's training noise (``models.training.training_noise``):
        (L, latent_dim) for L = ``samples`` > 1 reconstruction samples, else (latent_dim,)."""
        if self.samples > 1:
            return (self.samples, self.latent_dim)
        return (self.latent_dim,)

    @property
    def record_shape(self) -> tuple[int]:
        """(data_dim,) of one record."""
        return (self.data_dim,)

    def _with_label(self, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if not self.conditional:
            return h
        one_hot = F.one_hot(y.long(), self.num_classes).to(h.dtype)
        if h.ndim == 3:
            one_hot = one_hot.unsqueeze(1).expand(-1, h.shape[1], -1)
        return torch.cat([h, one_hot], dim=-1)

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mu, logvar) of q(z | x) (of q(z | x, y) if conditional), each (B, latent_dim)."""
        h = self.encoder(self._with_label(x, y))
        return upcast(self.fc_mu(h)), upcast(self.fc_logvar(h))  # float32 under mixed precision

    def decode_distribution(
        self, z: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and standard deviation of p(x | z), each (B, data_dim) for z (B, latent_dim),
        or (B, L, data_dim) for z (B, L, latent_dim)."""
        h = self.decoder(self._with_label(z, y))  # the likelihood's parameters in float32:
        mean, scale = upcast(self.fc_out_mean(h)), upcast(self.fc_out_scale(h))
        return mean, F.softplus(scale) + MIN_DECODER_STD

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The likelihood's mean (B, data_dim): the reconstruction of a latent z (B, latent_dim)."""
        return self.decode_distribution(z, y)[0]

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One reparameterised pass; ``noise`` is standard normal (B, latent_dim) (or
        (B, L, latent_dim): the first sample is used).

        Returns (reconstruction, mu, logvar, z), as ``ConditionalConvVAE.forward``.
        """
        mu, logvar = self.encode(x, y)
        if noise.ndim == 3:
            noise = noise[:, 0]
        z = mu + torch.exp(0.5 * logvar) * noise
        return self.decode(z, y), mu, logvar, z

    def per_example_loss(
        self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor, *, beta: float
    ) -> torch.Tensor:
        """phi(x_i) = rec_i + beta * kld_i per example (B,) (PriVAE, Eq. 11-13).

        rec_i = -(1/L) sum_l log N(x_i; mean(z_il), diag std(z_il)^2), the Gaussian negative
        log-likelihood (nats) averaged over L reparameterised samples (Eq. 12); ``noise`` is
        (B, latent_dim) for L = 1 or (B, L, latent_dim) (PriVAE, Section 5.2: L = 20).
        kld_i is the closed-form KL to N(0, I) without a prior, else the Monte-Carlo estimate
        log q(z_il | x_i) - log p(z_il) at the same samples (:func:`models.priors.monte_carlo_kl`).
        PriVAE's clustering run with the batch-wise KL(p || q) uses beta = 0 (reconstruction
        only); its run without it beta = 1.
        """
        mu, logvar = self.encode(x, y)
        if noise.ndim == 3:
            z = mu.unsqueeze(1) + torch.exp(0.5 * logvar).unsqueeze(1) * noise
            target = x.unsqueeze(1)
        else:
            z, target = mu + torch.exp(0.5 * logvar) * noise, x
        mean, std = self.decode_distribution(z, y)
        log_lik = diagonal_gaussian_log_prob(target, mean, 2 * torch.log(std))
        rec = -(log_lik.mean(1) if log_lik.ndim == 2 else log_lik)
        if beta == 0:
            return rec
        if self.prior is None:
            kl = 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(1)
        else:
            kl = monte_carlo_kl(z, mu, logvar, self.prior)
        return rec + beta * kl
