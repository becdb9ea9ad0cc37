"""A layer's per-unit gradients for book-keeping clipping (:mod:`models.dp.book_keeping`), held
as factors or materialised: certified bounds on their squared norms (float64,
:mod:`models.dp.bk_bound`) and the re-weighted sum, in the arithmetic of the tensors held."""

from __future__ import annotations

import torch

from models.dp.bk_bound import ghost_bound_sq, materialised_bound_sq
from models.dp.bk_conv import ToWeight


class LayerGrad:
    """One layer's certified bounds on its per-unit squared norms (units,) (float64), and its
    re-weighted sum, on demand."""

    dtype: torch.dtype  # the arithmetic of the re-weighted sum (float32 or float64)

    def bound_sq(self) -> torch.Tensor:
        raise NotImplementedError

    def weighted(self, factor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(sum_u factor_u G_u for the weight, the same for the bias or None)."""
        raise NotImplementedError


class MaterialisedLayer(LayerGrad):
    """Per-unit gradients (units, Y, X), viewed as the weight's by ``to_weight``, and the
    bias's (units, p) or None, held in memory."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, to_weight: ToWeight):
        self.weight, self.bias, self.to_weight = weight, bias, to_weight
        self.dtype = weight.dtype

    def bound_sq(self):
        return materialised_bound_sq(self.weight, self.bias)

    def weighted(self, factor):
        factor = factor.to(self.dtype)  # exact: the factors are rounded to the coarsest dtype
        w = (factor @ self.weight.flatten(1)).view(self.weight.shape[1:])
        return self.to_weight(w), None if self.bias is None else factor @ self.bias


class GhostLayer(LayerGrad):
    """Ghost norms from the factors P (n, R, X) and Q (n, R, Y); the sum is (c Q)^T P."""

    def __init__(self, p: torch.Tensor, q: torch.Tensor, bias, to_weight: ToWeight):
        self.p, self.q, self.bias, self.to_weight = p, q, bias, to_weight
        self.dtype = torch.promote_types(p.dtype, q.dtype)

    def bound_sq(self):
        return ghost_bound_sq(self.p, self.q, self.bias)

    def weighted(self, factor):
        x, y = self.p.shape[2], self.q.shape[2]
        factor = factor.to(self.dtype)  # exact: the factors are rounded to the coarsest dtype
        q = self.q * factor[:, None, None]
        w = q.reshape(-1, y).T @ self.p.reshape(-1, x)
        return self.to_weight(w), None if self.bias is None else factor @ self.bias
