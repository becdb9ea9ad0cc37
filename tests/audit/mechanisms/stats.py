"""Distribution-derived checks shared by the statistical tests of the Laplace mechanisms."""

from __future__ import annotations

import math

import torch

#: Two-sided z threshold: a correct sampler fails a fixed-seed check with probability ~6e-5.
Z_THRESHOLD = 4.0


def laplace_variance_z(noise: torch.Tensor, *, scale: float) -> float:
    """z-score of the empirical variance of zero-mean noise against Laplace(scale).

    The estimator mean(X^2) of Var X = 2 scale^2 has standard deviation sqrt((mu4 - sigma^4)/n)
    with mu4 = 24 scale^4 and sigma^4 = 4 scale^4, i.e. scale^2 sqrt(20 / n).
    """
    x = noise.double().flatten()
    n = x.numel()
    estimate = float((x * x).mean())
    return (estimate - 2 * scale**2) / (scale**2 * math.sqrt(20 / n))
