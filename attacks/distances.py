"""Reconstruction distances (MSE, SSIM) for the reconstruction attack, behind one registry.

Two layouts share one implementation per distance:

* pairwise: reconstructions ``recon`` and targets ``target``, both (K, *shape) -> (K,);
* to records: S reconstructions of each of R records, ``recon`` (R, S, *shape) and the records
  (R, *shape) -> (R, S). The attack's layout: a record's statistics are computed once for its S
  samples instead of once per pair, and the records are never repeated in memory.

Values are float64 tensors on the inputs' device. A :class:`Distance` also knows its orientation:
:meth:`Distance.score` turns mean distances into membership scores where higher means "more likely
a member" (paper 003, Eq. 1: -mean MSE, or mean SSIM).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from enum import Enum

import numpy as np
import torch

from core.records import Modality

try:
    import numba
except ImportError:  # pragma: no cover - numba is a dependency; without it SSIM runs on torch
    numba = None

SSIM_WIN_SIZE = 7
"""Side of the uniform SSIM window (scikit-image's default when ``gaussian_weights=False``)."""
SSIM_K1 = 0.01
SSIM_K2 = 0.03
SSIM_DATA_RANGE = 1.0
"""Images are assumed to lie in [0, 1]."""
SSIM_BLOCK_ELEMENTS = 2**15
"""Reconstructed pixels (pairs x C x H x W) per block of the torch SSIM path on a CPU, which runs
when :data:`SSIM_NUMBA` is off (2 pairs of 64x64x3). Its float64 buffers (about 100 bytes per
pixel, 3 MB) stay near the core's L2 cache: on the 2-core benchmark machine blocks 8 and 32 times
larger ran 1.6 and 2.4 times slower, and half this size 10 % slower, from PyTorch's per-operation
overhead (benchmarks/bench_ssim.py)."""
SSIM_ACCELERATOR_BLOCK_ELEMENTS = 2**24
"""The same on an accelerator, where large blocks keep the device busy (about 1.7 GB)."""
DISTANCE_CPU_THREADS = 1
"""Intra-op threads of MSE and of the torch SSIM path on a CPU (torch's setting is restored
afterwards; the numba SSIM kernel runs on torch's thread count instead). Their operations are
short and memory-bound: on the shared 2-core benchmark machine a second thread made SSIM 2 to 10
times and MSE 5 times slower (threads waiting for each other at every operation while other
processes hold the cores), and never clearly faster."""
SSIM_NUMBA = numba is not None
"""Whether SSIM on CPU tensors runs the compiled numba kernel (:func:`_nb_ssim_pairs`, about
5 times faster than the torch path on one core); otherwise, and on accelerators, it runs in
float64 torch operations (:class:`_SsimKernel`). Both agree with scikit-image to about 1e-15."""
SSIM_RUNS_PER_THREAD = 2
"""Runs of pairs per thread of the numba SSIM kernel, handed out by a thread pool, so that a
thread whose core is taken by another process leaves its second run to the other threads. On
the 2-core benchmark machine (benchmarks/bench_ssim.py; 8 records x 32 samples and 1 x 150, as
the attack calls it) two runs per thread matched numba's OpenMP prange split when the machine
was idle (11-16 us a pair, 1.6-2x one thread) and stayed at one thread's speed (21-29 us) with
the other core busy, where the prange split fell to 28-213 us a pair."""
MSE_BLOCK_ELEMENTS = 2**16
"""Reconstructed values per MSE block: a float64 working set of 512 KB, which stays in cache."""

_WINDOW = SSIM_WIN_SIZE**2
"""n: pixels in a window. The offsets below are in units of window sums (:class:`_SsimKernel`)."""
_C1 = (SSIM_K1 * SSIM_DATA_RANGE) ** 2
_C2 = (SSIM_K2 * SSIM_DATA_RANGE) ** 2
_A1_OFFSET = _WINDOW**2 * _C1 / 2
_A2_OFFSET = _WINDOW * (_WINDOW - 1) * _C2 / 2
_B1_OFFSET = _WINDOW**2 * _C1
_B2_OFFSET = _WINDOW * (_WINDOW - 1) * _C2


def _check_pair(recon: torch.Tensor, target: torch.Tensor) -> None:
    if recon.shape != target.shape:
        raise ValueError(
            f"recon and target must have the same shape (K, *shape), got {tuple(recon.shape)} "
            f"and {tuple(target.shape)}"
        )
    if recon.dim() < 1:
        raise ValueError("recon and target need a leading batch dimension K, got 0-d tensors")


def _check_to_records(recon: torch.Tensor, records: torch.Tensor) -> None:
    if recon.dim() != records.dim() + 1 or recon.shape[:1] + recon.shape[2:] != records.shape:
        raise ValueError(
            "recon must be (R, S, *shape) for records (R, *shape), got recon "
            f"{tuple(recon.shape)} and records {tuple(records.shape)}"
        )


def _record_blocks(
    n_records: int, n_samples: int, pairs_per_block: int
) -> Iterator[tuple[slice, Iterator[slice]]]:
    """(records, sample blocks) covering R x S pairs, at most ``pairs_per_block`` pairs a block.

    Whole records when S fits in a block (several records a block), else one record at a time,
    its samples split into blocks.
    """
    samples_per_block = max(1, min(n_samples, pairs_per_block))
    records_per_block = max(1, pairs_per_block // max(1, n_samples))
    if samples_per_block < n_samples:
        records_per_block = 1
    for start in range(0, n_records, records_per_block):
        stop = min(start + records_per_block, n_records)
        samples = (
            slice(s, min(s + samples_per_block, n_samples))
            for s in range(0, n_samples, samples_per_block)
        )
        yield slice(start, stop), samples


@contextmanager
def _cpu_threads(device: torch.device, n_threads: int) -> Iterator[None]:
    """Run with at most ``n_threads`` intra-op threads on a CPU; torch's count is restored."""
    previous = torch.get_num_threads()
    if device.type != "cpu" or previous <= n_threads:
        yield
        return
    torch.set_num_threads(n_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def mse_to_records(recon: torch.Tensor, records: torch.Tensor) -> torch.Tensor:
    """Mean squared error of each reconstruction to its record, accumulated in float64.

    Args:
        recon: (R, S, *shape) reconstructions, S of each record; any trailing shape.
        records: (R, *shape).

    Returns:
        (R, S) float64 tensor, ``mean((recon[r, s] - records[r]) ** 2)``.
    """
    _check_to_records(recon, records)
    n_records, n_samples = recon.shape[:2]
    record_size = math.prod(records.shape[1:])
    flat_recon = recon.reshape(n_records, n_samples, record_size)
    flat_records = records.reshape(n_records, 1, record_size)
    out = torch.empty(n_records, n_samples, dtype=torch.float64, device=recon.device)
    blocks = _record_blocks(n_records, n_samples, MSE_BLOCK_ELEMENTS // max(1, record_size))
    with _cpu_threads(recon.device, DISTANCE_CPU_THREADS):
        for rows, sample_blocks in blocks:
            target = flat_records[rows].to(torch.float64)
            for cols in sample_blocks:
                diff = flat_recon[rows, cols].to(torch.float64, copy=True).sub_(target)
                torch.linalg.vecdot(diff, diff, out=out[rows, cols])
    return out.div_(record_size)


def mse(recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error per pair, accumulated in float64.

    Args:
        recon: (K, *shape) reconstructions; any trailing shape (images, sensor series).
        target: (K, *shape) records, same shape as ``recon``.

    Returns:
        (K,) float64 tensor, ``mean((recon[k] - target[k]) ** 2)``; empty for K = 0.
    """
    _check_pair(recon, target)
    return mse_to_records(recon.unsqueeze(1), target)[:, 0]


def _check_images(recon: torch.Tensor) -> None:
    if recon.dim() != 4:
        raise ValueError(
            f"SSIM applies to images only: expected (K, C, H, W), got shape {tuple(recon.shape)}; "
            "use the 'mse' distance for sensor series and other non-image records"
        )
    height, width = recon.shape[-2:]
    if min(height, width) < SSIM_WIN_SIZE:
        raise ValueError(
            f"SSIM needs images of at least {SSIM_WIN_SIZE}x{SSIM_WIN_SIZE} (its window), got "
            f"{height}x{width}; use the 'mse' distance for smaller images"
        )


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
        self._a1_offset = torch.tensor(_A1_OFFSET, dtype=torch.float64, device=device)
        self._xy_offset = torch.tensor(
            (_A2_OFFSET + _A1_OFFSET) / _WINDOW, dtype=torch.float64, device=device
        )

    def load_records(self, records: torch.Tensor, rows: slice) -> None:
        """Window sums and SSIM terms of records (r, C, H, W), once for all of their samples."""
        y = self._record_maps[0].copy_(records)
        torch.mul(y, y, out=self._record_maps[1])
        self._record_window_sums()
        torch.mul(self._sum_y, self._sum_y, out=self._b1_offset).add_(_B1_OFFSET)
        self._b_total.mul_(_WINDOW).add_(_B2_OFFSET + _B1_OFFSET)  # Syy -> B2 + B1 - n Sxx
        self.loaded = rows

    def sum_maps(self, recon: torch.Tensor, out: torch.Tensor) -> None:
        """out (r, s) <- the sum of each SSIM map of recon (r, s, C, H, W) over C x H-6 x W-6."""
        x, xx, xy = self._maps
        x.copy_(recon)
        torch.mul(x, x, out=xx)
        torch.addcmul(self._xy_offset, x, self._record_maps[0].unsqueeze(1), value=_WINDOW, out=xy)
        self._window_sums()
        sum_x = self._sum_x
        a1 = torch.addcmul(self._a1_offset, sum_x, self._sum_y, out=self._a1)
        a2 = self._sum_xy.sub_(a1)
        b1 = torch.addcmul(self._b1_offset, sum_x, sum_x, out=sum_x)
        b2 = torch.add(self._b_total, self._sum_xx, alpha=_WINDOW, out=self._sum_xx).sub_(b1)
        ssim_map = a1.mul_(a2).div_(b1.mul_(b2))
        torch.sum(ssim_map.flatten(2), dim=2, out=out)


def _njit(**options: object) -> Callable[[Callable], Callable]:
    """numba's ``njit`` with an on-disk cache and IEEE division, or nothing without numba.

    ``error_model="numpy"`` drops the ZeroDivisionError check that Python semantics put before
    every division: that branch keeps LLVM from vectorising the SSIM formula, and the
    denominators are positive anyway (they hold c1 and c2).
    """
    if numba is None:  # pragma: no cover
        return lambda function: function
    return numba.njit(cache=True, error_model="numpy", **options)


_EXACT = {"contract"}
"""Fast-math flags of the element-wise kernels: fused multiply-adds only, which round less."""
_LANES = 8
"""Rows of windows are padded to a multiple of 8 (the float64 lanes of AVX-512), so that a row of
58 windows runs as 8 vector steps without a scalar remainder, and each window's SSIM is added to
a per-column accumulator, summed once per pair instead of once per row: 10 % faster per pair."""


@_njit(fastmath={"reassoc", "nsz", "contract"})
def _nb_total(values: np.ndarray, n: int) -> float:
    """Sum of values[:n]; reassociation lets LLVM add in vector lanes."""
    total = 0.0
    for j in range(n):
        total += values[j]
    return total


@_njit(fastmath=_EXACT)
def _nb_record_columns(y: np.ndarray, v: np.ndarray, vv: np.ndarray) -> None:
    """v, vv <- sums of y and y^2 over rows 0-6 of the plane y (H, W), column by column."""
    for j in range(y.shape[1]):
        v[j] = 0.0
        vv[j] = 0.0
    for i in range(SSIM_WIN_SIZE):
        for j in range(y.shape[1]):
            b = np.float64(y[i, j])
            v[j] += b
            vv[j] += b * b


@_njit(fastmath=_EXACT)
def _nb_record_step(y: np.ndarray, i: int, v: np.ndarray, vv: np.ndarray) -> None:
    """Move the column sums v, vv from rows i-1..i+5 to rows i..i+6 (a running sum)."""
    for j in range(y.shape[1]):
        b_in = np.float64(y[i + 6, j])
        b_out = np.float64(y[i - 1, j])
        v[j] += b_in - b_out
        vv[j] += b_in * b_in - b_out * b_out


@_njit(fastmath=_EXACT)
def _nb_record_row(v: np.ndarray, vv: np.ndarray, sum_y: np.ndarray, b_total: np.ndarray) -> None:
    """A record's terms along one (padded) row of windows: Sy, and n Syy + B2 and B1 offsets."""
    for j in range(sum_y.shape[0]):
        sum_y[j] = v[j] + v[j + 1] + v[j + 2] + v[j + 3] + v[j + 4] + v[j + 5] + v[j + 6]
        sum_yy = vv[j] + vv[j + 1] + vv[j + 2] + vv[j + 3] + vv[j + 4] + vv[j + 5] + vv[j + 6]
        b_total[j] = _WINDOW * sum_yy + (_B2_OFFSET + _B1_OFFSET)


@_njit(fastmath=_EXACT)
def _nb_record_terms(
    y: np.ndarray, sum_y: np.ndarray, b_total: np.ndarray, v: np.ndarray, vv: np.ndarray
) -> None:
    """sum_y, b_total (C, H-6, padded W-6) of a record y (C, H, W); v, vv are scratch columns."""
    for c in range(y.shape[0]):
        _nb_record_columns(y[c], v, vv)
        for i in range(y.shape[1] - 6):
            if i > 0:
                _nb_record_step(y[c], i, v, vv)
            _nb_record_row(v, vv, sum_y[c, i], b_total[c, i])


@_njit(fastmath=_EXACT, inline="always")
def _nb_pair_columns(
    x: np.ndarray, y: np.ndarray, vx: np.ndarray, vxx: np.ndarray, vxy: np.ndarray
) -> None:
    """vx, vxx, vxy <- column sums of x, x^2 and x y over rows 0-6 of the planes x, y (H, W)."""
    for j in range(x.shape[1]):
        vx[j] = 0.0
        vxx[j] = 0.0
        vxy[j] = 0.0
    for i in range(SSIM_WIN_SIZE):
        for j in range(x.shape[1]):
            a = np.float64(x[i, j])
            b = np.float64(y[i, j])
            vx[j] += a
            vxx[j] += a * a
            vxy[j] += a * b


@_njit(fastmath=_EXACT, inline="always")
def _nb_pair_step(
    x: np.ndarray, y: np.ndarray, i: int, vx: np.ndarray, vxx: np.ndarray, vxy: np.ndarray
) -> None:
    """Move the column sums vx, vxx, vxy from rows i-1..i+5 to rows i..i+6 (running sums)."""
    for j in range(x.shape[1]):
        a_in = np.float64(x[i + 6, j])
        a_out = np.float64(x[i - 1, j])
        b_in = np.float64(y[i + 6, j])
        b_out = np.float64(y[i - 1, j])
        vx[j] += a_in - a_out
        vxx[j] += a_in * a_in - a_out * a_out
        vxy[j] += a_in * b_in - a_out * b_out


@_njit(fastmath=_EXACT, inline="always")
def _nb_pair_row(
    vx: np.ndarray,
    vxx: np.ndarray,
    vxy: np.ndarray,
    sum_y: np.ndarray,
    b_total: np.ndarray,
    acc: np.ndarray,
) -> None:
    """acc[j] += SSIM (without its factor 4) of the window at column j of one row of windows.

    7-column sums of the column sums, then Wang et al.'s formula in the window-sum form of
    :class:`_SsimKernel`: A1 A2 / (B1 B2). Runs over the padded row; the padding columns only
    ever reach the padding of ``acc``, which is never summed.
    """
    for j in range(acc.shape[0]):
        sx = vx[j] + vx[j + 1] + vx[j + 2] + vx[j + 3] + vx[j + 4] + vx[j + 5] + vx[j + 6]
        sxx = vxx[j] + vxx[j + 1] + vxx[j + 2] + vxx[j + 3] + vxx[j + 4] + vxx[j + 5] + vxx[j + 6]
        sxy = vxy[j] + vxy[j + 1] + vxy[j + 2] + vxy[j + 3] + vxy[j + 4] + vxy[j + 5] + vxy[j + 6]
        sy = sum_y[j]
        a1 = sx * sy + _A1_OFFSET
        a2 = (_WINDOW * sxy + (_A2_OFFSET + _A1_OFFSET)) - a1
        b1 = sx * sx + (sy * sy + _B1_OFFSET)
        b2 = (b_total[j] + _WINDOW * sxx) - b1
        acc[j] += (a1 * a2) / (b1 * b2)


@_njit(fastmath=_EXACT)
def _nb_pair_sum(
    x: np.ndarray,
    y: np.ndarray,
    sum_y: np.ndarray,
    b_total: np.ndarray,
    columns: np.ndarray,
    acc: np.ndarray,
) -> float:
    """Sum of the SSIM map (without its factor 4) of x against y, both (C, H, W), over every
    channel and interior window; columns (3, padded W-6 + 6) and acc (padded W-6) are scratch."""
    for j in range(acc.shape[0]):
        acc[j] = 0.0
    vx, vxx, vxy = columns[0], columns[1], columns[2]
    for c in range(x.shape[0]):
        _nb_pair_columns(x[c], y[c], vx, vxx, vxy)
        for i in range(x.shape[1] - 6):
            if i > 0:
                _nb_pair_step(x[c], y[c], i, vx, vxx, vxy)
            _nb_pair_row(vx, vxx, vxy, sum_y[c, i], b_total[c, i], acc)
    return _nb_total(acc, x.shape[2] - 6)


@_njit(fastmath=_EXACT)
def _nb_both_columns(x: np.ndarray, y: np.ndarray, columns: np.ndarray) -> None:
    """columns (4, >= W) <- column sums of x, y, x^2 + y^2 and x y over rows 0-6 of x, y (H, W)."""
    vx, vy, vq, vxy = columns[0], columns[1], columns[2], columns[3]
    for j in range(x.shape[1]):
        vx[j] = 0.0
        vy[j] = 0.0
        vq[j] = 0.0
        vxy[j] = 0.0
    for i in range(SSIM_WIN_SIZE):
        for j in range(x.shape[1]):
            a = np.float64(x[i, j])
            b = np.float64(y[i, j])
            vx[j] += a
            vy[j] += b
            vq[j] += a * a + b * b
            vxy[j] += a * b


@_njit(fastmath=_EXACT)
def _nb_both_step(x: np.ndarray, y: np.ndarray, i: int, columns: np.ndarray) -> None:
    """Move the column sums of :func:`_nb_both_columns` from rows i-1..i+5 to rows i..i+6."""
    vx, vy, vq, vxy = columns[0], columns[1], columns[2], columns[3]
    for j in range(x.shape[1]):
        a_in = np.float64(x[i + 6, j])
        a_out = np.float64(x[i - 1, j])
        b_in = np.float64(y[i + 6, j])
        b_out = np.float64(y[i - 1, j])
        vx[j] += a_in - a_out
        vy[j] += b_in - b_out
        vq[j] += (a_in * a_in + b_in * b_in) - (a_out * a_out + b_out * b_out)
        vxy[j] += a_in * b_in - a_out * b_out


@_njit(fastmath=_EXACT)
def _nb_both_row(columns: np.ndarray, acc: np.ndarray) -> None:
    """acc[j] += A1 A2 / (B1 B2) along one padded row of windows, as :func:`_nb_pair_row`, from
    the window sums of x, y, x^2 + y^2 (all that B2 needs) and x y of a single pair."""
    vx, vy, vq, vxy = columns[0], columns[1], columns[2], columns[3]
    for j in range(acc.shape[0]):
        sx = vx[j] + vx[j + 1] + vx[j + 2] + vx[j + 3] + vx[j + 4] + vx[j + 5] + vx[j + 6]
        sy = vy[j] + vy[j + 1] + vy[j + 2] + vy[j + 3] + vy[j + 4] + vy[j + 5] + vy[j + 6]
        sq = vq[j] + vq[j + 1] + vq[j + 2] + vq[j + 3] + vq[j + 4] + vq[j + 5] + vq[j + 6]
        sxy = vxy[j] + vxy[j + 1] + vxy[j + 2] + vxy[j + 3] + vxy[j + 4] + vxy[j + 5] + vxy[j + 6]
        a1 = sx * sy + _A1_OFFSET
        a2 = (_WINDOW * sxy + (_A2_OFFSET + _A1_OFFSET)) - a1
        b1 = sx * sx + (sy * sy + _B1_OFFSET)
        b2 = (_WINDOW * sq + (_B2_OFFSET + _B1_OFFSET)) - b1
        acc[j] += (a1 * a2) / (b1 * b2)


@_njit(fastmath=_EXACT)
def _nb_both_sum(x: np.ndarray, y: np.ndarray, columns: np.ndarray, acc: np.ndarray) -> float:
    """:func:`_nb_pair_sum` for a lone pair: no record terms to store and read back, and four
    running sums instead of the three of a sample plus the two of its record."""
    for j in range(acc.shape[0]):
        acc[j] = 0.0
    for c in range(x.shape[0]):
        _nb_both_columns(x[c], y[c], columns)
        for i in range(x.shape[1] - 6):
            if i > 0:
                _nb_both_step(x[c], y[c], i, columns)
            _nb_both_row(columns, acc)
    return _nb_total(acc, x.shape[2] - 6)


@_njit(nogil=True, fastmath=_EXACT)
def _nb_ssim_pairs(
    recon: np.ndarray,
    records: np.ndarray,
    first: int,
    last: int,
    terms: np.ndarray,
    columns: np.ndarray,
    acc: np.ndarray,
    out: np.ndarray,
) -> None:
    """out (R, S) <- SSIM of pairs ``first`` to ``last - 1`` (record-major) of recon
    (R, S, C, H, W) against records (R, C, H, W); runs without the GIL.

    A record's terms are computed when the run reaches it and kept in ``terms`` (2, C, H - 6,
    padded W - 6: about 180 kB for 64x64x3, in the core's L2 cache while the record's samples
    pass); ``columns`` (4, padded W - 6 + 6) and ``acc`` (padded W - 6) are scratch. With one
    sample a record (the pairwise :func:`ssim`) there is nothing to share, and
    :func:`_nb_both_sum` scores each pair alone.
    """
    n_samples, channels, height, width = recon.shape[1:]
    scale = 4.0 / (channels * (height - 6) * (width - 6))
    lone = n_samples == 1
    loaded = -1
    for pair in range(first, last):
        record = pair // n_samples
        if lone:
            out[record, 0] = _nb_both_sum(recon[record, 0], records[record], columns, acc) * scale
            continue
        if record != loaded:
            _nb_record_terms(records[record], terms[0], terms[1], columns[0], columns[1])
            loaded = record
        sample = pair - record * n_samples
        total = _nb_pair_sum(
            recon[record, sample], records[record], terms[0], terms[1], columns, acc
        )
        out[record, sample] = total * scale


def ssim_to_records(recon: torch.Tensor, records: torch.Tensor) -> torch.Tensor:
    """Mean structural similarity of each reconstruction to its record, equal to scikit-image.

    Computes ``skimage.metrics.structural_similarity(recon[r, s], records[r], win_size=7,
    data_range=1.0, channel_axis=0)`` for every pair: a 7x7 uniform window, K1 = 0.01,
    K2 = 0.03, sample covariances (normalised by n - 1 with n = 49), the SSIM map averaged over
    the interior (3 pixels cropped from each border) and then over channels. A record's window
    sums are computed once for all of its S samples.

    Args:
        recon: (R, S, C, H, W) reconstructions in [0, 1], H and W at least 7.
        records: (R, C, H, W) records in [0, 1].

    Returns:
        (R, S) float64 tensor of SSIM values in [-1, 1] (1 for identical images).

    Raises:
        ValueError: if the inputs are not images (use :func:`mse`) or smaller than 7x7.

    Notes:
        Wang et al. (2004), Eq. 13, with scikit-image's uniform-window variant. Computed in
        float64: with float32 window sums, var = E[x^2] - E[x]^2 cancels on flat regions of
        bright images and SSIM drifts by up to 4e-5 from scikit-image's (2e-5 with each image
        centred first), beyond the 1e-5 the tests allow. On a CPU a compiled numba kernel
        (:func:`_nb_ssim_pairs`: running window sums, fused with the formula) scores the
        pairs on as many threads as torch's intra-op count; on an accelerator, or with
        :data:`SSIM_NUMBA` off, float64 torch operations do, in blocks of
        :data:`SSIM_BLOCK_ELEMENTS` pixels (:data:`SSIM_ACCELERATOR_BLOCK_ELEMENTS`) with
        :data:`DISTANCE_CPU_THREADS` threads.
    """
    _check_to_records(recon, records)
    _check_images(records)
    if SSIM_NUMBA and recon.device.type == "cpu":
        return _ssim_to_records_numba(recon, records)
    return _ssim_to_records_torch(recon, records)


def _ssim_to_records_numba(recon: torch.Tensor, records: torch.Tensor) -> torch.Tensor:
    """:func:`ssim_to_records` on a CPU through the compiled kernel :func:`_nb_ssim_pairs`.

    float32 and float64 inputs go in as they are (a kernel is compiled for each, then cached on
    disk); anything else is converted to float64 first. The R x S pairs are cut into
    :data:`SSIM_RUNS_PER_THREAD` runs per thread of torch's intra-op count, scored on a pool of
    that many threads (the kernel releases the GIL); a record cut between two runs has its terms
    computed twice.
    """
    n_records, n_samples, channels, height, width = recon.shape
    out = np.empty((n_records, n_samples), dtype=np.float64)
    if out.size == 0:
        return torch.from_numpy(out)
    dtype = recon.dtype
    if dtype != records.dtype or dtype not in (torch.float32, torch.float64):
        dtype = torch.float64
    recon_np = recon.detach().to(dtype).contiguous().numpy()
    records_np = records.detach().to(dtype).contiguous().numpy()
    threads = max(1, min(torch.get_num_threads(), out.size))
    runs = 1 if threads == 1 else min(out.size, SSIM_RUNS_PER_THREAD * threads)
    padded = -(-(width - 6) // _LANES) * _LANES
    terms_shape = (2, channels, 0 if n_samples == 1 else height - 6, padded)

    def score(run: int) -> None:
        _nb_ssim_pairs(
            recon_np,
            records_np,
            run * out.size // runs,
            (run + 1) * out.size // runs,
            np.zeros(terms_shape),
            np.zeros((4, padded + 6)),
            np.zeros(padded),
            out,
        )

    if runs == 1:
        score(0)
    else:
        list(_ssim_pool(threads).map(score, range(runs)))
    return torch.from_numpy(out)


@functools.cache
def _ssim_pool(threads: int) -> ThreadPoolExecutor:
    """The SSIM kernel's worker threads, one pool per thread count, kept for the process."""
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"ssim{threads}")


def _ssim_to_records_torch(recon: torch.Tensor, records: torch.Tensor) -> torch.Tensor:
    """:func:`ssim_to_records` in float64 torch operations: accelerators, and the reference."""
    n_records, n_samples, channels, height, width = recon.shape
    out = torch.empty(n_records, n_samples, dtype=torch.float64, device=recon.device)
    on_cpu = recon.device.type == "cpu"
    block = SSIM_BLOCK_ELEMENTS if on_cpu else SSIM_ACCELERATOR_BLOCK_ELEMENTS
    kernels: dict[tuple[int, ...], _SsimKernel] = {}
    blocks = _record_blocks(n_records, n_samples, block // (channels * height * width))
    with _cpu_threads(recon.device, DISTANCE_CPU_THREADS):
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


def ssim(recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean structural similarity per pair, equal to scikit-image's defaults.

    Args:
        recon: (K, C, H, W) reconstructions in [0, 1], H and W at least 7.
        target: (K, C, H, W) records in [0, 1].

    Returns:
        (K,) float64 tensor of SSIM values in [-1, 1]; empty for K = 0. See
        :func:`ssim_to_records`, which this calls with one sample per record.

    Raises:
        ValueError: if the inputs are not 4-D images (use :func:`mse`) or smaller than 7x7.
    """
    _check_pair(recon, target)
    _check_images(recon)
    return ssim_to_records(recon.unsqueeze(1), target)[:, 0]


DistanceFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class Distance(Enum):
    """Reconstruction distances of the reconstruction attack (paper 003, Section 2.2)."""

    MSE = "mse"
    SSIM = "ssim"

    def pairwise(self, recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-pair values (K,) float64 for (K, *shape) inputs; see :func:`mse`, :func:`ssim`."""
        return _PAIRWISE[self](recon, target)

    def to_records(self, recon: torch.Tensor, records: torch.Tensor) -> torch.Tensor:
        """Values (R, S) float64 of S reconstructions (R, S, *shape) of each record (R, *shape).

        See :func:`mse_to_records`, :func:`ssim_to_records`.
        """
        return _TO_RECORDS[self](recon, records)

    def check_records(self, records: torch.Tensor) -> None:
        """Raise ValueError early if records (n, *shape) cannot be compared with this distance."""
        if self is Distance.SSIM:
            _check_images(records)

    @property
    def higher_is_closer(self) -> bool:
        """True for similarities (SSIM), False for distances (MSE)."""
        return self is Distance.SSIM

    def score(self, mean_values: np.ndarray) -> np.ndarray:
        """Membership scores from per-record mean values: higher = more likely a member.

        Paper 003, Eq. 1: score = -mean MSE, or mean SSIM.
        """
        values = np.asarray(mean_values, dtype=np.float64)
        return values if self.higher_is_closer else -values


_PAIRWISE: dict[Distance, DistanceFn] = {Distance.MSE: mse, Distance.SSIM: ssim}
_TO_RECORDS: dict[Distance, DistanceFn] = {
    Distance.MSE: mse_to_records,
    Distance.SSIM: ssim_to_records,
}


def available_distances() -> list[str]:
    """Names accepted by :func:`get_distance`."""
    return [distance.value for distance in Distance]


def get_distance(name: str | Distance) -> Distance:
    """Look up a distance by name (``"mse"``, ``"ssim"``); a :class:`Distance` passes through."""
    if isinstance(name, Distance):
        return name
    try:
        return Distance(name)
    except ValueError:
        raise ValueError(
            f"unknown distance {name!r}; valid distances: {', '.join(available_distances())}"
        ) from None


#: The distances the reconstruction attack uses per record modality: SSIM is an image measure
#: (paper 003 uses MSE and SSIM on images, MSE on sensor series).
MODALITY_DISTANCES: dict[Modality, tuple[Distance, ...]] = {
    Modality.IMAGE: (Distance.MSE, Distance.SSIM),
    Modality.SERIES: (Distance.MSE,),
}


def distances_for(
    modality: Modality, requested: Sequence[Distance | str] | None = None
) -> tuple[Distance, ...]:
    """The distances for records of ``modality``: ``requested`` (validated) or all that apply."""
    allowed = MODALITY_DISTANCES[Modality(modality)]
    if requested is None:
        return allowed
    chosen = tuple(get_distance(d) for d in requested)
    refused = [d.value for d in chosen if d not in allowed]
    if refused:
        raise ValueError(
            f"distance(s) {refused} do not apply to {Modality(modality).value} records; "
            f"choose from: {', '.join(d.value for d in allowed)}"
        )
    return chosen
