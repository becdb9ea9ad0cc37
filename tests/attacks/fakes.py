"""Small fake models with known behaviour for the attack tests (no training, fixed seeds)."""

from __future__ import annotations

import torch
from torch import nn

MEMBER_LOGVAR = -30.0
"""log-variance the memorising encoder reports: std ~ 3e-7, so every sample decodes the member."""


class MemorisingModel(nn.Module):
    """An oracle that memorised its members.

    encode: mu = [index of x among the members] (or -1 for any other record), tiny variance.
    decode: the member itself when z rounds to its index, uniform noise in [0, 1] otherwise.
    """

    def __init__(self, members: torch.Tensor, *, seed: int) -> None:
        super().__init__()
        self.register_buffer("members", members.clone())
        self.noise = torch.Generator().manual_seed(seed)

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat, known = x.flatten(1), self.members.flatten(1)
        matches = (flat[:, None, :] == known[None, :, :]).all(dim=2)
        index = torch.where(matches.any(dim=1), matches.float().argmax(dim=1), -1)
        mu = index.to(x.dtype)[:, None]
        return mu, torch.full_like(mu, MEMBER_LOGVAR)

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        index = torch.round(z[:, 0]).long()
        known = (index >= 0) & (index < self.members.shape[0])
        noise = torch.rand((z.shape[0], *self.members.shape[1:]), generator=self.noise)
        recalled = self.members[index.clamp(0, self.members.shape[0] - 1)]
        return torch.where(known.view(-1, *[1] * (recalled.dim() - 1)), recalled, noise)


class RandomLinearModel(nn.Module):
    """A model that never saw any data: random linear encoder, random linear decoder + sigmoid."""

    def __init__(self, *, record_shape: tuple[int, ...], latent_dim: int, seed: int) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        size = int(torch.Size(record_shape).numel())
        self.record_shape = record_shape
        self.latent_dim = latent_dim
        self.enc = nn.Parameter(torch.randn(size, 2 * latent_dim, generator=gen) / size**0.5)
        self.dec = nn.Parameter(torch.randn(latent_dim, size, generator=gen))

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mu, logvar = (x.flatten(1) @ self.enc).chunk(2, dim=1)
        return mu, logvar

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(z @ self.dec).view(-1, *self.record_shape)


class GaussianIdentityModel(nn.Module):
    """q(z | x) = N(x, std^2 I) and D(z) = z, so a sample's MSE is the mean of (std * eps)^2."""

    def __init__(self, *, std: float, record_shape: tuple[int, ...]) -> None:
        super().__init__()
        self.record_shape = record_shape
        self.logvar = 2.0 * torch.log(torch.tensor(std))

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mu = x.flatten(1)
        return mu, torch.full_like(mu, float(self.logvar))

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return z.view(-1, *self.record_shape)


def uniform_records(n: int, shape: tuple[int, ...], *, seed: int, n_classes: int = 1):
    """(x, y): n records uniform in [0, 1] of ``shape``, labels cycling over n_classes."""
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, *shape, generator=gen), torch.arange(n) % n_classes


def noisy_copies(members: torch.Tensor, *, copies: int, std: float, seed: int) -> torch.Tensor:
    """``copies`` copies of each member plus Gaussian noise of ``std``, member-major."""
    gen = torch.Generator().manual_seed(seed)
    repeated = members.repeat_interleave(copies, dim=0)
    return repeated + std * torch.randn(repeated.shape, generator=gen)


class MemberSpanDecoder(nn.Module):
    """D(z) = (z / sqrt(d)) @ M with the members as the rows of M: z = sqrt(d) e_j decodes member j
    exactly (and sits on the norm shell ||z||^2 = d), other records only up to their residual."""

    def __init__(self, members: torch.Tensor) -> None:
        super().__init__()
        self.record_shape = tuple(members.shape[1:])
        self.latent_dim = int(members.shape[0])
        self.register_buffer("rows", members.flatten(1).clone())

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (z @ self.rows / self.latent_dim**0.5).view(-1, *self.record_shape)


class ScaledMemorisingModel(MemorisingModel):
    """:class:`MemorisingModel` with latents shrunk to (index + 1) * step (0 for non-members), so
    that the prior p(z) barely differs between members and non-members (likelihood oracle)."""

    def __init__(self, members: torch.Tensor, *, seed: int, step: float = 1e-3) -> None:
        super().__init__(members, seed=seed)
        self.step = step
        self.latent_dim = 1

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mu, logvar = super().encode(x, y)
        return (mu + 1) * self.step, logvar

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return super().decode(z / self.step - 1, y)


class LinearGaussianModel(nn.Module):
    """p(z) = N(0, I_d), p(x | z) = N(W z, s^2 I_D) with W = c [I_d; 0], and the exact posterior as
    encoder (diagonal because W's columns are orthogonal), so log p(x) is known in closed form:
    x ~ N(0, W W^T + s^2 I), variance c^2 + s^2 on the first d coordinates and s^2 on the rest."""

    def __init__(self, *, dim: int, latent_dim: int, scale: float, noise_std: float) -> None:
        super().__init__()
        self.dim, self.latent_dim, self.scale, self.noise_std = dim, latent_dim, scale, noise_std
        self.post_var = 1.0 / (1.0 + scale**2 / noise_std**2)

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        head = x[:, : self.latent_dim]
        mu = self.post_var * self.scale / self.noise_std**2 * head
        return mu, torch.full_like(mu, float(torch.log(torch.tensor(self.post_var))))

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        tail = torch.zeros(z.shape[0], self.dim - self.latent_dim, dtype=z.dtype)
        return torch.cat([self.scale * z, tail], dim=1)

    def log_marginal(self, x: torch.Tensor) -> torch.Tensor:
        """(n,) exact log p(x)."""
        var = torch.full((self.dim,), self.noise_std**2, dtype=torch.float64)
        var[: self.latent_dim] += self.scale**2
        normal = torch.distributions.Normal(torch.zeros(self.dim, dtype=torch.float64), var.sqrt())
        return normal.log_prob(x.double()).sum(1)


class SubspaceGaussianModel(nn.Module):
    """p(z) = N(0, I_d), p(x | z) = N(c U z, s^2 I_D) with U (D, d) orthonormal columns, and the
    exact posterior as encoder: q(z | x) = N(v c / s^2 U^T x, v I) with v = 1 / (1 + c^2 / s^2).

    log p(x) = -|x|^2 / (2 s^2) + c^2 |U^T x|^2 / (2 s^2 (c^2 + s^2)) + const, and the best
    decoding of x is its projection c U z* = U U^T x: a record's score under such a model is its
    own size (its difficulty) plus how much of it the subspace holds (what the model learnt).
    """

    def __init__(self, basis: torch.Tensor, *, scale: float = 1.0, noise_std: float = 1.0) -> None:
        super().__init__()
        self.register_buffer("basis", basis.clone())
        self.latent_dim = int(basis.shape[1])
        self.scale, self.noise_std = scale, noise_std
        self.post_var = 1.0 / (1.0 + scale**2 / noise_std**2)

    def encode(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mu = self.post_var * self.scale / self.noise_std**2 * (x.flatten(1) @ self.basis)
        return mu, torch.full_like(mu, float(torch.log(torch.tensor(self.post_var))))

    def decode(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.scale * z.to(self.basis.dtype) @ self.basis.T


def orthonormal(directions: torch.Tensor) -> torch.Tensor:
    """(D, k) orthonormal basis of the span of ``directions`` (k, D), by QR."""
    q, _ = torch.linalg.qr(directions.T)
    return q


def difficulty_case(
    n_members: int, n_non_members: int, *, dim: int, n_references: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor, SubspaceGaussianModel, list[SubspaceGaussianModel]]:
    """Records of unequal intrinsic difficulty, a target that learnt its members a little, and
    reference models that learnt none of them.

    Records: x_i = s_i g_i / sqrt(dim), g_i standard normal, s_i log-uniform on [0.5, 2] (a
    16-fold spread of |x|^2, the difficulty). Target: the span of one direction per member,
    x_j / |x_j| + 1.5 h_j with h_j a random unit vector, which holds about 1 / (1 + 1.5^2) ~ 0.3
    of the member's energy. References: the same number of random directions each. Returns
    (x, is_member, target, references), members first.
    """
    gen = torch.Generator().manual_seed(seed)
    n = n_members + n_non_members
    size = 0.5 * 4.0 ** torch.rand(n, 1, generator=gen)
    x = size * torch.randn(n, dim, generator=gen) / dim**0.5

    def unit(v: torch.Tensor) -> torch.Tensor:
        return v / v.norm(dim=1, keepdim=True)

    members = x[:n_members]
    learnt = unit(members) + 1.5 * unit(torch.randn(n_members, dim, generator=gen))
    target = SubspaceGaussianModel(orthonormal(learnt))
    references = [
        SubspaceGaussianModel(orthonormal(torch.randn(n_members, dim, generator=gen)))
        for _ in range(n_references)
    ]
    is_member = torch.arange(n) < n_members
    return x, is_member, target, references
