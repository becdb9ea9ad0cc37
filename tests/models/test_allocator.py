"""dpvae_core.allocator: with freed memory kept, a step that allocates and frees more than glibc's
adaptive trim threshold stops faulting its pages in again; with glibc's defaults it does not.

Each setting runs in its own interpreter (the settings hold for a whole process). The workload
is a DP-Adam step's pattern in miniature: 96 blocks of 1 MiB (below the 32 MiB mmap threshold),
written, then all freed, three times; the second and third rounds' minor page faults are
counted against the pages written."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

PROGRAM = r"""
import json, resource, sys
import torch
from dpvae_core.allocator import keep_freed_memory

kept = keep_freed_memory()
faults = []
for _ in range(3):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [torch.ones(1 << 18) for _ in range(96)]  # 96 x 1 MiB, every page written
    del blocks
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"kept": kept, "faults": faults}))
"""

PAGES = 96 * (1 << 20) // os.sysconf("SC_PAGE_SIZE")


def _run(environment: dict[str, str]) -> dict:
    env = {**os.environ, **environment}
    env.pop("MALLOC_TRIM_THRESHOLD_", None)  # glibc's own tunables would blur the comparison
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="mallopt is glibc's; elsewhere keep_freed_memory changes nothing",
)


@glibc_only
def test_kept_memory_is_not_faulted_in_again():
    kept = _run({"DPVAE_MALLOC": ""})
    assert kept["kept"] is True
    # rounds 2 and 3 reuse the heap's pages (seen: 256 to 1,792 faults of 24,576 pages)
    assert sum(kept["faults"][1:]) < 0.15 * PAGES, kept


@glibc_only
def test_glibc_defaults_fault_the_same_pages_in_every_round():
    """The check above can fail: under glibc's adaptive thresholds (what the code had before)
    the 96 MiB freed at the heap's top pass its trim threshold, go back to the kernel and are
    faulted in again, zero-filled (seen: every page in round 2; round 3 sometimes adapts)."""
    default = _run({"DPVAE_MALLOC": "default"})
    assert default["kept"] is False
    assert default["faults"][1] > 0.9 * PAGES, default


def test_opt_out_changes_nothing(monkeypatch):
    """DPVAE_MALLOC=default returns before the C library is loaded, so mallopt is never called
    (monkeypatch puts the process's own ``_applied`` back afterwards)."""
    from dpvae_core import allocator

    def no_library(name):
        raise AssertionError(f"the C library was loaded ({name})")

    monkeypatch.setattr(allocator, "_applied", None)
    monkeypatch.setattr(allocator.ctypes, "CDLL", no_library)
    monkeypatch.setenv("DPVAE_MALLOC", "default")
    assert allocator.keep_freed_memory() is False
    assert allocator.keep_freed_memory() is False  # decided once per process
