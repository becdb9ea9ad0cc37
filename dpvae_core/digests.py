"""Keyed SHA-256 digests: short names for configurations and caches, a record's bucket, and the
full digests of stored files (what a run's manifest records of them).

A record's bucket (DP2-VAE's subset, term-wise DP-Adam's partition) is a function of the seed
and the record's index alone, so adding or removing a record moves no other record's bucket.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from dpvae_core.validation import check_positive_int


def short_digest(text: str) -> str:
    """The first 16 hex digits of SHA-256 of ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def json_digest(payload: Any) -> str:
    """:func:`short_digest` of ``payload`` as JSON with sorted keys (other values as ``str``)."""
    return short_digest(json.dumps(payload, sort_keys=True, default=str))


def bytes_sha256(data: bytes) -> str:
    """SHA-256 of ``data``, as 64 hex digits."""
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    """SHA-256 of the bytes of the file at ``path``, as 64 hex digits (read in 1 MiB chunks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def record_bucket(tag: str, index: int, buckets: int, *, seed: int) -> int:
    """The bucket of the record at ``index``: SHA-256 of (tag, seed, index), modulo ``buckets``.

    i.i.d. uniform over 0..buckets-1 across indices, up to the 2^-64-level bias of a 64-bit hash
    modulo ``buckets``."""
    digest = hashlib.sha256(f"{tag}|{seed}|{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % buckets


def bucket_assignment(tag: str, n: int, buckets: int, *, seed: int, what: str) -> torch.Tensor:
    """:func:`record_bucket` of each index 0..n-1, as an (n,) int64 tensor; ``what`` names
    ``buckets`` in the error a bad count raises. Sizes are not balanced; a bucket may be empty."""
    check_positive_int(what, buckets)
    return torch.tensor([record_bucket(tag, i, buckets, seed=seed) for i in range(n)]).long()
