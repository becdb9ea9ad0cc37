"""The one-run audit (Steinke, Nasr and Jagielski 2023) of a DP-SGD-trained cell: ``cdp``,
``cdp-termwise`` and ``dp2vae`` (every mechanism whose
:meth:`~audit.mechanisms.mechanism.Mechanism.canary_sample_rate` is not None).

m canaries, each included independently with probability 1/2 (seeded), go into ONE extra
training run of the cell's mechanism: its own ``prepare``, ``train`` and ``claim``, with the
cell's settings and fresh seeds (the cell with the seed ``derive_seed(seed, TAG)``), the canary
hook handed to the training loop through ``Context.audit_hook``. Scores rank the canaries; the
guesses are fixed before any score is seen (:mod:`audit.empirical.guesses`: by default the
``design`` rule, from m, delta and the claim): the top ``k_plus`` scores are guessed "in", the
bottom ``k_minus`` "out", the rest abstain. Two estimators turn (m, r, v, delta) into bounds, both
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
  the batch term, and for dp2vae it exercises the decoder's step as paper 002 models it, not
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
from dataclasses import dataclass, field, replace
from enum import Enum

import numpy as np
import torch

from attacks import AttackData
from attacks.registry import build_attack
from attacks.threat import Release, ReleaseKind
from audit.attack_plan import attack_settings
from audit.config import CellConfig, MechanismName
from audit.empirical.bounds import CONFIDENCE, OneRunBound, one_run_epsilon_bound
from audit.empirical.estimators import one_run_fdp_epsilon
from audit.empirical.guesses import GuessRule, design_guesses, quarter_guesses
from audit.empirical.input_canaries import InputDesign, input_canaries, label_slot_classes
from audit.mechanisms import CellData, Context, get_mechanism
from audit.mechanisms.mechanism import Mechanism
from audit.privacy.claim import PrivacyClaim
from audit.privacy.group import group_rdp_epsilon
from audit.target_training import train_target
from dpvae_core.records import record_modality
from dpvae_core.seeding import Purpose, derive_seed, numpy_rng, torch_generator
from models.dp import clip_and_sum

#: Tag that separates every seed of the audit run from the cell's own.
TAG = "one-run-audit"


class CanaryKind(str, Enum):
    GRADIENT = "gradient"
    INPUT = "input"


class Broken(str, Enum):
    """Test-only broken mechanisms (never used by a real cell)."""

    NONE = "none"
    NO_NOISE = "no-noise"  # trains with z = 0; the claim keeps the run's z
    NO_CLIP = "no-clip"  # records' gradients are not clipped; the noise std stays z*C


@dataclass(frozen=True)
class OneRunSettings:
    """m canaries, the guesses, and the audit's seed.

    Guesses: ``k_plus`` / ``k_minus`` where given (the other then m/4), else ``guess_rule``
    (:mod:`audit.empirical.guesses`: ``design``, the default, fixes them from m, delta and the
    claim before any score is seen; ``quarter``, m/4 each).

    ``canary_norm``: a gradient canary's norm before clipping, in units of C (> 1, so that the
    clipping is exercised: a clipped canary has norm C). ``input_design``: what input canaries
    are (:mod:`audit.empirical.input_canaries`); ``reference``: input canaries' scores minus
    their scores on a model trained without canaries (one more training; the adversary of DP
    knows every other record, so may train that model). ``copies``: each included input canary
    goes into D_train that many times (one coin per canary), so the datasets with and without a
    canary differ in ``copies`` records and the audit compares with the group claim
    (:func:`group_claim`), never the single-record one.
    """

    kind: CanaryKind = CanaryKind.GRADIENT
    canaries: int = 1000
    k_plus: int | None = None
    k_minus: int | None = None
    seed: int = 0
    canary_norm: float = 10.0
    confidence: float = CONFIDENCE
    broken: Broken = Broken.NONE
    guess_rule: GuessRule = GuessRule.DESIGN
    input_design: InputDesign = InputDesign.UNIFORM_NOISE
    reference: bool = False
    copies: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", CanaryKind(self.kind))
        object.__setattr__(self, "guess_rule", GuessRule(self.guess_rule))
        object.__setattr__(self, "input_design", InputDesign(self.input_design))
        object.__setattr__(self, "broken", Broken(self.broken))
        m = self.canaries
        if isinstance(m, bool) or not isinstance(m, int) or m < 2:
            raise ValueError(f"canaries must be an integer >= 2, got {m!r}")
        k_plus, k_minus = self.explicit_guesses() or (1, 1)
        if min(k_plus, k_minus) < 0 or k_plus + k_minus > m or k_plus + k_minus == 0:
            raise ValueError(
                f"need k_plus, k_minus >= 0 with 0 < k_plus + k_minus <= canaries ({m}), "
                f"got {k_plus} and {k_minus}"
            )
        c = self.copies
        if isinstance(c, bool) or not isinstance(c, int) or c < 1:
            raise ValueError(f"copies must be an integer >= 1, got {c!r}")
        if c > 1 and self.kind is not CanaryKind.INPUT:
            raise ValueError("copies > 1 applies to input canaries only")
        if not (math.isfinite(self.canary_norm) and self.canary_norm >= 1):
            raise ValueError(f"canary_norm must be >= 1 (units of C), got {self.canary_norm!r}")

    def explicit_guesses(self) -> tuple[int, int] | None:
        if self.k_plus is None and self.k_minus is None:
            return None
        default, _ = quarter_guesses(self.canaries)
        return (
            default if self.k_plus is None else self.k_plus,
            default if self.k_minus is None else self.k_minus,
        )

    def guesses(self, *, claim_epsilon: float, delta: float) -> tuple[int, int]:
        """(k+, k-): the explicit ones, else the rule's (from m, delta and the claim only)."""
        explicit = self.explicit_guesses()
        if explicit is not None:
            return explicit
        if self.guess_rule is GuessRule.QUARTER:
            return quarter_guesses(self.canaries)
        return design_guesses(
            m=self.canaries, claim_epsilon=claim_epsilon, delta=delta, confidence=self.confidence
        )


@dataclass(frozen=True)
class OneRunAudit:
    """The bound, the claim it is compared with, and how both were obtained.

    ``bound`` is Steinke et al.'s (the ``one-run`` estimator, ``epsilon``); ``fdp_epsilon`` the
    f-DP bound of Mahloujifar et al. over the same guesses (``one-run-fdp``, which assumes a
    Gaussian-shaped trade-off curve). ``scores`` and ``included`` are the raw canary scores and
    the truth; ``extra`` holds
    secondary facts (e.g. the parameter-move bound of gradient canaries, which is NOT combined
    with the main one: taking the better of two would need a multiple-testing correction).
    """

    kind: CanaryKind
    score: str
    claim: PrivacyClaim
    bound: OneRunBound
    fdp_epsilon: float
    k_plus: int
    k_minus: int
    broken: Broken
    guess_rule: str
    train_seconds: float
    seconds: float
    scores: np.ndarray = field(repr=False)
    included: np.ndarray = field(repr=False)
    extra: dict[str, float | str] = field(default_factory=dict)

    @property
    def epsilon(self) -> float:
        return self.bound.epsilon


def count_correct(
    scores: np.ndarray, included: np.ndarray, *, k_plus: int, k_minus: int
) -> tuple[int, int]:
    """(r, v): guess the ``k_plus`` highest scores in and the ``k_minus`` lowest out (ties by
    index, which is independent of inclusion), count the right guesses."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    guessed_in, guessed_out = order[:k_plus], order[len(order) - k_minus :]
    v = int(included[guessed_in].sum()) + int((~included[guessed_out]).sum())
    return k_plus + k_minus, v


#: The attack that scores input canaries, per release: the strongest of the release whose score
#: is one number per record fixed in advance (reconstruction for the whole VAE, paper 003's
#: attack; GAN-Leaks' latent search for a decoder).
INPUT_CANARY_ATTACK: dict[ReleaseKind, str] = {
    ReleaseKind.WHOLE_VAE: "reconstruction",
    ReleaseKind.DECODER_ONLY: "latent-search",
}


class Switches:
    """An audit hook (:class:`models.dp.AuditHook`) without canaries: only the test-only
    broken-mechanism switches."""

    def __init__(self, broken: Broken = Broken.NONE) -> None:
        self.unclipped = broken is Broken.NO_CLIP
        self.noiseless = broken is Broken.NO_NOISE

    def begin(self, params: list[torch.nn.Parameter]) -> None:
        return None

    def add_canaries(self, summed: list[torch.Tensor], *, clip_norm: float) -> list[torch.Tensor]:
        return summed

    def observe(self, noisy: list[torch.Tensor]) -> None:
        return None


#: Initial value of a label-slot canary's own column of the encoder's log-variance layer.
LABEL_SLOT_LOGVAR = -8.0


class LabelSlots(Switches):
    """The audit hook of ``label-slot`` input canaries: at :meth:`begin` it sets the initial
    weights of the m canary slots, the last m input columns of the conditional VAE's three dense
    layers (``fc_mu``, ``fc_logvar``, ``fc_dec``, in that order among the trained parameters;
    each reads the one-hot label last): 0, except ``fc_logvar``'s, :data:`LABEL_SLOT_LOGVAR`.
    A slot's final decoder weights are then its canary's pull plus the DP noise, with no random
    initial value on top, and a canary's posterior is narrow (std about e^-4), so that its
    latent z is small and more of its clipped gradient falls on its own ``fc_dec`` column
    (at initialisation 3-5 % of its norm instead of 2 %; the rest goes to the shared weights). Real
    records never read these columns. DP holds for every data-independent initialisation, so
    the auditor may choose these values; the sampling, clipping and noise are untouched."""

    def __init__(self, slots: int, broken: Broken = Broken.NONE) -> None:
        super().__init__(broken)
        self.slots = slots

    def begin(self, params: list[torch.nn.Parameter]) -> None:
        dense = [p for p in params if p.dim() == 2]
        if len(dense) != 3 or any(p.shape[1] <= self.slots for p in dense):
            raise ValueError(
                "label-slot canaries need the conditional conv VAE trained whole (three dense "
                "layers, each reading the one-hot label last); got dense shapes "
                f"{[tuple(p.shape) for p in dense]}"
            )
        with torch.no_grad():
            for p in dense:
                p[:, -self.slots :] = 0.0
            dense[1][:, -self.slots :] = LABEL_SLOT_LOGVAR


class GradientCanaries(Switches):
    """The audit hook for gradient canaries.

    At :meth:`begin`, canary j gets its own coordinate c_j, drawn without replacement from every
    coordinate of the privately trained parameters; its gradient is ``raw_norm * e_{c_j}``.
    Each step, every included canary is sampled with probability ``sample_rate``; the sampled
    ones are clipped by :func:`models.dp.clip_and_sum` (all canaries share a norm, so one
    clipped value serves all) and added to the clipped sum. ``sums`` accumulates the released
    noisy gradient on each canary's coordinate.
    """

    def __init__(
        self,
        *,
        included: np.ndarray,
        sample_rate: float,
        raw_norm: float,
        seed: int,
        broken: Broken = Broken.NONE,
    ) -> None:
        super().__init__(broken)
        self.included = torch.as_tensor(included, dtype=torch.bool)
        self.sample_rate, self.raw_norm, self.seed = sample_rate, raw_norm, seed
        self.gen = torch_generator(seed, TAG, "canary-sampling")
        m = len(included)
        self.sums = np.zeros(m)
        self.sampled = np.zeros(m, dtype=np.int64)
        self.params: list[torch.nn.Parameter] = []
        self.start = np.zeros(m)

    def begin(self, params: list[torch.nn.Parameter]) -> None:
        sizes = np.array([p.numel() for p in params])
        m = len(self.included)
        if m > sizes.sum():
            raise ValueError(
                f"{m} gradient canaries need as many coordinates; the privately trained "
                f"parameters have {int(sizes.sum())}"
            )
        flat = np.sort(
            numpy_rng(self.seed, TAG, "coordinates").choice(sizes.sum(), m, replace=False)
        )
        self.param_of = np.searchsorted(np.cumsum(sizes), flat, side="right")
        self.offset = flat - np.concatenate([[0], np.cumsum(sizes)])[self.param_of]
        self._by_param = {
            int(i): (self.param_of == i, torch.as_tensor(self.offset[self.param_of == i]))
            for i in np.unique(self.param_of)
        }
        self.params = list(params)
        self.start = self.coordinates()

    def add_canaries(self, summed: list[torch.Tensor], *, clip_norm: float) -> list[torch.Tensor]:
        draw = torch.rand(len(self.included), generator=self.gen) < self.sample_rate
        chosen = (draw & self.included).numpy()
        self.sampled += chosen
        value = clip_and_sum([torch.full((1, 1), self.raw_norm)], clip_norm=clip_norm)[0][0]
        out = [g.clone() for g in summed]
        for i in np.unique(self.param_of[chosen]):
            where = torch.as_tensor(self.offset[chosen & (self.param_of == i)])
            flat = out[i].view(-1)
            flat.index_add_(0, where.to(flat.device), value.to(flat).expand(len(where)))
        return out

    def observe(self, noisy: list[torch.Tensor]) -> None:
        for i, (sel, where) in self._by_param.items():
            values = noisy[i].detach().reshape(-1)[where.to(noisy[i].device)]
            self.sums[sel] += values.double().cpu().numpy()

    def coordinates(self) -> np.ndarray:
        """The current values of the canaries' coordinates (after :meth:`begin`)."""
        flat = [p.detach().reshape(-1).cpu().double() for p in self.params]
        return np.array(
            [float(flat[i][o]) for i, o in zip(self.param_of, self.offset, strict=True)]
        )


def audit_cell_of(cell: CellConfig) -> CellConfig:
    """The extra run's cell: the cell with a seed derived from its own and :data:`TAG`, so its
    initialisation, batches and noise are fresh (the data split is the caller's)."""
    return replace(cell, seed=derive_seed(cell.seed, TAG) % 2**31)


@dataclass(frozen=True)
class ExtraRun:
    """The extra training run: the released model (inference form), its claim and seconds."""

    model: torch.nn.Module
    claim: PrivacyClaim
    seconds: float


def extra_run(cell: CellConfig, data: CellData, ctx: Context, hook: Switches) -> ExtraRun:
    """Train ``cell``'s target on ``data`` by the cells' own code path
    (:func:`audit.target_training.train_target`), with ``hook`` in the training loop."""
    target = train_target(cell, data, replace(ctx, audit_hook=hook))
    return ExtraRun(model=target.model, claim=target.claim, seconds=target.seconds)


def one_run_mechanisms() -> tuple[str, ...]:
    """The mechanisms the one-run audit applies to: those that override
    :meth:`~audit.mechanisms.mechanism.Mechanism.canary_sample_rate` (DP-SGD training loops)."""
    return tuple(
        m.value
        for m in MechanismName
        if type(get_mechanism(m)).canary_sample_rate is not Mechanism.canary_sample_rate
    )


def audit_one_run(
    cell: CellConfig, data: CellData, ctx: Context, settings: OneRunSettings
) -> OneRunAudit:
    """One extra training run of the cell's mechanism with canaries, and Steinke et al.'s bound
    against the claim of that run (its own N_train and delta: the cell's ``--delta``, else
    1/N_train of the run's D_train; input canaries add the included ones to D_train)."""
    if cell.mech.value not in one_run_mechanisms():
        raise ValueError(
            f"the one-run audit applies to {', '.join(one_run_mechanisms())} cells, got "
            f"{cell.mech.value!r}"
        )
    run = _audit_gradient if settings.kind is CanaryKind.GRADIENT else _audit_input
    return run(audit_cell_of(cell), data, ctx, settings)


def _included(settings: OneRunSettings) -> np.ndarray:
    return numpy_rng(settings.seed, TAG, "included").random(settings.canaries) < 0.5


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
    from audit.mechanisms.cdp import ClipNormRule
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
    cx, cy = input_canaries(data, settings.canaries, settings.seed, design=design, tag=TAG)
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
        plain = replace(cell, seed=derive_seed(cell.seed, TAG, "reference") % 2**31)
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
    gen = torch_generator(seed, TAG, "label-slot-latents")
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
        seed=derive_seed(cell.seed, Purpose.ATTACK, TAG),
        device=ctx.device,
        settings=replace(settings, distances=settings.distances[:1]),
    )
    release = Release.of_kind(mech.release, model=model, samples=None)
    return next(iter(attack.run_release(release, records).values()))
