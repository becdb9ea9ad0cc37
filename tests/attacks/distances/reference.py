"""Obviously correct slow references (scikit-image's SSIM pair by pair, MSE in a loop) and the
image pairs the distance tests compare them on."""

from __future__ import annotations

import numpy as np
from skimage.metrics import structural_similarity


def reference_ssim(recon: np.ndarray, target: np.ndarray) -> np.ndarray:
    """scikit-image's SSIM, one pair at a time, in float64 (the obviously correct slow path)."""
    return np.array(
        [
            structural_similarity(
                a.astype(np.float64),
                b.astype(np.float64),
                win_size=7,
                data_range=1.0,
                channel_axis=0,
            )
            for a, b in zip(recon, target, strict=True)
        ]
    )


def reference_mse(recon: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Mean squared error, one pair at a time."""
    diffs = recon.astype(np.float64) - target.astype(np.float64)
    return np.array([np.mean(diff**2) for diff in diffs])


def random_pairs(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Uniform targets and reconstructions = targets + Gaussian noise, clipped to [0, 1]."""
    target = rng.random(shape)
    recon = np.clip(target + rng.normal(0.0, 0.2, size=shape), 0.0, 1.0)
    return recon.astype(np.float32), target.astype(np.float32)


def structured_pairs(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Smooth gradients, stripes and a step edge, reconstructed as a blurred, shifted copy."""
    _, channels, height, width = shape
    rows, cols = np.meshgrid(np.linspace(0, 1, height), np.linspace(0, 1, width), indexing="ij")
    base = np.stack(
        [
            rows,
            0.5 + 0.5 * np.sin(2 * np.pi * 3 * cols),
            (rows + cols > 1).astype(float),
        ]
    )
    target = np.broadcast_to(base[:channels], shape) * rng.uniform(0.5, 1.0, (shape[0], 1, 1, 1))
    recon = 0.5 * target + 0.5 * np.roll(target, 1, axis=-1) + 0.05
    return np.clip(recon, 0, 1).astype(np.float32), target.astype(np.float32)


def flat_pairs(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Near-constant bright images and flat halves: where var = E[x^2] - E[x]^2 cancels."""
    batch, channels, height, width = shape
    level = rng.uniform(0.6, 1.0, (batch, 1, 1, 1))
    target = level + rng.normal(0.0, 1e-4, shape)
    target[..., : width // 2] = 0.123456789  # an exactly flat half
    recon = target + rng.normal(0.0, 1e-4, shape)
    recon[-1] = 0.987654321  # a constant image
    return np.clip(recon, 0, 1).astype(np.float32), np.clip(target, 0, 1).astype(np.float32)


def reference_ssim_to_records(recon: np.ndarray, records: np.ndarray) -> np.ndarray:
    """(R, S) scikit-image SSIM of every sample recon[r, s] against records[r]."""
    flat_records = np.repeat(records, recon.shape[1], axis=0)
    flat = reference_ssim(recon.reshape(-1, *records.shape[1:]), flat_records)
    return flat.reshape(recon.shape[:2])


def blurred(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A VAE-like reconstruction: a 3x3 box blur of each image plus a little noise, in [0, 1]."""
    padded = np.pad(images, [(0, 0)] * (images.ndim - 2) + [(1, 1), (1, 1)], mode="edge")
    height, width = images.shape[-2:]
    blur = sum(padded[..., i : i + height, j : j + width] for i in range(3) for j in range(3)) / 9.0
    return np.clip(blur + rng.normal(0.0, 0.02, images.shape), 0.0, 1.0).astype(np.float32)
