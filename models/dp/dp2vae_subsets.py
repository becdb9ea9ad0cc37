"""DP2-VAE's subsets of D_train and its batches from them, both independent of the data.

A record's subset is a keyed hash of (seed, D_train index) alone (:func:`record_subset`), so
adding or removing a record moves no other record; a stage-2 batch is a Poisson sample of one
subset, truncated to B_max records (:func:`poisson_batch`). :mod:`models.dp.dp2vae_loop` draws
both.
"""

from __future__ import annotations

import torch

from dpvae_core.digests import bucket_assignment, record_bucket

#: The key of a record's subset hash (:func:`record_subset`).
SUBSET_TAG = "dp2vae-subset"


def record_subset(index: int, subsets: int, *, seed: int) -> int:
    """Subset of the D_train record at ``index``: SHA-256 of (seed, index) modulo K."""
    return record_bucket(SUBSET_TAG, index, subsets, seed=seed)


def subset_assignment(n_train: int, subsets: int, *, seed: int) -> torch.Tensor:
    """Subset (n_train,) int64 of every record: :func:`record_subset` of its index.

    Independent of the data and of every other record; sizes are not balanced and a subset may
    be empty (its steps then release pure noise).
    """
    return bucket_assignment(SUBSET_TAG, n_train, subsets, seed=seed, what="subsets")


def poisson_batch(
    members: torch.Tensor, *, rate: float, max_batch_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, bool]:
    """(indices, truncated): each of ``members`` kept with probability ``rate``; if more than
    ``max_batch_size`` are kept, a uniformly random ``max_batch_size`` of them."""
    keep = members[torch.rand(len(members), generator=generator) < rate]
    if len(keep) <= max_batch_size:
        return keep, False
    pick = torch.randperm(len(keep), generator=generator)[:max_batch_size]
    return keep[pick.sort().values], True
