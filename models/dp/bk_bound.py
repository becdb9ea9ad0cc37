"""Certified clip factors for book-keeping clipping (:mod:`models.dp.book_keeping`, every
precision; the argument: docs/mechanisms.md, "DP-Adam precision").

The clipped sum is computed from float tensors P (activations) and Q (output gradients) in
their own IEEE arithmetic, unit roundoff u: float32 for a float32 model and for a bf16 one
(whose bf16 factors are upcast to float32 once), u = 2^-24; float64 for a float64 model,
u = 2^-53. This module bounds, for every record i and layer l, the norm of what record i adds to
that sum given its clip factor c_i, from exactly the tensors that are summed:

* a materialised layer adds c_i G_i, G_i the tensor the contraction reads; the products
  c_i G_i may each be rounded once: ||.|| <= c_i (1 + u) ||G_i||, with ||G_i||^2 summed in
  float64 (float32 squares are exact there, float64 squares rounded once: with the sum over m
  coordinates a relative error at most gamma64(m + 1));
* a ghost layer adds fl(c_i Q_i)^T P_i, each product of the sum rounded once more:
  ||.|| <= c_i (||Q_i^T P_i|| + 3 u S_i) with S_i = sum_r ||q_r|| ||p_r||. ||Q_i^T P_i||^2 is the
  ghost norm, computed from Gram matrices in the tensors' arithmetic (float64 for float32
  tensors where gamma32 of the sizes would pass 1 %), whose error is at most
  gamma(X + Y + R^2 + 4) S_i^2 in any summation order and whatever the cancellation between
  positions (R positions, widths X and Y); the bound adds that error instead of trusting the
  difference. On the conv VAE's records the error terms raise the bound 0.05 % above the norm
  (median; 0.1 % at most, a batch of 16 at initialisation); a record built to cancel gets a
  bound as large as its cancellation needs.

The bound's own float64 arithmetic (the terms above, at most 16 roundings per layer outside
the gamma and 1.01 terms, and L - 1 in the sum over L layers) leaves the computed sum of
squares at least (1 - gamma64(L + 15)) B_i^2; the square root is rounded once more, and
multiplying it by 1 + gamma64(L + 24) (rounded) gives a B_i at least the true bound. Then
c_i = min(1, C (1 - 4u) / (B_i + 1e-6)), computed in float64 and rounded to the sum's dtype
(u), is at most C (1 - 4u)(1 + u)^2 / ((1 - u) B_i) < C / B_i, so ||record i's addition|| < C:
the sensitivity bound holds by construction, not up to a tolerance. gamma(k, u) =
k u / (1 - k u). The rounding of the sum over records is the sum's own, as in every DP-SGD
implementation; it is no record's addition.
"""

from __future__ import annotations

import torch

#: Unit roundoff of float32 and float64 (round to nearest).
U32 = 2.0**-24
U64 = 2.0**-53
_UNIT_ROUNDOFF = {torch.float32: U32, torch.float64: U64}


def unit_roundoff(dtype: torch.dtype) -> float:
    """u of the IEEE arithmetic a clipped sum is computed in: float32 or float64 (the
    certified bounds assume no other)."""
    if dtype not in _UNIT_ROUNDOFF:
        raise ValueError(f"certified clipping sums float32 or float64 tensors, got {dtype}")
    return _UNIT_ROUNDOFF[dtype]


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


def _bias_sq(bias: torch.Tensor) -> torch.Tensor:
    """B^2 of per-unit bias gradients (n, p) summed as factor @ bias: each product rounded once."""
    return _sum_sq(bias) * (1 + unit_roundoff(bias.dtype)) ** 2


def materialised_bound_sq(weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """(n,) float64: B_il^2 of a layer whose per-unit gradients (n, ...) are held in memory."""
    sq = _sum_sq(weight) * (1 + unit_roundoff(weight.dtype)) ** 2
    return sq if bias is None else sq + _bias_sq(bias)


def ghost_bound_sq(p: torch.Tensor, q: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """(n,) float64: B_il^2 of a ghost layer with factors P (n, R, X), Q (n, R, Y)."""
    u = max(unit_roundoff(p.dtype), unit_roundoff(q.dtype))  # the sum (c Q)^T P's arithmetic
    r, x, y = p.shape[1], p.shape[2], q.shape[2]
    k = x + y + r * r + 4
    ug = u if k * u < 0.01 else U64  # the Gram matrices' arithmetic
    if k * ug >= 0.01:
        raise ValueError(f"a ghost layer of {r} positions is too large to bound in float64")
    if ug != u:
        p, q = p.double(), q.double()
    if r == 1:
        ghost = p.pow(2).sum((1, 2)) * q.pow(2).sum((1, 2))
    else:
        ghost = ((p @ p.transpose(1, 2)) * (q @ q.transpose(1, 2))).sum((1, 2))
    s = (p.norm(dim=2) * q.norm(dim=2)).sum(1).double() * (1 + gamma(x + y + r + 4, ug))
    error = 1.01 * gamma(k, ug) * s**2  # 1.01: the second-order terms
    bound = (ghost.double().clamp(min=0) + error).sqrt() + 3 * u * s
    sq = bound.pow(2)
    return sq if bias is None else sq + _bias_sq(bias)


def certified_factors(
    bound_sq: torch.Tensor, clip_norm: float, eps: float, *, dtype: torch.dtype, layers: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(clip factors (n,), norm bounds B_i (n,)), both in ``dtype``, the arithmetic of the sum
    they scale, from sum_l B_il^2 (float64) over ``layers`` layers:
    c_i = min(1, C (1 - 4u) / (B_i + eps)), so that c_i B_i < C after c_i's rounding."""
    u = unit_roundoff(dtype)
    bound = bound_sq.sqrt() * (1 + gamma64(layers + 24))  # the bound's own float64 roundings
    factor = (clip_norm * (1 - 4 * u) / (bound + eps)).clamp(max=1.0)
    return factor.to(dtype), bound.to(dtype)
