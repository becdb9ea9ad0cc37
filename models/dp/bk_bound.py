"""Certified clip factors for book-keeping clipping on low-precision per-example gradients
(:mod:`models.dp.book_keeping` with ``precision="bf16"``; the argument: docs/mechanisms.md,
"DP-Adam precision").

The forward and backward passes run in bf16; each layer's factors P (activations) and Q
(output gradients) are upcast to float32 once, and the clipped sum is computed from those
float32 tensors, in float32. This module bounds, for every record i and layer l, the norm of
what record i adds to that sum given its float32 clip factor c_i:

* a materialised layer adds c_i G_i, G_i the float32 tensor the contraction reads; the
  products c_i G_i may each be rounded once: ||.|| <= c_i (1 + u) ||G_i||, with ||G_i||^2 summed
  in float64 (float32 squares are exact there; the sum's relative error is at most
  gamma64(m) for m coordinates);
* a ghost layer adds fl(c_i Q_i)^T P_i, each product of the sum rounded once more:
  ||.|| <= c_i (||Q_i^T P_i|| + 3 u S_i) with S_i = sum_r ||q_r|| ||p_r||. ||Q_i^T P_i||^2 is the
  ghost norm, computed from float32 Gram matrices (float64 where gamma32 of the sizes would
  pass 1 %), whose error is at most gamma(X + Y + R^2 + 4) S_i^2 in any summation order and
  whatever the cancellation between positions (R positions, widths X and Y); the bound adds
  that error instead of trusting the difference. On the conv VAE's records the error terms
  raise the bound 0.05 % above the norm (median; 0.1 % at most, a batch of 16 at
  initialisation); a record built to cancel gets a bound as large as its cancellation needs.

With B_i^2 = sum_l B_il^2 over these per-layer bounds, c_i = min(1, C (1 - 4u) / (B_i + 1e-6))
rounded to float32 (relative error <= u) gives ||record i's addition|| <= c_i B_i < C: the
sensitivity bound holds by construction, not up to a tolerance. u = 2^-24 (float32),
gamma64(k) = k 2^-53 / (1 - k 2^-53); the float64 roundings of a fixed number of operations
(square roots, products, the sum over fewer than a million layers: relative < 1e-12) are
absorbed by the 3u that C (1 - 4u) leaves after c_i's rounding. The rounding of the sum over
records is the sum's own, as in every float32 DP-SGD implementation; it is no record's addition.
"""

from __future__ import annotations

import torch

#: Unit roundoff of float32 and float64 (round to nearest).
U32 = 2.0**-24
U64 = 2.0**-53


def gamma(k: int, u: float) -> float:
    """Higham's gamma_k = k u / (1 - k u): the relative error bound of a k-term sum or dot
    product in any order, with unit roundoff u."""
    return k * u / (1 - k * u)


def gamma64(k: int) -> float:
    """:func:`gamma` in float64."""
    return gamma(k, U64)


def _sum_sq(t: torch.Tensor) -> torch.Tensor:
    """Upper bound (float64, (n,)) on the squared norm of each row of ``t`` (n, ...)."""
    flat = t.reshape(t.shape[0], -1).double()
    return flat.pow(2).sum(1) / (1 - gamma64(flat.shape[1] + 1))


def materialised_bound_sq(weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """(n,) float64: B_il^2 of a layer whose per-unit gradients (n, ...) are held in memory."""
    sq = _sum_sq(weight) if bias is None else _sum_sq(weight) + _sum_sq(bias)
    return sq * (1 + U32) ** 2


def ghost_bound_sq(p: torch.Tensor, q: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """(n,) float64: B_il^2 of a ghost layer with factors P (n, R, X), Q (n, R, Y)."""
    r, x, y = p.shape[1], p.shape[2], q.shape[2]
    k = x + y + r * r + 4
    u = U32 if k * U32 < 0.01 else U64
    if u == U64:
        p, q = p.double(), q.double()
    if r == 1:
        ghost = p.pow(2).sum((1, 2)) * q.pow(2).sum((1, 2))
    else:
        ghost = ((p @ p.transpose(1, 2)) * (q @ q.transpose(1, 2))).sum((1, 2))
    s = (p.norm(dim=2) * q.norm(dim=2)).sum(1).double() * (1 + gamma(x + y + r + 4, u))
    error = 1.01 * gamma(k, u) * s**2  # 1.01: the second-order terms
    bound = (ghost.double().clamp(min=0) + error).sqrt() + 3 * U32 * s
    sq = bound.pow(2)
    return sq if bias is None else sq + _sum_sq(bias) * (1 + U32) ** 2


def certified_factors(
    bound_sq: torch.Tensor, clip_norm: float, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(float32 clip factors (n,), float32 norm bounds B_i (n,)) from sum_l B_il^2 (float64):
    c_i = min(1, C (1 - 4u) / (B_i + eps)), so that c_i B_i < C after c_i's rounding."""
    bound = bound_sq.sqrt()
    factor = (clip_norm * (1 - 4 * U32) / (bound + eps)).clamp(max=1.0)
    return factor.float(), bound.float()
