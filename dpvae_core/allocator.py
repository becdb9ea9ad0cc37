"""Keep freed memory in the process, so that each training step does not fault its pages in again.

PyTorch's CPU tensors come from the C library's ``malloc``. glibc returns freed memory to the
kernel when the free space at the top of its heap passes a trim threshold, and serves large
blocks by ``mmap``, unmapped again on ``free``. Both thresholds adapt to the sizes seen (the mmap
threshold rises to the largest block freed, up to 32 MiB; the trim threshold follows at twice
it). A book-keeping DP-Adam step frees more scratch memory at its end than that, so the heap was
trimmed after every step and the next step faulted the same pages in again, zero-filled by the
kernel: on LFW20's quick shapes (batch 16, one thread) 3,600 to 7,700 page faults a step, 10 to
12 ms of system time in a step of 85 to 100 ms, which the non-private step did not pay
(``benchmarks/bench_allocator.py``).

:func:`keep_freed_memory` fixes both thresholds: blocks under 32 MiB (glibc's largest mmap
threshold) come from the heap, and up to 1 GiB of free space at its top is kept. The process's
peak memory is what it was (freed pages stay resident instead of being handed back and faulted
in again); larger blocks are still mapped and unmapped. Only glibc has ``mallopt``; elsewhere
(musl, macOS, Windows) nothing changes. ``DPVAE_MALLOC=default`` in the environment leaves
glibc's adaptive thresholds as they are (for measuring the difference).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

#: glibc's ``mallopt`` parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

#: Free space kept at the heap's top before it is returned to the kernel.
TRIM_BYTES = 1 << 30
#: Blocks from this size up are mapped on their own: glibc's largest allowed threshold on 64-bit
#: (half its heap size), which its adaptive rule would also stop at.
MMAP_BYTES = 32 << 20

_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Set glibc's trim and mmap thresholds once per process (see the module docstring); True
    where they are set (now or before), False where the C library is not glibc or
    ``DPVAE_MALLOC=default`` asks for its defaults."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if os.environ.get("DPVAE_MALLOC", "").strip().lower() == "default":
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    mallopt = getattr(ctypes.CDLL(name), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _applied = bool(mallopt(M_MMAP_THRESHOLD, MMAP_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_BYTES)
    )
    return _applied
