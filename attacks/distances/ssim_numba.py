"""SSIM on a CPU through a compiled numba kernel: running window sums fused with the formula,
pairs split into runs scored on a thread pool without the GIL."""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from attacks.distances.ssim_window import (
    A1_OFFSET,
    A2_OFFSET,
    B1_OFFSET,
    B2_OFFSET,
    SSIM_WIN_SIZE,
    WINDOW_PIXELS,
)

try:
    import numba
except ImportError:  # pragma: no cover - numba is a dependency; without it SSIM runs on torch
    numba = None

SSIM_RUNS_PER_THREAD = 2
"""Runs of pairs per thread of the numba SSIM kernel, handed out by a thread pool, so that a
thread whose core is taken by another process leaves its second run to the other threads. On
the 2-core benchmark machine (benchmarks/bench_ssim.py; 8 records x 32 samples and 1 x 150, as
the attack calls it) two runs per thread matched numba's OpenMP prange split when the machine
was idle (11-16 us a pair, 1.6-2x one thread) and stayed at one thread's speed (21-29 us) with
the other core busy, where the prange split fell to 28-213 us a pair."""


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
        b_total[j] = WINDOW_PIXELS * sum_yy + (B2_OFFSET + B1_OFFSET)


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
    :class:`ssim_torch._SsimKernel`: A1 A2 / (B1 B2). Runs over the padded row; the padding
    columns only ever reach the padding of ``acc``, which is never summed.
    """
    for j in range(acc.shape[0]):
        sx = vx[j] + vx[j + 1] + vx[j + 2] + vx[j + 3] + vx[j + 4] + vx[j + 5] + vx[j + 6]
        sxx = vxx[j] + vxx[j + 1] + vxx[j + 2] + vxx[j + 3] + vxx[j + 4] + vxx[j + 5] + vxx[j + 6]
        sxy = vxy[j] + vxy[j + 1] + vxy[j + 2] + vxy[j + 3] + vxy[j + 4] + vxy[j + 5] + vxy[j + 6]
        sy = sum_y[j]
        a1 = sx * sy + A1_OFFSET
        a2 = (WINDOW_PIXELS * sxy + (A2_OFFSET + A1_OFFSET)) - a1
        b1 = sx * sx + (sy * sy + B1_OFFSET)
        b2 = (b_total[j] + WINDOW_PIXELS * sxx) - b1
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
        a1 = sx * sy + A1_OFFSET
        a2 = (WINDOW_PIXELS * sxy + (A2_OFFSET + A1_OFFSET)) - a1
        b1 = sx * sx + (sy * sy + B1_OFFSET)
        b2 = (WINDOW_PIXELS * sq + (B2_OFFSET + B1_OFFSET)) - b1
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


def ssim_to_records_numba(recon: torch.Tensor, records: torch.Tensor) -> torch.Tensor:
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
