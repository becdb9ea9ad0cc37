"""The interface every privacy mechanism implements, and the data a cell hands it."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from attacks.threat import ReleaseKind
from audit.config import CellConfig
from audit.options import AccountingParams, MechanismOptions, NoOptions
from audit.privacy.claim import PrivacyClaim
from audit.privacy.noise_calibration import MAX_NOISE_MULTIPLIER, MIN_NOISE_MULTIPLIER
from dpvae_core.progress import ProgressFactory
from dpvae_core.records import Modality, record_modality
from dpvae_core.seeding import Purpose, derive_seed
from models.dp import AuditHook
from models.training import Pair, TrainHistory, VAETrainSettings, train_vae
from models.vae import ConditionalConvVAE

if TYPE_CHECKING:
    from audit.empirical.local import LocalAudit


@dataclass(frozen=True)
class CellData:
    """The real (unperturbed) splits of one cell as tensors: x (N, C, H, W) in [0, 1] or series
    (N, T, F) in [-1, 1], y (N,); ``notes``: how the data were prepared, for every row.

    ``train_index`` and ``test_index``: each record's row in the dataset (N,), so that a cell's
    records can be found again without recomputing the split; None for data not cut from a
    dataset (tests). ``attack_members`` / ``attack_nonmembers``: D_atk's positions in D_train
    and D_test where its membership was drawn by independent coins
    (:func:`audit.cell.membership.cell_data`); None for a balanced D_atk drawn when attacked."""

    train: Pair
    val: Pair
    test: Pair
    num_classes: int
    n_total: int
    notes: Mapping[str, str] = field(default_factory=dict)
    train_index: np.ndarray | None = None
    test_index: np.ndarray | None = None
    attack_members: np.ndarray | None = None
    attack_nonmembers: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.train[0].shape[1:])


@dataclass(frozen=True)
class DataFacts:
    """What option checks need to know of the loaded data: one record's shape ((C, H, W) or
    (T, F)), |D_train| after the ``max_train`` cap (the smallest over the seeds) and the epochs."""

    record_shape: tuple[int, ...]
    n_train: int
    epochs: int


@dataclass(frozen=True)
class Prepared:
    """What the target VAE is trained and validated on, and what the mechanism did to get it."""

    train: Pair
    val: Pair
    notes: dict[str, float | str] = field(default_factory=dict)


@dataclass(frozen=True)
class Trained:
    """What training the target VAE did: its loss history (with the DP loop's frozen
    :class:`models.dp.DPRun`, if any) and how the mechanism chose its settings
    (``notes``, e.g. where the clip norm came from), both read by the claim."""

    history: TrainHistory
    notes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Accounted:
    """What ``benchmark.py epsilon`` prints: how the value was computed, then the bare value
    (epsilon, or the noise multiplier that reaches a target epsilon)."""

    lines: tuple[str, ...]
    value: float


def describe_claim(claim: PrivacyClaim) -> list[str]:
    """The lines that say how ``claim`` was computed, epsilon last."""
    lines = [
        f"method: {claim.method} (accountant: {claim.accountant})",
        f"delta: {claim.delta:.6g}",
    ]
    lines += [
        f"{key}: {value:.6g}" if isinstance(value, float) else f"{key}: {value}"
        for key, value in claim.extra.items()
    ]
    lines.append(f"epsilon: {claim.epsilon:.6g}")
    return lines


@dataclass(frozen=True)
class Context:
    """Run-time facts a mechanism may need that are not part of the cell's identity.

    ``audit_hook``: AUDIT/TEST ONLY (:mod:`audit.empirical.one_run`): a DP-SGD mechanism's
    ``train`` hands it to its training loop (:class:`models.dp.AuditHook`); None in every real
    cell.
    """

    device: str
    progress: ProgressFactory
    audit_hook: AuditHook | None = None


class Mechanism(ABC):
    """A privacy mechanism: how it perturbs data, how the target VAE trains, what it claims.

    A mechanism owns what every reader knows of it, read through the registry
    (:func:`audit.mechanisms.get_mechanism`), so that no other module names it: its ``name``
    (``--mech``, the rows' ``mech``), ``param_name`` (the grid's parameter, e.g.
    ``noise_multiplier``) with its symbol and labels (:attr:`param_symbol`, :attr:`param_label`,
    :attr:`param_description`), ``default_grid``, ``options_type`` (their
    :class:`audit.options.MechanismOptions`, from which the command line makes one flag per
    option), its release, and its empirical audits (:attr:`one_run_audit`,
    :meth:`local_audits`, :attr:`pure_dp`). The defaults of ``prepare`` and ``train`` are the
    non-private path.
    ``per_example_gradients``: whether ``train`` needs Opacus's per-example gradients of the
    target VAE (DP-Adam); without, the VAE is built in its fast implementation
    (:meth:`models.factory.ModelFamily.target_vae`). ``release``: what the mechanism publishes of
    the trained VAE (:class:`~attacks.threat.ReleaseKind`), which decides the attacks its cells
    run (:mod:`audit.attack_plan`). The default, the whole VAE, is what none, cdp,
    cdp-termwise, ldp and vae-ldp release; a mechanism that publishes less (dp2vae: the decoder)
    overrides it.
    """

    name: ClassVar[str]
    param_name: ClassVar[str]
    default_grid: ClassVar[tuple[float, ...]]
    #: The parameter's symbol in a setting's label (``z`` of ``z=0.5``; the report, the gate).
    param_symbol: ClassVar[str] = ""
    #: The parameter as the report's axes and legends name it (``noise multiplier z``).
    param_label: ClassVar[str] = ""
    #: What the parameter is, in a sentence (``DP-Adam noise multiplier z``): the report's
    #: image grids say what their rows are, ``benchmark.py audit --help`` what ``--grid`` is.
    param_description: ClassVar[str] = ""
    #: Whether the claim is pure epsilon-DP (delta 0), so that no ``--delta`` applies to it.
    pure_dp: ClassVar[bool] = False
    #: What ``benchmark.py epsilon`` accounts (its ``--mech`` help; with ``accounting_type``).
    accounting_help: ClassVar[str] = ""
    options_type: ClassVar[type[MechanismOptions]] = NoOptions
    accounting_type: ClassVar[type[AccountingParams] | None] = None
    per_example_gradients: ClassVar[bool] = False
    release: ClassVar[ReleaseKind] = ReleaseKind.WHOLE_VAE
    #: The record modalities the mechanism is defined for; the sweep refuses the others before
    #: any cell runs (:meth:`check_modality`).
    modalities: ClassVar[frozenset[Modality]] = frozenset(Modality)
    #: Why the others are refused, for the error line.
    modality_reason: ClassVar[str] = ""
    #: The values the parameter may take (:meth:`validate_value`): the range in which the
    #: accounting and the noise are computed without overflow (Opacus's RDP fails past 1e300 and
    #: divides by zero near 1e-300; float32 noise overflows past 3.4e38). The default, that of
    #: the noise multiplier calibration (:mod:`audit.privacy.noise_calibration`), spans epsilons
    #: from millions to zero for every mechanism here.
    param_range: ClassVar[tuple[float, float]] = (MIN_NOISE_MULTIPLIER, MAX_NOISE_MULTIPLIER)

    def check_modality(self, record_shape: tuple[int, ...]) -> None:
        """Refuse records of a modality the mechanism is not defined for, in one line."""
        modality = record_modality(record_shape)
        if modality not in self.modalities:
            allowed = ", ".join(sorted(m.value for m in self.modalities))
            raise ValueError(
                f"{self.name} is defined for {allowed} records, not for {modality.value}"
                f"{f' ({self.modality_reason})' if self.modality_reason else ''}"
            )

    def validate_value(self, value: float | None) -> None:
        low, high = self.param_range
        if value is None or not math.isfinite(value) or value <= 0:
            raise ValueError(
                f"{self.name}: {self.param_name} must be a positive finite number, got {value!r}"
            )
        if not low <= value <= high:
            raise ValueError(
                f"{self.name}: {self.param_name} must lie in [{low:g}, {high:g}] (where its "
                f"accounting and noise are computed without overflow), got {value!r}"
            )

    def dp_arithmetic(self, precision: str) -> str:
        """The arithmetic ``train``'s DP per-example gradients run in for a cell of ``precision``
        (float32: none, or those that stay float32 under every flag). A cell whose value is not
        float32 holds it in its identity (:attr:`audit.config.CellConfig.dp_precision`)."""
        return "float32"

    def default_grid_for(self, modality: str) -> tuple[float, ...]:
        """The default grid for records of ``modality`` (by default the same for all)."""
        return self.default_grid

    def options_of(self, cell: CellConfig) -> Any:
        """The cell's typed options (the defaults when it has none), of :attr:`options_type`."""
        return self.typed(self.options_type() if cell.mech_options is None else cell.mech_options)

    def typed(self, options: MechanismOptions) -> Any:
        """``options`` if they are this mechanism's :attr:`options_type` (TypeError otherwise)."""
        if not isinstance(options, self.options_type):
            raise TypeError(
                f"{self.name} needs {self.options_type.__name__}, got {type(options).__name__}"
            )
        return options

    def typed_params(self, params: AccountingParams) -> Any:
        """``params`` if they are this mechanism's :attr:`accounting_type` (TypeError otherwise)."""
        if self.accounting_type is None or not isinstance(params, self.accounting_type):
            raise TypeError(f"{self.name} cannot account {type(params).__name__}")
        return params

    def check_options(
        self,
        options: MechanismOptions,
        *,
        grid: Sequence[float],
        batch_size: int,
        data: DataFacts | None = None,
    ) -> None:
        """The one check of this mechanism's options before any cell runs: their type, each grid
        value, the options against the batch size, and, given the loaded data's facts, the
        records' modality and the options against them. A ValueError quotes the bad value."""
        options = self.typed(options)
        for value in grid:
            self.validate_value(value)
        if data is not None:
            self.check_modality(data.record_shape)
        self._check_options(options, batch_size=batch_size, data=data)

    def _check_options(self, options: Any, *, batch_size: int, data: DataFacts | None) -> None:
        """A mechanism's own checks of :meth:`check_options` (``data`` None: before the data is
        loaded). The default accepts all."""
        return None

    def prepare(self, cell: CellConfig, data: CellData, ctx: Context) -> Prepared:
        """Training and validation data for the target VAE (identity unless local DP)."""
        return Prepared(train=data.train, val=data.val)

    def canary_sample_rate(self, cell: CellConfig, n_train: int) -> float | None:
        """The per-step chance that a DP step samples one given record of an ``n_train``-record
        D_train (the rate at which the one-run audit samples a gradient canary), or None when
        training is no DP-SGD loop that takes ``ctx.audit_hook`` (then the one-run audit does
        not apply). A canary sampled at a record's rate, or less, is a record the claim covers.
        """
        return None

    @property
    def one_run_audit(self) -> bool:
        """Whether the one-run audit (:mod:`audit.empirical.one_run`, with ``--runs`` the
        multi-run one) applies: training is a DP-SGD loop that takes the canary hook, which a
        mechanism says by overriding :meth:`canary_sample_rate`."""
        return type(self).canary_sample_rate is not Mechanism.canary_sample_rate

    @property
    def audited(self) -> bool:
        """Whether the mechanism has an empirical audit (``benchmark.py audit``,
        ``--canary-audit``): the one-run audit or its own :meth:`local_audits`."""
        return self.one_run_audit or type(self).local_audits is not Mechanism.local_audits

    def local_audits(
        self,
        cell: CellConfig,
        data: CellData,
        *,
        draws: int,
        seed: int,
        delta: float | None = None,
        every: bool = False,
    ) -> tuple[LocalAudit, ...]:
        """Black-box audits of the mechanism's local randomizer on worst-case inputs
        (:mod:`audit.empirical.local`), M = ``draws`` draws per input, the last one against the
        claim of the ``epsilon`` column (at ``delta``; None: the claim's own). ``every``: also
        the audits against other claims, which ``benchmark.py audit`` prints. Empty where the
        mechanism has no local randomizer (the default)."""
        return ()

    def train(
        self, model: ConditionalConvVAE, prepared: Prepared, cell: CellConfig, ctx: Context
    ) -> Trained:
        """Train ``model`` in place; the default is non-private Adam."""
        settings = vae_settings(cell, ctx)
        history = train_vae(model, prepared.train, prepared.val, settings, progress=ctx.progress)
        return Trained(history=history)

    def account(self, params: AccountingParams) -> Accounted:
        """Account the mechanism from ``params`` alone (``benchmark.py epsilon``)."""
        raise ValueError(f"mechanism {self.name!r} has no accounting on demand")

    @abstractmethod
    def claim(self, cell: CellConfig, data: CellData, trained: Trained) -> PrivacyClaim:
        """The privacy this cell claims (epsilon, delta and how they were computed)."""


def training_seed(cell: CellConfig) -> int:
    """The target's training seed (shuffling or Poisson coins, reparameterisation noise,
    DP2-VAE's subsets): keyed by the cell's configuration, as DP noise is, so no two cells of a
    seed share these draws (their D_train and D_atk are shared, keyed by the seed alone). A
    mixed-precision cell shares its float32 twin's draws, and a new cache schema changes none
    (:attr:`CellConfig.training_key`)."""
    return derive_seed(cell.seed, Purpose.TRAIN, cell.training_key)


def vae_settings(cell: CellConfig, ctx: Context) -> VAETrainSettings:
    p = cell.profile
    return VAETrainSettings(
        epochs=p.epochs,
        batch_size=p.batch_size,
        lr=p.lr,
        beta=p.beta,
        seed=training_seed(cell),
        device=ctx.device,
        precision=cell.precision,
    )
