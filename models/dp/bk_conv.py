"""A layer's per-record weight gradient as a product of two factors, for book-keeping clipping
(:mod:`models.dp.book_keeping`): G_i = Q_i^T P_i with P_i (R, X) and Q_i (R, Y) over R
positions, so that the clipped sum is one product (c Q)^T P and the squared norm either the
ghost norm sum_{r, r'} (P_i P_i^T)_{rr'} (Q_i Q_i^T)_{rr'} or the sum of squares of the
materialised G_i. The (Y, X) sum is viewed as the layer's weight gradient by the ``to_weight``
each factoring returns. Inputs may come in any memory layout; channels-last (the layout the
training loops use on the CPU) costs no copies where one can be avoided.

* ``nn.Linear`` on (n, T, d): P = a (T, d), Q = g (T, p);
* ``nn.Conv2d``: P = im2col of a (T output positions, D = k_h k_w c in (k_h, k_w, c) order,
  gathered from a channels-last copy of the padded input), Q = g (T, p);
* ``nn.Conv2d`` of stride 1 whose input is a nearest 2x upsample of h (the conv VAE's decoder):
  P = h (T/4 positions of h, c), Q_i = g~ (T/4, k_h k_w p), where g~[y, x, (i, j), p] sums g
  over the 2x2 block of output positions whose tap (i, j) reads h[y, x]. G_i[(i, j), p, c] is
  sum_{y, x} g~[y, x, (i, j), p] h[c, y, x]: a quarter of the multiply-adds of the product over
  the upsampled positions, and R = T/4 makes ghost norms 16 times cheaper.

:func:`per_record_loop` materialises a conv's G_i by one weight-gradient convolution per record
instead (large inputs on the CPU, where im2col would copy much and oneDNN's kernel for one
record runs near the speed of the batched one).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

ToWeight = Callable[[torch.Tensor], torch.Tensor]


def rows(t: torch.Tensor) -> torch.Tensor:
    """(n, C, H, W) -> (n, H W, C): a view where ``t`` is channels-last, else a copy."""
    return t.permute(0, 2, 3, 1).reshape(t.shape[0], -1, t.shape[1])


def unfolded(m: nn.Conv2d, a: torch.Tensor) -> torch.Tensor:
    """im2col of ``a`` for ``m``: (n, T, k_h k_w c), each row one output position's receptive
    field in (k_h, k_w, c) order (zero padding)."""
    n, c, h, w = a.shape
    (kh, kw), (sh, sw), (dh, dw) = m.kernel_size, m.stride, m.dilation
    ph, pw = m.padding
    padded = a.new_zeros(n, h + 2 * ph, w + 2 * pw, c)
    padded[:, ph : ph + h, pw : pw + w] = a.permute(0, 2, 3, 1)
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    s_n, s_h, s_w, s_c = padded.stride()
    windows = padded.as_strided(
        (n, ho, wo, kh, kw, c), (s_n, sh * s_h, sw * s_w, dh * s_h, dw * s_w, s_c)
    )
    return windows.reshape(n, ho * wo, kh * kw * c)


def upsampled_fits(m: nn.Conv2d) -> bool:
    """Whether :func:`upsampled_factors` serves ``m`` (stride 1, no dilation)."""
    return tuple(m.stride) == (1, 1) and tuple(m.dilation) == (1, 1)


def upsampled_factors(
    m: nn.Conv2d, h: torch.Tensor, g: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, ToWeight]:
    """(P, Q, to_weight) for ``m`` applied to a = nearest-2x-upsample(h), from h (n, c, H, W).

    Tap (i, j) reads a_pad[y + i, x + j] = h[(y + i - P) // 2, (x + j - P) // 2] (zero outside),
    so output rows 2r - i + P and 2r - i + P + 1 read row r of h. With g padded by k_h rows
    (k_w columns) of zeros and summed over 2x2 blocks, that block starts at row
    2r + (k_h - 1 - i) + P + 1: a positive stride in r and in the reversed tap k_h - 1 - i, so
    Q is one strided view of the block sums (taps reversed, undone on the (X, Y) sum)."""
    n, c, hh, hw = h.shape
    p, kh, kw = g.shape[1], *m.kernel_size
    ph, pw = m.padding
    gh, gw = g.shape[2:]
    pad = g.new_zeros(n, gh + 2 * kh, gw + 2 * kw, p)
    pad[:, kh : kh + gh, kw : kw + gw] = g.permute(0, 2, 3, 1)
    blocks = pad[:, :-1] + pad[:, 1:]
    blocks = blocks[:, :, :-1] + blocks[:, :, 1:]  # [y, x]: g summed over rows y, y+1, cols x, x+1
    s_n, s_y, s_x, s_p = blocks.stride()
    start = (ph + 1) * s_y + (pw + 1) * s_x  # reversed tap 0 (i = k_h - 1) at r = 0
    taps = blocks.as_strided(
        (n, hh, hw, kh, kw, p),
        (s_n, 2 * s_y, 2 * s_x, s_y, s_x, s_p),
        blocks.storage_offset() + start,
    )
    q = taps.reshape(n, hh * hw, kh * kw * p)

    def to_weight(flat: torch.Tensor) -> torch.Tensor:  # (reversed taps, p) x c
        return flat.view(kh, kw, p, c).flip(0, 1).permute(2, 3, 0, 1)

    return rows(h), q, to_weight


def per_record_loop(m: nn.Conv2d, a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """(n, p, D), D in (k_h, k_w, c) order (:func:`unfolded`'s): one weight-gradient
    convolution (``aten.convolution_backward``) per record."""
    n, p = g.shape[:2]
    kh, kw = m.kernel_size
    out = g.new_empty(n, p, kh, kw, a.shape[1])
    weight = m.weight.detach().to(a.dtype)
    for i in range(n):
        grad = torch.ops.aten.convolution_backward(
            g[i : i + 1],
            a[i : i + 1],
            weight,
            None,
            list(m.stride),
            list(m.padding),
            list(m.dilation),
            False,
            [0, 0],
            1,
            [False, True, False],
        )[1]
        out[i] = grad.permute(0, 2, 3, 1)
    return out.view(n, p, -1)
