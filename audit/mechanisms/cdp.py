"""``cdp``: standard DP-Adam (the trade-off paper, Section 2.3) on the target VAE's per-example
objective.

Options (:class:`CdpOptions`, one ``benchmark.py`` flag each): ``clip_norm`` (a number, or
``median``: the trade-off paper's heuristic), ``microbatch`` (k records per clipping group, each
group's sum clipped at C/2: :mod:`models.dp.microbatch`; 1, the default, clips per record),
``target_epsilon`` (calibrates z and ignores the cell's grid value), ``delta`` (default
1/N_train), ``conversion`` (improved, the default, or classic). ``divergence`` / ``alpha`` are
accepted only to be refused: a batch-wise divergence needs ``cdp-termwise``
(``models.dp.check_per_example_objective``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from audit.config import CellConfig
from audit.mechanisms.dp_adam_options import ClipNormRule, ClippedAdamOptions
from audit.mechanisms.mechanism import (
    Accounted,
    CellData,
    Context,
    DataFacts,
    Mechanism,
    Prepared,
    Trained,
    describe_claim,
    vae_settings,
)
from audit.options import (
    AccountingParams,
    choice,
    delta_value,
    float_in_range,
    option,
    positive_float,
    positive_int,
)
from audit.privacy.claim import Conversion, PrivacyClaim
from audit.privacy.dp_sgd_accounting import cdp_claim, noise_multiplier_for_epsilon
from audit.privacy.noise_calibration import MAX_NOISE_MULTIPLIER, MIN_NOISE_MULTIPLIER
from dpvae_core.schedule import dp_sgd_steps
from dpvae_core.seeding import Purpose, derive_seed
from dpvae_core.validation import check_batch
from models.dp import (
    DEFAULT_CLIP_NORM,
    DEFAULT_GRAD_SAMPLE_MODE,
    MEDIAN_WARMUP_EPOCHS,
    DPRun,
    DPSettings,
    check_per_example_objective,
    median_gradient_norm,
    microbatch_notes,
    train_dp_vae,
)
from models.dp.engine import dp_precision
from models.training import TrainHistory, VAETrainSettings
from models.vae import ConditionalConvVAE

MEDIAN_SOURCE = (
    f"median-heuristic over a {MEDIAN_WARMUP_EPOCHS}-epoch non-private warm-up on D_train "
    "(looks at private data outside the accounting)"
)


@dataclass(frozen=True)
class CdpOptions(ClippedAdamOptions):
    """The options of ``cdp`` (each None: the default named in its help)."""

    mechanism: ClassVar[str] = "cdp"
    microbatch: int | None = option(
        "records k per clipping group (default 1: per-record clipping); k >= 2 fixes each "
        "record's group before training (a keyed hash of its index) and clips each group's "
        "sampled sum at C/2, so that removing a record moves the release by at most C and the "
        "accounting is unchanged (the trade-off paper clipped its microbatches at C)",
        positive_int("microbatch"),
        "K",
        cli_type=int,
    )

    def canonical(self) -> dict[str, Any]:
        """As :meth:`MechanismOptions.canonical`, without ``microbatch`` at 1: per-record
        clipping, the cell without the option, keeps its hash."""
        out = super().canonical()
        if out.get("microbatch") == 1:
            del out["microbatch"]
        return out

    @property
    def microbatch_size(self) -> int:
        """k (1 when unset)."""
        return 1 if self.microbatch is None else self.microbatch


@dataclass(frozen=True)
class CdpEpsilonParams(AccountingParams):
    """``benchmark.py epsilon --mech cdp``: a DP-Adam schedule and z (or a target epsilon)."""

    mechanism: ClassVar[str] = "cdp"
    required: ClassVar[tuple[str, ...]] = ("n_train", "batch_size", "epochs")
    n_train: int | None = option(
        "number of training records N_train", positive_int("n_train"), "N", cli_type=int
    )
    batch_size: int | None = option(
        "expected batch size B; sample rate q = B / N_train",
        positive_int("batch_size"),
        "B",
        cli_type=int,
    )
    epochs: int | None = option(
        "epochs; steps = ceil(epochs * N_train / B) (the trade-off paper's convention)",
        positive_int("epochs"),
        "E",
        cli_type=int,
    )
    noise_multiplier: float | None = option(
        "noise multiplier z (noise std / clip norm); prints epsilon",
        float_in_range("noise_multiplier", MIN_NOISE_MULTIPLIER, MAX_NOISE_MULTIPLIER, zero=True),
        "Z",
        cli_type=float,
    )
    target_epsilon: float | None = option(
        "target epsilon; prints the smallest noise multiplier reaching it",
        positive_float("target epsilon"),
        "EPS",
        cli_type=float,
    )
    delta: float | None = option(
        "delta in (0, 1) (default 1/N_train)", delta_value, "D", cli_type=float
    )
    conversion: Conversion | None = option(
        "RDP-to-DP conversion, improved (Opacus, default) or classic (min over orders of "
        "rdp + log(1/delta)/(order-1), the trade-off paper's Table 2)",
        choice(Conversion, "conversion"),
        "NAME",
    )

    def check(self) -> None:
        super().check()
        if (self.noise_multiplier is None) == (self.target_epsilon is None):
            raise ValueError(
                f"--mech {self.mechanism} needs exactly one of --noise-multiplier, --target-epsilon"
            )


def with_extra(claim: PrivacyClaim, extra: Mapping[str, float | str]) -> PrivacyClaim:
    """``claim`` with further named facts in its extra (its event kept)."""
    return replace(claim, extra={**claim.extra, **extra})


class CentralDP(Mechanism):
    """``cdp``: Poisson sampling (q = B/N_train), per-example clipping at C, noise std z*C, Adam.

    Notes:
        The claim is Opacus RDP of ``ceil(epochs * N / B)`` sampled Gaussian releases at
        delta = 1/N_train (or ``--delta``), which is the number of steps the training loop runs
        (checked against the loop's :class:`models.dp.DPRun`). With ``--clip-norm
        median`` the clip norm comes from D_train outside the accounting; the row's privacy
        notes say so.
    """

    name = "cdp"
    param_name = "noise_multiplier"
    param_symbol = "z"
    param_label = "noise multiplier z"
    param_description = "DP-Adam noise multiplier z"
    accounting_help = "DP-Adam (Poisson-sampled Gaussian, Opacus RDP)"
    default_grid = (0.001, 0.01, 0.1, 0.5, 1.0, 2.0, 4.0)
    options_type = CdpOptions
    accounting_type = CdpEpsilonParams
    per_example_gradients = True

    def dp_arithmetic(self, precision: str) -> str:
        """DP-Adam by book-keeping runs its per-example gradients in bf16 in a bf16 cell (since
        c2c07a8; :func:`models.dp.engine.dp_precision`), float32 otherwise."""
        return dp_precision(precision, DEFAULT_GRAD_SAMPLE_MODE).value

    def _check_options(
        self, options: CdpOptions, *, batch_size: int, data: DataFacts | None
    ) -> None:
        """An objective DP-Adam's per-example clipping covers, and (with the data) Poisson
        sampling's B <= |D_train| after the ``max_train`` cap."""
        self._check_objective(options, batch_size=batch_size)
        microbatch = getattr(options, "microbatch", None)
        if microbatch is not None and microbatch > batch_size:
            raise ValueError(
                f"{self.name}: --microbatch {microbatch} exceeds the batch size B = {batch_size}; "
                f"choose k in 1..{batch_size} (k records per clipping group)"
            )
        if data is None:
            return
        if batch_size > data.n_train:
            raise ValueError(
                f"{self.name}: --batch-size {batch_size} exceeds |D_train| = "
                f"{data.n_train} (after the max-train cap); choose a batch size of at most "
                f"{data.n_train}"
            )
        check_batch(n_train=data.n_train, batch_size=batch_size, epochs=data.epochs)

    def _check_objective(self, options: ClippedAdamOptions, *, batch_size: int) -> None:
        """No batch-wise term: its sensitivity is not C (:func:`check_per_example_objective`)."""
        check_per_example_objective(
            divergence=None if options.divergence is None else options.divergence.value,
            alpha=options.alpha,
            batch_size=batch_size,
        )

    def prepare(self, cell: CellConfig, data: CellData, ctx: Context) -> Prepared:
        self._check_objective(self.options_of(cell), batch_size=cell.profile.batch_size)
        return super().prepare(cell, data, ctx)

    def train(
        self, model: ConditionalConvVAE, prepared: Prepared, cell: CellConfig, ctx: Context
    ) -> Trained:
        settings = vae_settings(cell, ctx)
        clip_norm, source = self.clip_norm(model, prepared, cell, settings)
        z, z_source = self.noise_multiplier(cell, n_train=len(prepared.train[0]))
        dp = DPSettings(
            noise_multiplier=z,
            clip_norm=clip_norm,
            noise_seed=derive_seed(cell.seed, Purpose.DP_NOISE, cell.noise_key),
            microbatch=self.microbatch(cell),
        )
        history = self._train(model, prepared, cell, ctx, settings, dp)
        notes = {"clip_norm_source": source, "noise_multiplier_source": z_source}
        return Trained(history=history, notes=notes)

    def _train(
        self,
        model: ConditionalConvVAE,
        prepared: Prepared,
        cell: CellConfig,
        ctx: Context,
        settings: VAETrainSettings,
        dp: DPSettings,
    ) -> TrainHistory:
        return train_dp_vae(
            model,
            prepared.train,
            prepared.val,
            settings,
            dp,
            progress=ctx.progress,
            audit_hook=ctx.audit_hook,
        )

    def microbatch(self, cell: CellConfig) -> int:
        """k, the records per clipping group (1: per record; a mechanism without the option)."""
        options = self.options_of(cell)
        return options.microbatch_size if isinstance(options, CdpOptions) else 1

    def canary_sample_rate(self, cell: CellConfig, n_train: int) -> float | None:
        """Poisson sampling at q = B / N_train, every step."""
        return cell.profile.batch_size / n_train

    def clip_norm(
        self,
        model: ConditionalConvVAE,
        prepared: Prepared,
        cell: CellConfig,
        settings: VAETrainSettings,
    ) -> tuple[float, str]:
        """(C, where it came from): the option's number, the default, or the median heuristic."""
        value = self.typed(self.options_of(cell)).clip_norm
        if value is None:
            return DEFAULT_CLIP_NORM, f"default {DEFAULT_CLIP_NORM:g}"
        if value is not ClipNormRule.MEDIAN:
            return value, "given"
        warm = replace(settings, seed=derive_seed(cell.seed, Purpose.TRAIN, "clip-warm-up"))
        epochs = min(MEDIAN_WARMUP_EPOCHS, settings.epochs)
        return median_gradient_norm(model, prepared.train, warm, epochs=epochs), MEDIAN_SOURCE

    def noise_multiplier(self, cell: CellConfig, *, n_train: int) -> tuple[float, str]:
        """(z, where it came from): the grid value, or calibrated to ``--target-epsilon``."""
        target = self.typed(self.options_of(cell)).target_epsilon
        if target is None:
            return float(cell.param_value), "grid"
        z = self.calibrate(cell, target_epsilon=target, n_train=n_train)
        return z, f"target-epsilon {target:g} (grid value {cell.param_value} ignored)"

    def calibrate(self, cell: CellConfig, *, target_epsilon: float, n_train: int) -> float:
        """The noise multiplier whose claim for ``cell``'s schedule is ``target_epsilon``."""
        return noise_multiplier_for_epsilon(
            target_epsilon=target_epsilon,
            n_train=n_train,
            batch_size=cell.profile.batch_size,
            epochs=cell.profile.epochs,
            delta=self.delta(cell, n_train),
            conversion=self.conversion(cell),
        )

    def delta(self, cell: CellConfig, n_train: int) -> float:
        value = self.typed(self.options_of(cell)).delta
        return 1.0 / n_train if value is None else value

    def conversion(self, cell: CellConfig) -> Conversion:
        return self.typed(self.options_of(cell)).conversion or Conversion.IMPROVED

    def account(self, params: AccountingParams) -> Accounted:
        """Epsilon of the schedule at z, or the smallest z reaching ``target_epsilon``."""
        params = self.typed_params(params)
        schedule = {
            "n_train": params.n_train,
            "batch_size": params.batch_size,
            "epochs": params.epochs,
            "delta": 1 / params.n_train if params.delta is None else params.delta,
            "conversion": params.conversion or Conversion.IMPROVED,
        }
        z = params.noise_multiplier
        if params.target_epsilon is not None:
            z = self.solve_noise(target_epsilon=params.target_epsilon, **schedule, params=params)
        claim = self.schedule_claim(**schedule, noise_multiplier=z, params=params)
        lines = [f"mechanism: {self.name}", *describe_claim(claim)]
        if params.target_epsilon is None:
            return Accounted(tuple(lines), claim.epsilon)
        lines.append(f"noise multiplier for target epsilon {params.target_epsilon:g}:")
        return Accounted(tuple(lines), z)

    def solve_noise(self, *, params: CdpEpsilonParams, **schedule: Any) -> float:
        return noise_multiplier_for_epsilon(**schedule)

    def schedule_claim(self, *, params: CdpEpsilonParams, **schedule: Any) -> PrivacyClaim:
        return cdp_claim(**schedule)

    def claim(self, cell: CellConfig, data: CellData, trained: Trained) -> PrivacyClaim:
        n_train = len(data.train[0])
        run = ran_dp(trained, n_train=n_train, cell=cell)
        claim = cdp_claim(
            n_train=n_train,
            batch_size=cell.profile.batch_size,
            epochs=cell.profile.epochs,
            noise_multiplier=run.noise_multiplier,
            delta=self.delta(cell, n_train),
            conversion=self.conversion(cell),
        )
        return with_extra(claim, run_facts(trained))


def ran_dp(trained: Trained, *, n_train: int, cell: CellConfig) -> DPRun:
    """The DP run record of ``trained``, which must have run the releases the accountant counts."""
    run = trained.history.dp
    if run is None:
        raise RuntimeError("the training loop recorded no DP run; the claim would be wrong")
    expected = dp_sgd_steps(
        n_train=n_train, batch_size=cell.profile.batch_size, epochs=cell.profile.epochs
    )
    if run.steps != expected:
        raise RuntimeError(
            f"training ran {run.steps!r} noisy steps but the accountant counts {expected}; "
            "the claim would be wrong"
        )
    return run


def run_facts(trained: Trained) -> dict[str, float | str]:
    """What the row's privacy notes show about how the run was trained, in a fixed order."""
    run = trained.history.dp
    facts: dict[str, float | str] = {}
    if run is not None:
        facts["clip_norm"] = run.clip_norm
        facts.update(microbatch_notes(run.clip_norm, run.microbatch))  # nothing at k = 1
    facts.update(trained.notes)
    if run is not None:
        facts["mean_batch_size"] = run.mean_batch_size
        facts["grad_sample_mode"] = run.grad_sample_mode.value
        if run.batch_term is not None:
            facts.update(run.batch_term.facts())
    return facts
