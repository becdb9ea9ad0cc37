"""Audit a VAE trained outside the suite: train a plain VAE on scikit-learn's digits with a dozen
lines of torch, save it and its samples, then audit the decoder and the samples alone.

    python examples/own_release.py OUT          # trains, saves OUT/*.npz and OUT/vae.pt
    PLAIN_VAE=OUT/vae.pt python benchmark.py attack --members OUT/members.npz \\
        --non-members OUT/non-members.npz --reference OUT/reference.npz \\
        --decoder examples/own_release.py:decoder --out OUT/audit-decoder
    python benchmark.py attack --members OUT/members.npz --non-members OUT/non-members.npz \\
        --reference OUT/reference.npz --samples OUT/samples.npz --out OUT/audit-samples

The functions :func:`decoder` and :func:`vae` are the entry points: they rebuild the model and
load the weights named by the ``PLAIN_VAE`` environment variable.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

LATENT = 8


class PlainVAE(nn.Module):  # the dozen lines of torch: nothing of the suite
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Sequential(
            nn.Flatten(), nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 2 * LATENT)
        )
        self.dec = nn.Sequential(
            nn.Linear(LATENT, 256), nn.ReLU(), nn.Linear(256, 64), nn.Sigmoid()
        )

    def encode(self, x):
        return self.enc(x).chunk(2, dim=1)

    def decode(self, z):
        return self.dec(z).view(-1, 1, 8, 8)

    def loss(self, x):
        mu, logvar = self.encode(x)
        recon = self.decode(mu + torch.randn_like(mu) * (0.5 * logvar).exp())
        bce = nn.functional.binary_cross_entropy(recon, x, reduction="sum")
        return (bce - 0.5 * (1 + logvar - mu**2 - logvar.exp()).sum()) / len(x)


def train(x: torch.Tensor, epochs: int = 300, seed: int = 0) -> PlainVAE:
    torch.manual_seed(seed)
    model = PlainVAE()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(epochs):
        for batch in torch.randperm(len(x)).split(32):
            opt.zero_grad()
            model.loss(x[batch]).backward()
            opt.step()
    return model.eval()


def _load() -> PlainVAE:
    model = PlainVAE()
    model.load_state_dict(torch.load(os.environ.get("PLAIN_VAE", "vae.pt"), weights_only=True))
    return model.eval()


def _external(whole: bool):  # noqa: ANN202
    from audit.release import ExternalModel

    model = _load()
    return ExternalModel(
        decode=model.decode, latent_dim=LATENT, encode=model.encode if whole else None
    )


def decoder():  # noqa: ANN201  the --decoder entry point
    return _external(whole=False)


def vae():  # noqa: ANN201  the --vae entry point
    return _external(whole=True)


def main(out: Path, *, n_members: int = 300, seed: int = 0) -> None:
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]  # (1797, 1, 8, 8) in [0, 1]
    order = np.random.default_rng(seed).permutation(len(x))
    parts = np.split(order, [n_members, 2 * n_members])  # members, non-members, reference
    out.mkdir(parents=True, exist_ok=True)
    for name, idx in zip(("members", "non-members", "reference"), parts, strict=True):
        np.savez(out / f"{name}.npz", X=x[idx])
    model = train(torch.from_numpy(x[parts[0]]), seed=seed)
    torch.save(model.state_dict(), out / "vae.pt")
    with torch.no_grad():
        samples = model.decode(
            torch.randn(n_members, LATENT, generator=torch.Generator().manual_seed(seed))
        )
    np.savez(out / "samples.npz", X=samples.numpy())


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "own-release-example"))
