"""Keyed SHA-256 digests: short names for configurations and caches, and a record's bucket.

A record's bucket (DP2-VAE's subset, term-wise DP-Adam's partition) is a function of the seed
and the record's index alone, so adding or removing a record moves no other record's bucket.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import torch

from dpvae_core.validation import check_positive_int


def short_digest(text: str) -> str:
    """The first 16 hex digits of SHA-256 of ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def json_digest(payload: Any) -> str:
    """:func:`short_digest` of ``payload`` as JSON with sorted keys (other values as ``str``)."""
    return short_digest(json.dumps(payload, sort_keys=True, default=str))


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
