"""The VAE-LDP perturbation model (Weggenmann et al., as used in the trade-off paper, Section 2.3).

A target architecture (:class:`~models.vae.ConditionalConvVAE` for images,
:class:`~models.lstm_vae.LstmVAE` for series) whose encoder mean is bounded to ``[-3, 3]^d`` by
``3 * tanh`` and whose encoder standard deviation is floored at the noise bound sigma
(``std = max(sigma, v)``); :class:`NoiseBound` adds that transform to either. Releasing
``z = mu + sigma * e`` (e ~ N(0, I)) is then a Gaussian mechanism with L2 sensitivity
``2 * 3 * sqrt(d)`` and noise std sigma; decoding z is post-processing.
See :mod:`audit.privacy.vae_ldp_accounting` for the epsilon.
"""

from __future__ import annotations

import math

import torch

from dpvae_core.precision import ieee_float32
from models.lstm_vae import LSTM_HIDDEN, LstmVAE
from models.vae import ConditionalConvVAE

#: Raw log-variances are clipped to this range before the floor, so that v stays finite
#: (v in [3e-7, 3.3e6]); the floor, not this clip, is what the privacy argument uses. The clip
#: passes gradients straight through (:func:`clip_passing_gradient`).
RAW_LOGVAR_RANGE = (-30.0, 30.0)


def clip_passing_gradient(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """``x.clamp(low, high)`` in value (bit for bit), with the identity's gradient everywhere.

    A plain clamp has zero gradient outside the range, which traps a log-variance that overshot
    it. Measured on LFW20 (standard profile, sigma = 10): below the floor a raw log-variance gets
    no gradient at all, so nothing held it; the perturbation VAE ended its 300 epochs with a
    loss of 5.3e12 (0.5 e^30: a latent dimension's v at the clip, 3.3e6), and every record it
    perturbed came out the same image (per-pixel std over records 0.001). With the gradient
    passed through, the KL term pulls such a variance back.
    """
    clipped = x.clamp(low, high)
    return clipped.detach() + (x - x.detach()) if x.requires_grad else clipped


def float_at_least(value: float, dtype: torch.dtype) -> torch.Tensor:
    """``value`` as a 0-d tensor of ``dtype``, rounded up (never below ``value``)."""
    t = torch.tensor(value, dtype=dtype)
    if float(t) < value:
        t = torch.nextafter(t, torch.tensor(math.inf, dtype=dtype))
    return t


def check_noise_bound(sigma: float, mean_bound: float) -> None:
    """Both must be finite numbers > 0; the ValueError quotes the bad value."""
    for name, value in (("sigma", sigma), ("mean_bound", mean_bound)):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not (math.isfinite(value) and value > 0)
        ):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


class NoiseBound:
    """VAE-LDP's encoder transform, mixed in before a VAE class (``class P(NoiseBound, VAE)``).

    The VAE's ``encode`` gives raw outputs; here ``mu = mean_bound * tanh(raw_mu)`` and
    ``std = max(sigma, exp(raw_logvar / 2))``. ``encode``, ``decode`` and ``forward`` keep their
    signatures, so :func:`models.training.train_vae` trains the model with its usual objective.
    The host class provides ``encode``, ``decode``, ``latent_dim`` and ``record_shape``; its
    ``__init__`` calls :meth:`_set_noise_bound` after ``nn.Module.__init__``.

    Notes:
        Non-finite raw outputs (e.g. from huge inputs) are mapped to finite numbers first
        (NaN -> 0, +-inf -> +-max), so the bound and the floor hold for every input.
    """

    sigma: float
    mean_bound: float

    def _set_noise_bound(self, sigma: float, mean_bound: float) -> None:
        self.sigma = float(sigma)
        self.mean_bound = float(mean_bound)

    def sigma_floor(self, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """sigma as a tensor of ``dtype`` on ``device``, rounded up so it is never below sigma."""
        return float_at_least(self.sigma, dtype).to(device)

    def encode_std(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mu, std) of q(z | x, y), each (B, latent_dim): |mu| <= mean_bound, std >= sigma."""
        raw_mu, raw_logvar = super().encode(x, y)  # type: ignore[misc]
        mu = self.mean_bound * torch.tanh(torch.nan_to_num(raw_mu, nan=0.0))
        raw_logvar = clip_passing_gradient(torch.nan_to_num(raw_logvar, nan=0.0), *RAW_LOGVAR_RANGE)
        v = torch.exp(0.5 * raw_logvar)
        std = torch.maximum(v, self.sigma_floor(v.dtype, v.device))
        return mu, std

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mu, logvar) with the bounded mean and the floored std (logvar = 2 log std)."""
        mu, std = self.encode_std(x, y)
        return mu, 2.0 * torch.log(std)

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One reparameterised pass with ``z = mu + std * noise``; as the host's forward."""
        mu, std = self.encode_std(x, y)
        z = mu + std * noise
        return self.decode(z, y), mu, 2.0 * torch.log(std), z  # type: ignore[attr-defined]

    def perturb(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        *,
        generator: torch.Generator,
        batch_size: int = 512,
    ) -> torch.Tensor:
        """One stochastic reconstruction per record: perturbed records (B, *record_shape) in the
        decoder's range ([0, 1] for images, (-1, 1) for series).

        ``z = mu(x, y) + sigma * e`` with e ~ N(0, I): the released noise std is exactly sigma
        for every record, a Gaussian mechanism with a data-independent std, so the epsilon of
        :func:`audit.privacy.vae_ldp_accounting.vae_ldp_claim` holds as computed (the floored
        encoder std
        ``max(sigma, v(x))`` of the trade-off paper's reconstruction depends on the record, which
        that bound does not cover). ``generator`` is the only source of randomness; all records'
        draws are made at once on its device, so the result depends neither on ``batch_size``
        nor, with a CPU generator, on the model's device. Returns a CPU tensor of x's dtype.

        Notes:
            Labels are used as given (they condition encoder and decoder) and are not perturbed.
        """
        expected = tuple(self.record_shape)  # type: ignore[attr-defined]
        if x.dim() != 1 + len(expected) or tuple(x.shape[1:]) != expected or y.shape != (len(x),):
            raise ValueError(
                f"perturb expects x of shape (B, {', '.join(map(str, expected))}) and y of shape "
                f"(B,), got x {tuple(x.shape)} and y {tuple(y.shape)}"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        if len(x) == 0:
            return torch.empty_like(x, device="cpu")
        device = next(self.parameters()).device  # type: ignore[attr-defined]
        latent_dim = self.latent_dim  # type: ignore[attr-defined]
        e_all = torch.randn(len(x), latent_dim, generator=generator, device=generator.device)
        was_training = self.training  # type: ignore[attr-defined]
        self.eval()  # type: ignore[attr-defined]
        out = []
        # float32 (autocast off, no TF32) whatever the caller's precision: the bound, the floor
        # and the noise the claim reads are float32 arithmetic
        with torch.inference_mode(), ieee_float32(device):
            for start in range(0, len(x), batch_size):
                sl = slice(start, start + batch_size)
                xb, yb = x[sl].to(device), y[sl].to(device)
                mu, _ = self.encode_std(xb, yb)
                e = e_all[sl].to(device=device, dtype=mu.dtype)
                z = mu + self.sigma_floor(mu.dtype, device) * e
                out.append(self.decode(z, yb).to("cpu", x.dtype))  # type: ignore[attr-defined]
        self.train(was_training)  # type: ignore[attr-defined]
        return torch.cat(out)


class PerturbationVAE(NoiseBound, ConditionalConvVAE):
    """The trade-off paper's image target architecture with a bounded mean and a floored std
    (VAE-LDP).

    Same layers and shapes as :class:`ConditionalConvVAE`; see :class:`NoiseBound`.
    """

    def __init__(
        self,
        *,
        channels: int,
        height: int,
        width: int,
        num_classes: int,
        sigma: float,
        latent_dim: int = 100,
        mean_bound: float,
    ) -> None:
        check_noise_bound(sigma, mean_bound)
        super().__init__(
            channels=channels,
            height=height,
            width=width,
            num_classes=num_classes,
            latent_dim=latent_dim,
        )
        self._set_noise_bound(sigma, mean_bound)

    @property
    def record_shape(self) -> tuple[int, int, int]:
        """(C, H, W) of one record."""
        return self.channels, self.height, self.width


class PerturbationLstmVAE(NoiseBound, LstmVAE):
    """The trade-off paper's series target architecture (multitask LSTM VAE) with a bounded mean and
    a floored std (VAE-LDP); trained with the LSTM VAE's own multitask loss. See
    :class:`NoiseBound`.
    """

    def __init__(
        self,
        *,
        length: int,
        features: int,
        num_classes: int,
        sigma: float,
        latent_dim: int = 100,
        hidden: int = LSTM_HIDDEN,
        mean_bound: float,
        per_example_gradients: bool = True,
    ) -> None:
        check_noise_bound(sigma, mean_bound)
        super().__init__(
            length=length,
            features=features,
            num_classes=num_classes,
            latent_dim=latent_dim,
            hidden=hidden,
            per_example_gradients=per_example_gradients,
        )
        self._set_noise_bound(sigma, mean_bound)
