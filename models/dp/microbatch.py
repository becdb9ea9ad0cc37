"""Microbatches in standard DP-Adam: clipping per group of k records (the trade-off paper's
"microbatch 4", TensorFlow Privacy's ``num_microbatches``), made a bound for add/remove adjacency.

Adjacency is add/remove one record of D_train, records known by their D_train index (the
neighbour without record r leaves index r unused; N_train, like the Poisson rate q = B/N_train,
is a public parameter of the run). Record i's group is fixed before training and depends on
nothing but (seed, i, the number of groups G = ceil(N_train / k)): a keyed hash of (seed, i)
modulo G (:func:`dpvae_core.digests.bucket_assignment`, the draw DP2-VAE's subsets and term-wise
DP-Adam's partitions use). So adding or removing a record moves no other record's group; groups
formed by position inside each Poisson batch would reshuffle every later group instead. Group
sizes are not balanced (about Poisson(k) each).

Within a step a group's unit is the sum of its sampled members' gradients, clipped at
C_g = C / 2 (:func:`unit_clip_norm`). Removing a sampled record r changes only its group's
clipped unit: to pi(S) from pi(S + g_r), S the other sampled members' sum. Clipping is a
projection onto the C_g ball and non-expansive, but g_r is unbounded, so the change is bounded
only by the ball's diameter, 2 C_g = C (C_g when r was alone). Given every other record's coin,
the step is then the sampled Gaussian with rate q, sensitivity C and noise std z C: the same
release as per-record clipping at C, so the accountant (q, z, steps) is unchanged. Clipping at C
with the same accounting (TensorFlow Privacy's microbatches, the trade-off paper's runs) would
have sensitivity 2 C: its epsilon is the paper's number, not a bound for add/remove of one record.

k = 1 is per-record clipping at C, exactly the loop without microbatches.
"""

from __future__ import annotations

import math

import torch

from dpvae_core.digests import bucket_assignment
from dpvae_core.validation import check_positive_int

#: The key of a record's microbatch hash.
MICROBATCH_TAG = "dp-adam-microbatch"

#: C_g / C for k >= 2: a group's clipped unit moves by up to 2 C_g when one member leaves.
MICROBATCH_CLIP_FACTOR = 0.5


def microbatch_groups(n_train: int, microbatch: int, *, seed: int) -> torch.Tensor | None:
    """The group (n_train,) int64 of every D_train record for microbatches of ``microbatch``
    records (None for 1: every record its own unit): ceil(n_train / k) hash buckets of (seed,
    index), so a record's group depends on its own index alone."""
    check_positive_int("n_train", n_train)
    k = check_positive_int("microbatch", microbatch)
    if k == 1:
        return None
    groups = math.ceil(n_train / k)
    return bucket_assignment(MICROBATCH_TAG, n_train, groups, seed=seed, what="microbatch groups")


def unit_clip_norm(clip_norm: float, microbatch: int) -> float:
    """The clip norm of one unit: C for k = 1 (a record), C / 2 for k >= 2 (a group, whose
    clipped sum moves by up to twice its clip norm when one member is added or removed)."""
    k = check_positive_int("microbatch", microbatch)
    return clip_norm if k == 1 else clip_norm * MICROBATCH_CLIP_FACTOR


def batch_units(groups: torch.Tensor) -> tuple[torch.Tensor, int] | None:
    """(unit of each sampled record in 0..u-1, u) for the sampled records' ``groups``, or None
    when no two of them share a group (then per-record clipping at the unit clip norm computes
    the same sum). Numbering only the groups present keeps the engine's work at the batch's
    size; an absent group contributes nothing either way."""
    ids, inverse = torch.unique(groups, return_inverse=True)
    if len(ids) == len(groups):
        return None
    return inverse, len(ids)


#: What a microbatched row's notes say about its bound and the trade-off paper's own variant.
MICROBATCH_NOTE = (
    "each D_train record's group is fixed before training (a keyed hash of its index) and each "
    "group's sampled sum is clipped at C/2: adding or removing one record moves the released "
    "sum by at most C (2 * C/2), so the accounting (q, z, steps) is that of per-record clipping "
    "at C. The trade-off paper's variant (microbatches clipped at C, the same accounting, "
    "TensorFlow Privacy style) has sensitivity 2C: its epsilon is the paper's number, not a "
    "bound for add/remove of one record"
)


def microbatch_notes(clip_norm: float, microbatch: int) -> dict[str, float | str]:
    """A run's privacy notes for microbatches of k >= 2 (nothing for k = 1): k, the group clip
    norm C/2 and why the bound holds."""
    if check_positive_int("microbatch", microbatch) == 1:
        return {}
    return {
        "microbatch": microbatch,
        "microbatch_clip_norm": unit_clip_norm(clip_norm, microbatch),
        "microbatch_bound": MICROBATCH_NOTE,
    }
