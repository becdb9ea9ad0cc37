"""Drawing D_gen from a trained target VAE: labels in given class shares (the sweep passes D_val's,
so no D_train record is read), then one decoded latent per label, from the prior or from the
class's training records (the trade-off paper, Section 4).

The sweep draws D_gen here for the utility classifier, the report its sample grids, and the attack
on a release made outside the suite the samples of a decoder released without any.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

import torch

from dpvae_core.seeding import Purpose, torch_generator
from models.training import Pair


class Generation(str, Enum):
    """How D_gen's latents are drawn for a label c.

    PRIOR: z ~ N(0, I), decoded with c (the conditional conv VAE; the trade-off paper, LFW).
    CLASS_LATENT: z ~ q(z | x_j) for a training record x_j of class c drawn uniformly (the trade-off
    paper, MotionSense: the multitask classifier clusters the latent space by class, so the prior
    mixes classes).
    """

    PRIOR = "prior"
    CLASS_LATENT = "class-latent"


def gen_labels(train_labels: torch.Tensor, n: int, *, seed: int) -> torch.Tensor:
    """``n`` labels of D_gen with ``train_labels``' class shares (largest remainders), in seeded
    order (the sweep passes D_val's labels: they read no D_train record).

    Every class of ``train_labels`` gets ``floor(n * share)`` labels plus one for the largest
    remainders, so the counts are exact and do not vary with the seed; only the order is shuffled.
    """
    classes, counts = torch.unique(train_labels.cpu(), return_counts=True)
    quota = counts.double() * n / counts.sum()
    take = quota.floor().long()
    for i in torch.argsort(-(quota - take))[: n - int(take.sum())]:
        take[i] += 1
    labels = torch.repeat_interleave(classes, take)
    order = torch.randperm(n, generator=torch_generator(seed, Purpose.GENERATE, "labels"))
    return labels[order]


def generate(
    model: torch.nn.Module,
    labels: torch.Tensor,
    *,
    seed: int,
    method: Generation = Generation.PRIOR,
    source: Pair | None = None,
    batch: int = 512,
    stream: str | None = None,
) -> Pair:
    """D_gen: one decoded latent per label (labels follow D_train's distribution).

    ``method``: PRIOR draws z ~ N(0, I); CLASS_LATENT draws z ~ q(z | x_j) for a record x_j of
    ``source`` (the target's training data) of the label's class, chosen uniformly. The draws
    come from ``seed``'s generation stream, or its sub-stream ``stream`` (the report's figures
    draw apart from D_gen). The one generation loop of the sweep, the report's sample grids and
    a release's samples drawn from its decoder.
    """
    device = next(iter(model.parameters()), torch.empty(0)).device
    gen = torch_generator(seed, Purpose.GENERATE, *(() if stream is None else (stream,)))
    if method is Generation.CLASS_LATENT:
        if source is None:
            raise ValueError("class-latent generation needs the target's training records")
        draw = _class_latent_sampler(model, source, gen, batch=batch)
    else:

        def draw(y: torch.Tensor) -> torch.Tensor:
            return torch.randn(len(y), model.latent_dim, generator=gen)

    out = []
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(labels), batch):
            y = labels[start : start + batch]
            out.append(model.decode(draw(y).to(device), y.to(device)).cpu())
    return torch.cat(out), labels.clone()


def finite_records(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(``x`` with every NaN or infinite value set to 0, how many records had one).

    A diverged model can decode NaN; publishing D_gen, its owner would not ship NaN, and 0 lies
    in every modality's range (images [0, 1], series [-1, 1]). Deterministic post-processing of
    the release, so no privacy claim changes.
    """
    bad = ~torch.isfinite(x).flatten(1).all(1)
    n_bad = int(bad.sum())
    if not n_bad:
        return x, 0
    return torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0), n_bad


def _class_latent_sampler(
    model: torch.nn.Module, source: Pair, gen: torch.Generator, *, batch: int
) -> Callable[[torch.Tensor], torch.Tensor]:
    """A function of labels (B,) returning z (B, d): mu + std * e of a uniformly drawn
    ``source`` record of each label's class (the trade-off paper's class-specific latent
    sampling)."""
    device = next(model.parameters()).device
    x_src, y_src = source
    model.eval()
    with torch.inference_mode():
        stats = [
            model.encode(x_src[s : s + batch].to(device), y_src[s : s + batch].to(device))
            for s in range(0, len(x_src), batch)
        ]
    mu = torch.cat([m for m, _ in stats]).cpu()
    std = torch.exp(0.5 * torch.cat([lv for _, lv in stats])).cpu()
    members = {int(c): torch.nonzero(y_src == c).flatten() for c in torch.unique(y_src)}

    def draw(y: torch.Tensor) -> torch.Tensor:
        missing = sorted({int(c) for c in y} - set(members))
        if missing:
            raise ValueError(f"class-latent generation: no training record of class(es) {missing}")
        pick = torch.empty(len(y), dtype=torch.long)
        for c, idx in members.items():
            where = torch.nonzero(y == c).flatten()
            pick[where] = idx[torch.randint(len(idx), (len(where),), generator=gen)]
        return mu[pick] + std[pick] * torch.randn(len(y), mu.shape[1], generator=gen)

    return draw
