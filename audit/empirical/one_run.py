"""The one-run audit of DP-Adam (Steinke, Nasr and Jagielski 2023) for a ``cdp`` cell.

m canaries, each included independently with probability 1/2 (seeded), go into ONE extra
training run with the cell's exact DP-Adam settings (clip norm, noise multiplier, Poisson rate
B / N_train, steps, Adam). Scores rank the canaries; the guesses are fixed in advance: the top
``k_plus`` scores are guessed "in", the bottom ``k_minus`` "out", the rest abstain.
:func:`audit.empirical.bounds.one_run_epsilon_bound` turns (m, r, v, delta) into the bound.

Canary kinds:

- ``gradient``: each canary is a record whose gradient is a fixed vector along its own
  parameter coordinate, of norm ``canary_norm`` * C before clipping; in each step it is
  Poisson-sampled at the real records' rate and its clipped gradient joins the clipped sum
  before the noise (the audit hook of :func:`models.dp.train_dp_vae`). Score: the sum
  over steps of the released noisy gradient on the canary's coordinate. DP-SGD's threat model
  releases every noisy gradient (the accountant composes them all), so any function of them
  is a valid test; the final parameters' move (``parameter_move`` in the result) is valid too
  (post-processing) but Adam's per-coordinate scaling distorts it.
- ``input``: canary records (i.i.d. uniform-noise images with random labels: far from the
  data) added to D_train; score: the reconstruction attack's -MSE (the bound a user's
  adversary gets from the released VAE).

Test-only switches (:class:`Broken`) remove the noise (z = 0 in training while the claim keeps
the cell's z) or the clipping; a correct mechanism's bound must stay below its claim and a
broken one's is expected to exceed it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from enum import Enum

import numpy as np
import torch

from attacks import AttackData, Distance, get_attack
from audit.config import CellConfig, MechanismName
from audit.empirical.bounds import CONFIDENCE, OneRunBound, one_run_epsilon_bound
from audit.mechanisms import CellData, Context, get_mechanism
from audit.mechanisms.mechanism import Prepared, vae_settings
from audit.privacy.claim import PrivacyClaim
from audit.privacy.dp_sgd_accounting import cdp_claim
from core.seeding import Purpose, derive_seed, numpy_rng, torch_generator
from models.dp import DPSettings, clip_and_sum, train_dp_vae
from models.factory import model_family

#: Tag that separates every seed of the audit run from the cell's own.
TAG = "one-run-audit"


class CanaryKind(str, Enum):
    GRADIENT = "gradient"
    INPUT = "input"


class Broken(str, Enum):
    """Test-only broken mechanisms (never used by a real cell)."""

    NONE = "none"
    NO_NOISE = "no-noise"  # trains with z = 0; the claim keeps the cell's z
    NO_CLIP = "no-clip"  # records' gradients are not clipped; the noise std stays z*C


@dataclass(frozen=True)
class OneRunSettings:
    """m canaries, the guesses (default: top and bottom m/4), and the audit's seed.

    ``canary_norm``: a gradient canary's norm before clipping, in units of C (> 1, so that the
    clipping is exercised: a clipped canary has norm C).
    """

    kind: CanaryKind = CanaryKind.GRADIENT
    canaries: int = 1000
    k_plus: int | None = None
    k_minus: int | None = None
    seed: int = 0
    canary_norm: float = 10.0
    confidence: float = CONFIDENCE
    broken: Broken = Broken.NONE

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", CanaryKind(self.kind))
        object.__setattr__(self, "broken", Broken(self.broken))
        m = self.canaries
        if isinstance(m, bool) or not isinstance(m, int) or m < 2:
            raise ValueError(f"canaries must be an integer >= 2, got {m!r}")
        k_plus, k_minus = self.guesses
        if min(k_plus, k_minus) < 0 or k_plus + k_minus > m or k_plus + k_minus == 0:
            raise ValueError(
                f"need k_plus, k_minus >= 0 with 0 < k_plus + k_minus <= canaries ({m}), "
                f"got {k_plus} and {k_minus}"
            )
        if not (math.isfinite(self.canary_norm) and self.canary_norm >= 1):
            raise ValueError(f"canary_norm must be >= 1 (units of C), got {self.canary_norm!r}")

    @property
    def guesses(self) -> tuple[int, int]:
        default = max(1, self.canaries // 4)
        return (
            default if self.k_plus is None else self.k_plus,
            default if self.k_minus is None else self.k_minus,
        )


@dataclass(frozen=True)
class OneRunAudit:
    """The bound, the claim it is compared with, and how both were obtained.

    ``scores`` and ``included`` are the raw canary scores and the truth; ``extra`` holds
    secondary facts (e.g. the parameter-move bound of gradient canaries, which is NOT combined
    with the main one: taking the better of two would need a multiple-testing correction).
    """

    kind: CanaryKind
    score: str
    claim: PrivacyClaim
    bound: OneRunBound
    k_plus: int
    k_minus: int
    broken: Broken
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


class GradientCanaries:
    """The audit hook (:class:`models.dp.AuditHook`) for gradient canaries.

    Canary j is the vector ``canary_norm * C * e_{c_j}`` on its own coordinate c_j, drawn
    without replacement from every trainable coordinate of ``params``. Each step, every
    included canary is sampled with probability ``sample_rate``; the sampled ones are clipped by
    :func:`models.dp.clip_and_sum` (all canaries share a norm, so one clipped value
    serves all) and added to the clipped sum. ``sums`` accumulates the released noisy
    gradient on each canary's coordinate.
    """

    def __init__(
        self,
        params: list[torch.nn.Parameter],
        *,
        included: np.ndarray,
        sample_rate: float,
        raw_norm: float,
        seed: int,
        unclipped: bool = False,
    ) -> None:
        sizes = np.array([p.numel() for p in params])
        m = len(included)
        if m > sizes.sum():
            raise ValueError(
                f"{m} gradient canaries need as many coordinates; the model has {int(sizes.sum())}"
            )
        flat = np.sort(numpy_rng(seed, TAG, "coordinates").choice(sizes.sum(), m, replace=False))
        self.param_of = np.searchsorted(np.cumsum(sizes), flat, side="right")
        self.offset = flat - np.concatenate([[0], np.cumsum(sizes)])[self.param_of]
        self.included = torch.as_tensor(included, dtype=torch.bool)
        self.sample_rate, self.raw_norm, self.unclipped = sample_rate, raw_norm, unclipped
        self.gen = torch_generator(seed, TAG, "canary-sampling")
        self.sums = np.zeros(m)
        self.sampled = np.zeros(m, dtype=np.int64)
        self._by_param = {
            int(i): (self.param_of == i, torch.as_tensor(self.offset[self.param_of == i]))
            for i in np.unique(self.param_of)
        }

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

    def coordinates(self, params: list[torch.nn.Parameter]) -> np.ndarray:
        """The current values of the canaries' coordinates."""
        flat = [p.detach().reshape(-1).cpu().double() for p in params]
        return np.array(
            [float(flat[i][o]) for i, o in zip(self.param_of, self.offset, strict=True)]
        )


class _ClipOnly:
    """The hook with no canaries: only the test-only switch that removes clipping."""

    unclipped = True

    def add_canaries(self, summed: list[torch.Tensor], *, clip_norm: float) -> list[torch.Tensor]:
        return summed

    def observe(self, noisy: list[torch.Tensor]) -> None:
        return None


def _run_settings(cell: CellConfig, prepared: Prepared, model, ctx: Context, broken: Broken):
    """(VAETrainSettings, DPSettings, z): the cell's own DP-Adam settings with the audit's seeds."""
    mech = get_mechanism(MechanismName.CDP)
    settings = vae_settings(cell, ctx)
    clip_norm, _ = mech.clip_norm(model, prepared, cell, settings)
    z, _ = mech.noise_multiplier(cell, n_train=len(prepared.train[0]))
    settings = replace(settings, seed=derive_seed(cell.seed, Purpose.TRAIN, TAG))
    dp = DPSettings(
        noise_multiplier=0.0 if broken is Broken.NO_NOISE else z,
        clip_norm=clip_norm,
        noise_seed=derive_seed(cell.seed, Purpose.DP_NOISE, TAG),
    )
    return settings, dp, z


def _fresh_model(cell: CellConfig, data: CellData, ctx: Context):
    family = model_family(data.shape, data.num_classes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(cell.seed, Purpose.INIT, TAG) % 2**63)
        model = family.target_vae(latent_dim=cell.profile.latent_dim).to(ctx.device)
    return family, model


def _claim(cell: CellConfig, n_train: int, z: float, delta_n: int) -> PrivacyClaim:
    mech = get_mechanism(MechanismName.CDP)
    return cdp_claim(
        n_train=n_train,
        batch_size=cell.profile.batch_size,
        epochs=cell.profile.epochs,
        noise_multiplier=z,
        delta=mech.delta(cell, delta_n),
        conversion=mech.conversion(cell),
    )


def audit_one_run(
    cell: CellConfig, data: CellData, ctx: Context, settings: OneRunSettings
) -> OneRunAudit:
    """One extra DP-Adam run of the ``cdp`` cell with canaries, and Steinke et al.'s bound.

    Notes:
        The claim is the cell's accountant at the cell's delta (1/N_train of the real D_train
        unless ``delta`` is set) for the run's own N: gradient canaries leave D_train and so the
        claim unchanged; input canaries add the included ones to D_train (N grows by about m/2,
        with sample rate B/N and ceil(epochs N / B) steps; the claim is recomputed for that N).
    """
    if cell.mech is not MechanismName.CDP:
        raise ValueError(f"the one-run audit applies to cdp cells, got {cell.mech.value!r}")
    run = _audit_gradient if settings.kind is CanaryKind.GRADIENT else _audit_input
    return run(cell, data, ctx, settings)


def _included(settings: OneRunSettings) -> np.ndarray:
    return numpy_rng(settings.seed, TAG, "included").random(settings.canaries) < 0.5


def _bound(scores, included, settings: OneRunSettings, delta: float) -> tuple[OneRunBound, int]:
    k_plus, k_minus = settings.guesses
    r, v = count_correct(scores, included, k_plus=k_plus, k_minus=k_minus)
    bound = one_run_epsilon_bound(
        m=settings.canaries, r=r, v=v, delta=delta, confidence=settings.confidence
    )
    return bound, v


def _audit_gradient(cell, data, ctx, settings: OneRunSettings) -> OneRunAudit:
    start = time.perf_counter()
    prepared = Prepared(train=data.train, val=data.val)
    _, model = _fresh_model(cell, data, ctx)
    train_settings, dp, z = _run_settings(cell, prepared, model, ctx, settings.broken)
    params = [p for p in model.parameters() if p.requires_grad]
    included = _included(settings)
    hook = GradientCanaries(
        params,
        included=included,
        sample_rate=cell.profile.batch_size / len(data.train[0]),
        raw_norm=settings.canary_norm * dp.clip_norm,
        seed=settings.seed,
        unclipped=settings.broken is Broken.NO_CLIP,
    )
    before = hook.coordinates(params)
    t0 = time.perf_counter()
    train_dp_vae(model, data.train, data.val, train_settings, dp, audit_hook=hook)
    train_seconds = time.perf_counter() - t0
    claim = _claim(cell, len(data.train[0]), z, len(data.train[0]))
    bound, _ = _bound(hook.sums, included, settings, claim.delta)
    move, _ = _bound(before - hook.coordinates(params), included, settings, claim.delta)
    k_plus, k_minus = settings.guesses
    return OneRunAudit(
        kind=CanaryKind.GRADIENT,
        score="sum over steps of the released noisy gradient on the canary's coordinate",
        claim=claim,
        bound=bound,
        k_plus=k_plus,
        k_minus=k_minus,
        broken=settings.broken,
        train_seconds=train_seconds,
        seconds=time.perf_counter() - start,
        scores=hook.sums.copy(),
        included=included,
        extra={
            "parameter_move_epsilon": move.epsilon,
            "canary_norm_before_clipping": settings.canary_norm * dp.clip_norm,
            "clip_norm": dp.clip_norm,
            "never_sampled_included": int((hook.sampled[included] == 0).sum()),
        },
    )


def input_canaries(data: CellData, m: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """m canary records: i.i.d. uniform pixels (seeded) with uniformly drawn labels."""
    gen = torch_generator(seed, TAG, "input-canaries")
    x = torch.rand((m, *data.shape), generator=gen, dtype=data.train[0].dtype)
    y = torch.randint(data.num_classes, (m,), generator=gen)
    return x, y


def _audit_input(cell, data, ctx, settings: OneRunSettings) -> OneRunAudit:
    start = time.perf_counter()
    included = _included(settings)
    cx, cy = input_canaries(data, settings.canaries, settings.seed)
    keep = torch.as_tensor(included)
    train = (torch.cat([data.train[0], cx[keep]]), torch.cat([data.train[1], cy[keep]]))
    prepared = Prepared(train=train, val=data.val)
    family, model = _fresh_model(cell, data, ctx)
    train_settings, dp, z = _run_settings(cell, prepared, model, ctx, settings.broken)
    hook = _ClipOnly() if settings.broken is Broken.NO_CLIP else None
    t0 = time.perf_counter()
    train_dp_vae(model, train, data.val, train_settings, dp, audit_hook=hook)
    train_seconds = time.perf_counter() - t0
    model = family.for_inference(model).eval()
    attack = get_attack("reconstruction")(
        n_samples=cell.profile.attack_samples,
        distances=(Distance.MSE,),
        seed=derive_seed(cell.seed, Purpose.ATTACK, TAG),
        device=ctx.device,
    )
    result = attack.run(model, AttackData(x=cx, y=cy, is_member=included))[Distance.MSE]
    claim = _claim(cell, len(train[0]), z, len(data.train[0]))
    bound, _ = _bound(result.scores, included, settings, claim.delta)
    k_plus, k_minus = settings.guesses
    return OneRunAudit(
        kind=CanaryKind.INPUT,
        score=f"reconstruction attack, -MSE over {cell.profile.attack_samples} samples",
        claim=claim,
        bound=bound,
        k_plus=k_plus,
        k_minus=k_minus,
        broken=settings.broken,
        train_seconds=train_seconds,
        seconds=time.perf_counter() - start,
        scores=np.asarray(result.scores),
        included=included,
        extra={"n_train_with_canaries": len(train[0]), "canaries": "uniform-noise images"},
    )
