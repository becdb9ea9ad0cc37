"""The one-run audit (Steinke, Nasr and Jagielski 2023) of a DP-SGD-trained cell: ``cdp``,
``cdp-termwise`` and ``dp2vae`` (every mechanism whose
:meth:`~audit.mechanisms.mechanism.Mechanism.canary_sample_rate` is not None).

m canaries, each included independently with probability 1/2 (seeded), go into ONE extra training
run of the cell's mechanism: its own ``prepare``, ``train`` and ``claim``, with the cell's settings
and fresh seeds (the cell with the seed ``derive_seed(seed, ONE_RUN_TAG)``), the canary hook handed
to the training loop through ``Context.audit_hook``. Scores rank the canaries; the guesses are fixed
before any score is seen (:mod:`audit.empirical.guesses`: by default the ``design`` rule, from m,
delta and the claim): the top ``k_plus`` scores are guessed "in", the bottom ``k_minus`` "out", the
rest abstain. Two estimators turn (m, r, v, delta) into bounds, both
compared with the claim of the run that happened: Steinke et al.'s
(:func:`audit.empirical.bounds.one_run_epsilon_bound`, ``one-run``: assumes only the canaries'
independent inclusion) and Mahloujifar et al.'s f-DP bound
(:func:`audit.empirical.estimators.one_run_fdp_epsilon`, ``one-run-fdp``: also assumes a
Gaussian-shaped trade-off curve).

Threat models: gradient canaries assume DP-SGD's (every noisy gradient released, the canary's
gradient chosen by the adversary: white box); input canaries assume the mechanism's release
(the final model: the whole VAE, or the decoder only for dp2vae: black box in the training).

Canary kinds:

- ``gradient`` (the white-box bound on the implementation): each canary is a record whose
  gradient is a fixed vector along its own coordinate of the privately trained parameters (all
  of them for cdp and cdp-termwise, the decoder's for dp2vae), of norm ``canary_norm`` * C
  before clipping; each step it is sampled with a real record's per-step probability
  (:meth:`~audit.mechanisms.mechanism.Mechanism.canary_sample_rate`: B / N for DP-Adam; for
  DP2-VAE the smallest (1/K) min(1, B / |D_k|) over its subsets) and its clipped gradient
  joins the clipped sum before the noise. Score: the sum over steps of the released noisy
  gradient on the canary's coordinate (DP-SGD's threat model releases every noisy gradient;
  cdp-termwise's released gradient includes its batch term, dp2vae's is the decoder's). The
  final parameters' move along the coordinate (``parameter_move_epsilon`` in ``extra``) is a
  valid score too (post-processing) but Adam's per-coordinate scaling distorts it; it is NOT
  combined with the main bound (the better of two would need a multiple-testing correction).
  A gradient canary touches the per-example term only: for cdp-termwise it does not exercise
  the batch term, and for dp2vae it exercises the decoder's step as the DP2-VAE paper models it, not
  the encoders that make the valid claim larger.
- ``input`` (the bound a user's adversary gets): canary records
  (:mod:`audit.empirical.input_canaries`: uniform-noise, blocks, patches, marked-mean or
  mean-blocks records with random labels) added to D_train, each included one inserted
  ``copies`` times; score: the strongest attack the mechanism's release allows
  (:data:`INPUT_CANARY_ATTACK`: the reconstruction attack's -MSE against the whole VAE, the
  latent search's -MSE against a released decoder). ``label-slot`` canaries carry their own
  label values outside the real classes (the audited model has a class slot per canary) and
  are scored from the decoder alone (:func:`label_slot_scores`; their slots' initial weights
  set by :class:`LabelSlots`). With ``copies`` k > 1 the datasets with and without a canary
  differ in k records, and the bound is compared with the group claim (:func:`group_claim`).

Test-only switches (:class:`Broken`) remove the noise (z = 0 in training while the claim keeps
the run's z) or the clipping; a correct mechanism's bound must stay below its claim and a
broken one's is expected to exceed it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from attacks import AttackData
from attacks.registry import build_attack
from attacks.threat import Release
from audit.attack_plan import attack_settings
from audit.cell.target import train_target
from audit.config import CellConfig
from audit.empirical.bounds import OneRunBound, one_run_epsilon_bound
from audit.empirical.canary_hooks import INPUT_CANARY_ATTACK, GradientCanaries, LabelSlots, Switches
from audit.empirical.estimators import one_run_fdp_epsilon
from audit.empirical.input_canaries import InputDesign, input_canaries, label_slot_classes
from audit.empirical.one_run_settings import (
    ONE_RUN_TAG,
    CanaryKind,
    OneRunAudit,
    OneRunSettings,
    count_correct,
)
from audit.mechanisms import CellData, Context, available_mechanisms, get_mechanism
from audit.privacy.claim import PrivacyClaim
from audit.privacy.group import group_rdp_epsilon
from dpvae_core.records import record_modality
from dpvae_core.seeding import Purpose, derive_seed, numpy_rng, torch_generator


def audit_cell_of(cell: CellConfig) -> CellConfig:
    """The extra run's cell: the cell with a seed derived from its own and :data:`ONE_RUN_TAG`, so
    its initialisation, batches and noise are fresh (the data split is the caller's)."""
    return replace(cell, seed=derive_seed(cell.seed, ONE_RUN_TAG) % 2**31)


@dataclass(frozen=True)
class ExtraRun:
    """The extra training run: the released model (inference form), its claim and seconds."""

    model: torch.nn.Module
    claim: PrivacyClaim
    seconds: float


def extra_run(cell: CellConfig, data: CellData, ctx: Context, hook: Switches) -> ExtraRun:
    """Train ``cell``'s target on ``data`` by the cells' own code path
    (:func:`audit.cell.target.train_target`), with ``hook`` in the training loop."""
    target = train_target(cell, data, replace(ctx, audit_hook=hook))
    return ExtraRun(model=target.model, claim=target.claim, seconds=target.seconds)


def one_run_mechanisms() -> tuple[str, ...]:
    """The mechanisms the one-run audit applies to, in registration order: those whose
    :attr:`~audit.mechanisms.mechanism.Mechanism.one_run_audit` holds (they override
    :meth:`~audit.mechanisms.mechanism.Mechanism.canary_sample_rate`: DP-SGD training loops)."""
    return tuple(m for m in available_mechanisms() if get_mechanism(m).one_run_audit)


def audit_one_run(
    cell: CellConfig, data: CellData, ctx: Context, settings: OneRunSettings
) -> OneRunAudit:
    """One extra training run of the cell's mechanism with canaries, and Steinke et al.'s bound
    against the claim of that run (its own N_train and delta: the cell's ``--delta``, else
    1/N_train of the run's D_train; input canaries add the included ones to D_train)."""
    if cell.mech not in one_run_mechanisms():
        raise ValueError(
            f"the one-run audit applies to {', '.join(one_run_mechanisms())} cells, got "
            f"{cell.mech!r}"
        )
    run = _audit_gradient if settings.kind is CanaryKind.GRADIENT else _audit_input
    return run(audit_cell_of(cell), data, ctx, settings)


def _included(settings: OneRunSettings) -> np.ndarray:
    return numpy_rng(settings.seed, ONE_RUN_TAG, "included").random(settings.canaries) < 0.5


@dataclass(frozen=True)
class Bounds:
    """Both one-run estimators over one score array, and the guesses they used."""

    steinke: OneRunBound
    fdp: float
    k_plus: int
    k_minus: int
    rule: str


def _bound(scores, included, settings: OneRunSettings, claim: PrivacyClaim) -> Bounds:
    k_plus, k_minus = settings.guesses(claim_epsilon=claim.epsilon, delta=claim.delta)
    r, v = count_correct(scores, included, k_plus=k_plus, k_minus=k_minus)
    m, conf = settings.canaries, settings.confidence
    rule = "explicit" if settings.explicit_guesses() else settings.guess_rule.value
    return Bounds(
        steinke=one_run_epsilon_bound(m=m, r=r, v=v, delta=claim.delta, confidence=conf),
        fdp=one_run_fdp_epsilon(m=m, r=r, v=v, delta=claim.delta, confidence=conf),
        k_plus=k_plus,
        k_minus=k_minus,
        rule=rule,
    )


def _audit_gradient(cell, data, ctx, settings: OneRunSettings) -> OneRunAudit:
    start = time.perf_counter()
    mech = get_mechanism(cell.mech)
    n_train = len(data.train[0])
    clip_norm = _clip_norm(cell)
    included = _included(settings)
    hook = GradientCanaries(
        included=included,
        sample_rate=mech.canary_sample_rate(cell, n_train),
        raw_norm=settings.canary_norm * clip_norm,
        seed=settings.seed,
        broken=settings.broken,
    )
    run = extra_run(cell, data, ctx, hook)
    ran_clip = float(run.claim.extra.get("clip_norm", clip_norm))
    if not math.isclose(ran_clip, clip_norm):
        raise RuntimeError(
            f"the run clipped at C = {ran_clip:g}, the canaries were made for {clip_norm:g}"
        )
    bounds = _bound(hook.sums, included, settings, run.claim)
    move = _bound(hook.start - hook.coordinates(), included, settings, run.claim)
    return OneRunAudit(
        kind=CanaryKind.GRADIENT,
        score="sum over steps of the released noisy gradient on the canary's coordinate",
        claim=run.claim,
        bound=bounds.steinke,
        fdp_epsilon=bounds.fdp,
        k_plus=bounds.k_plus,
        k_minus=bounds.k_minus,
        broken=settings.broken,
        guess_rule=bounds.rule,
        train_seconds=run.seconds,
        seconds=time.perf_counter() - start,
        scores=hook.sums.copy(),
        included=included,
        extra={
            "parameter_move_epsilon": move.steinke.epsilon,
            "canary_norm_before_clipping": settings.canary_norm * clip_norm,
            "clip_norm": clip_norm,
            "canary_sample_rate": hook.sample_rate,
            "never_sampled_included": int((hook.sampled[included] == 0).sum()),
        },
    )


def _clip_norm(cell: CellConfig) -> float:
    """The clip norm C the cell's mechanism trains with (a number: the median heuristic is
    data-dependent and refused here, as its canaries must be sized before training)."""
    from audit.mechanisms.dp_adam_options import ClipNormRule
    from models.dp import DEFAULT_CLIP_NORM

    value = getattr(get_mechanism(cell.mech).options_of(cell), "clip_norm", None)
    if value is ClipNormRule.MEDIAN:
        raise ValueError(
            "the one-run audit needs a fixed --clip-norm (the median heuristic sets C from the "
            "data while training); give --clip-norm a number"
        )
    return DEFAULT_CLIP_NORM if value is None else float(value)


def _audit_input(cell, data, ctx, settings: OneRunSettings) -> OneRunAudit:
    start = time.perf_counter()
    included = _included(settings)
    design = settings.input_design
    cx, cy = input_canaries(data, settings.canaries, settings.seed, design=design, tag=ONE_RUN_TAG)
    keep = torch.as_tensor(included)
    k = settings.copies
    inserted = (cx[keep].repeat_interleave(k, dim=0), cy[keep].repeat_interleave(k, dim=0))
    train = (torch.cat([data.train[0], inserted[0]]), torch.cat([data.train[1], inserted[1]]))
    classes = label_slot_classes(data.num_classes, settings.canaries, design)
    data = replace(data, num_classes=classes)  # label-slot: the real classes plus m slots
    with_canaries = replace(data, train=train, train_index=None)
    slot = design is InputDesign.LABEL_SLOT

    def hook() -> Switches:
        if slot:
            return LabelSlots(settings.canaries, settings.broken)
        return Switches(settings.broken)

    run = extra_run(cell, with_canaries, ctx, hook())
    claim = run.claim if k == 1 else group_claim(run.claim, k)
    records = AttackData(x=cx, y=cy, is_member=included)

    def score(model: torch.nn.Module) -> tuple[np.ndarray, str]:
        if slot:
            return label_slot_scores(model, cx, cy, settings.seed, device=ctx.device), (
                f"label-slot contrast on the decoder alone: mean over {LABEL_SLOT_LATENTS} fixed "
                "z (z = 0 and seeded N(0, I) draws) of the MSE between the canary and "
                "decode(z, other canaries' slots), averaged, minus that with its own slot"
            )
        result = _attack_canaries(cell, model, records, ctx)
        variant = getattr(result.variant, "value", result.variant)
        return np.asarray(result.scores, dtype=np.float64), (
            f"{result.attack} attack ({result.distance.value}, {variant}), "
            f"{result.n_samples} samples per record"
        )

    scores, how = score(run.model)
    reference_s = 0.0
    if settings.reference:  # the same attack on a model trained without any canary
        plain = replace(cell, seed=derive_seed(cell.seed, ONE_RUN_TAG, "reference") % 2**31)
        ref = extra_run(plain, data, ctx, hook())
        scores = scores - score(ref.model)[0]
        reference_s = ref.seconds
    bounds = _bound(scores, included, settings, claim)
    calibrated = ", minus its score on a reference model trained without canaries"
    return OneRunAudit(
        kind=CanaryKind.INPUT,
        score=f"{how}{calibrated if settings.reference else ''}",
        claim=claim,
        bound=bounds.steinke,
        fdp_epsilon=bounds.fdp,
        k_plus=bounds.k_plus,
        k_minus=bounds.k_minus,
        broken=settings.broken,
        guess_rule=bounds.rule,
        train_seconds=run.seconds + reference_s,
        seconds=time.perf_counter() - start,
        scores=scores,
        included=included,
        extra={
            "n_train_with_canaries": len(train[0]),
            "canaries": f"{design.value} records",
            "copies": k,
            "single_record_epsilon": run.claim.epsilon,
            "num_classes": classes,
        },
    )


#: Fixed latents of the label-slot score: z = 0 and this many minus one N(0, I) draws.
LABEL_SLOT_LATENTS = 8


@torch.no_grad()
def label_slot_scores(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, seed: int, *, device: str = "cpu"
) -> np.ndarray:
    """Scores of label-slot canaries (x_j, y_j) from the decoder alone (black box: only
    ``model.decode`` is called): for each fixed z (z = 0 and :data:`LABEL_SLOT_LATENTS` - 1
    seeded N(0, I) draws, fixed before training), the mean MSE between x_j and decode(z, y_i)
    over the other canaries' slots i != j, minus the MSE between x_j and decode(z, y_j),
    averaged over z. High: slot j reconstructs x_j better than the other slots do, which only
    canary j's own training could cause (each slot's weights get gradient from its canary alone).
    """
    m = len(x)
    gen = torch_generator(seed, ONE_RUN_TAG, "label-slot-latents")
    z = torch.randn((LABEL_SLOT_LATENTS, model.latent_dim), generator=gen)
    z[0] = 0.0
    xs = x.to(device).flatten(1).double()
    total = torch.zeros(m, dtype=torch.float64)
    for zs in z:
        out = model.decode(zs.to(device).expand(m, -1), y.to(device)).flatten(1).double()
        # mse[j, i]: canary j against slot i's output
        mse = (xs.pow(2).sum(1, keepdim=True) - 2 * xs @ out.T + out.pow(2).sum(1)) / xs.shape[1]
        own = mse.diagonal()
        others = (mse.sum(1) - own) / max(m - 1, 1)
        total += (others - own).cpu()
    return (total / len(z)).numpy()


def group_claim(claim: PrivacyClaim, k: int) -> PrivacyClaim:
    """The claim for datasets that differ in ``k`` records (an input canary inserted k times):
    :func:`audit.privacy.group.group_rdp_epsilon` on the run's RDP curve (Mironov's Prop. 2)."""
    if claim.event is None or claim.accountant != "rdp":
        raise ValueError(
            f"copies > 1 needs an RDP-accounted claim with its event; got {claim.method!r}"
        )
    return PrivacyClaim(
        epsilon=group_rdp_epsilon(claim.event, k, delta=claim.delta),
        delta=claim.delta,
        method=f"{claim.method}, group of {k} (Mironov 2017 Prop. 2: 3^c RDP at order/2^c, "
        f"2^c >= {k})",
        accountant=claim.accountant,
        extra={**claim.extra, "group_size": k, "single_record_epsilon": claim.epsilon},
        event=claim.event,
    )


def _attack_canaries(cell: CellConfig, model: torch.nn.Module, records: AttackData, ctx):
    """The release's input-canary attack (:data:`INPUT_CANARY_ATTACK`) on ``records``: its
    first (primary) result, seeded from the cell's attack seed."""
    mech = get_mechanism(cell.mech)
    name = INPUT_CANARY_ATTACK[mech.release]
    settings = attack_settings(
        attack_samples=cell.profile.attack_samples, modality=record_modality(records.x.shape[1:])
    )  # its primary distance alone (MSE): the same scores, and no SSIM on images it cannot fit
    attack = build_attack(
        name,
        seed=derive_seed(cell.seed, Purpose.ATTACK, ONE_RUN_TAG),
        device=ctx.device,
        settings=replace(settings, distances=settings.distances[:1]),
    )
    release = Release.of_kind(mech.release, model=model, samples=None)
    return next(iter(attack.run_release(release, records).values()))
