"""SSIM in float64 torch operations: the path on accelerators, and the reference the compiled
CPU kernel (:mod:`attacks.distances.ssim_numba`) is tested against."""

from __future__ import annotations

import torch

from attacks.distances.batching import DISTANCE_CPU_THREADS, cpu_threads, record_blocks
from attacks.distances.ssim_window import (
    A1_OFFSET,
    A2_OFFSET,
    B1_OFFSET,
    B2_OFFSET,
    SSIM_WIN_SIZE,
    WINDOW_PIXELS,
)

SSIM_BLOCK_ELEMENTS = 2**15
"""Reconstructed pixels (pairs x C x H x W) per block of the torch SSIM path on a CPU, which runs
when :data:`structural_similarity.SSIM_NUMBA` is off (2 pairs of 64x64x3). Its float64 buffers
(about 100 bytes per pixel, 3 MB) stay near the core's L2 cache: on the 2-core benchmark machine
blocks 8 and 32 times larger ran 1.6 and 2.4 times slower, and half this size 10 % slower, from
PyTorch's per-operation overhead (benchmarks/bench_ssim.py)."""
SSIM_ACCELERATOR_BLOCK_ELEMENTS = 2**24
"""The same on an accelerator, where large blocks keep the device busy (about 1.7 GB)."""


class _WindowSums:
    """Sums over every fully interior 7x7 window of fixed (M, H, W) float64 planes.

    Writes ``out`` (M, H-6, W-6): 49 times scipy's ``uniform_filter(size=7)`` on the interior that
    scikit-image keeps after cropping 3 pixels from each border, so the filter's border mode never
    enters the result. Separable: 7-row sums in one strided reduction, then 7-column sums by
    doubling (x + x>>1, + x>>2, + x>>4: four additions). Buffers and views are built once, so a
    call is five operations.
    """

    def __init__(self, planes: torch.Tensor, out: torch.Tensor) -> None:
        n_planes, height, width = planes.shape
        self._row_windows = planes.unfold(1, SSIM_WIN_SIZE, 1)

        def buffer(columns: int) -> torch.Tensor:
            shape = (n_planes, height - 6, columns)
            return torch.empty(shape, dtype=torch.float64, device=out.device)

        rows, pairs, threes = buffer(width), buffer(width - 1), buffer(width - 2)
        fours = rows.view(-1)[: threes[..., 1:].numel()].view(-1, height - 6, width - 3)

        def shifted(t: torch.Tensor, by: int, length: int) -> torch.Tensor:
            return t.narrow(2, by, length)

        self._rows = rows
        self._steps = (
            (shifted(rows, 0, width - 1), shifted(rows, 1, width - 1), pairs),
            (shifted(pairs, 0, width - 2), shifted(rows, 2, width - 2), threes),
            (shifted(pairs, 0, width - 3), shifted(pairs, 2, width - 3), fours),  # rows is free
            (shifted(fours, 0, width - 6), shifted(threes, 4, width - 6), out),
        )

    def __call__(self) -> None:
        torch.sum(self._row_windows, dim=-1, out=self._rows)
        for left, right, out in self._steps:
            torch.add(left, right, out=out)


class _SsimKernel:
    """SSIM of blocks of r records x s samples of C x H x W images, summed over each SSIM map.

    With window sums Sx, Sy, Sxx, Syy, Sxy over n = 49 pixels, Wang et al.'s terms are
    2 mu_x mu_y + c1 = 2 A1 / n^2, mu_x^2 + mu_y^2 + c1 = B1 / n^2,
    2 cov + c2 = 2 A2 / (n (n-1)) and var_x + var_y + c2 = B2 / (n (n-1)) (sample covariances),
    so SSIM = 4 A1 A2 / (B1 B2) with
    A1 = Sx Sy + n^2 c1 / 2, A2 = n Sxy + n (n-1) c2 / 2 + n^2 c1 / 2 - A1,
    B1 = Sx^2 + Sy^2 + n^2 c1, B2 = n Sxx + n Syy + n (n-1) c2 + n^2 c1 - B1.
    The constants ride along in the summed maps and the records' terms, so that each term costs
    one operation per pair. All float64 buffers and views are built once per block shape (about
    100 bytes per reconstructed pixel) and reused: fresh buffers per block cost more in page
    faults than the arithmetic, and rebuilding views costs more than the small blocks' arithmetic.
    """

    def __init__(self, shape: tuple[int, ...], device: torch.device) -> None:
        n_records, n_samples, channels, height, width = shape
        window_shape = (channels, height - 6, width - 6)

        def buffer(*dims: int) -> torch.Tensor:
            return torch.empty(dims, dtype=torch.float64, device=device)

        self.loaded: slice | None = None
        """The records whose terms are loaded (see :meth:`load_records`)."""
        self._record_maps = buffer(2, n_records, channels, height, width)
        record_sums = buffer(2, n_records, 1, *window_shape)
        self._record_window_sums = _WindowSums(
            self._record_maps.view(-1, height, width), record_sums.view(-1, *window_shape[1:])
        )
        self._sum_y, self._b_total = record_sums
        self._b1_offset = buffer(n_records, 1, *window_shape)
        self._maps = buffer(3, n_records, n_samples, channels, height, width)
        sums = buffer(3, n_records, n_samples, *window_shape)
        self._window_sums = _WindowSums(
            self._maps.view(-1, height, width), sums.view(-1, *window_shape[1:])
        )
        self._sum_x, self._sum_xx, self._sum_xy = sums
        self._a1 = buffer(n_records, n_samples, *window_shape)
        self._a1_offset = torch.tensor(A1_OFFSET, dtype=torch.float64, device=device)
        self._xy_offset = torch.tensor(
            (A2_OFFSET + A1_OFFSET) / WINDOW_PIXELS, dtype=torch.float64, device=device
        )

    def load_records(self, records: torch.Tensor, rows: slice) -> None:
        """Window sums and SSIM terms of records (r, C, H, W), once for all of their samples."""
        y = self._record_maps[0].copy_(records)
        torch.mul(y, y, out=self._record_maps[1])
        self._record_window_sums()
        torch.mul(self._sum_y, self._sum_y, out=self._b1_offset).add_(B1_OFFSET)
        self._b_total.mul_(WINDOW_PIXELS).add_(B2_OFFSET + B1_OFFSET)  # Syy -> B2 + B1 - n Sxx
        self.loaded = rows

    def sum_maps(self, recon: torch.Tensor, out: torch.Tensor) -> None:
        """out (r, s) <- the sum of each SSIM map of recon (r, s, C, H, W) over C x H-6 x W-6."""
        x, xx, xy = self._maps
        x.copy_(recon)
        torch.mul(x, x, out=xx)
        torch.addcmul(
            self._xy_offset, x, self._record_maps[0].unsqueeze(1), value=WINDOW_PIXELS, out=xy
        )
        self._window_sums()
        sum_x = self._sum_x
        a1 = torch.addcmul(self._a1_offset, sum_x, self._sum_y, out=self._a1)
        a2 = self._sum_xy.sub_(a1)
        b1 = torch.addcmul(self._b1_offset, sum_x, sum_x, out=sum_x)
        b2 = torch.add(self._b_total, self._sum_xx, alpha=WINDOW_PIXELS, out=self._sum_xx).sub_(b1)
        ssim_map = a1.mul_(a2).div_(b1.mul_(b2))
        torch.sum(ssim_map.flatten(2), dim=2, out=out)


def ssim_to_records_torch(recon: torch.Tensor, records: torch.Tensor) -> torch.Tensor:
    """:func:`ssim_to_records` in float64 torch operations: accelerators, and the reference."""
    n_records, n_samples, channels, height, width = recon.shape
    out = torch.empty(n_records, n_samples, dtype=torch.float64, device=recon.device)
    on_cpu = recon.device.type == "cpu"
    block = SSIM_BLOCK_ELEMENTS if on_cpu else SSIM_ACCELERATOR_BLOCK_ELEMENTS
    kernels: dict[tuple[int, ...], _SsimKernel] = {}
    blocks = record_blocks(n_records, n_samples, block // (channels * height * width))
    with cpu_threads(recon.device, DISTANCE_CPU_THREADS):
        for rows, sample_blocks in blocks:
            for cols in sample_blocks:
                block_recon = recon[rows, cols]
                kernel = kernels.get(block_recon.shape)
                if kernel is None:
                    kernel = kernels[block_recon.shape] = _SsimKernel(
                        block_recon.shape, recon.device
                    )
                if kernel.loaded != rows:
                    kernel.load_records(records[rows], rows)
                kernel.sum_maps(block_recon, out[rows, cols])
    return out.mul_(4 / (channels * (height - 6) * (width - 6)))
