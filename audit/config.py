"""Frozen, validated configuration: profiles, one sweep, and one grid cell (hashed canonically)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from enum import Enum
from pathlib import Path
from typing import Any

from audit.attack_plan import CELL_DEFAULT_ATTACKS, calibrates, check_requested
from audit.datasets import check_dataset_name, resolve_window_stride
from audit.options import MechanismOptions
from audit.profiles import Profile, ProfileName
from dpvae_core.digests import json_digest
from dpvae_core.precision import parse_precision
from dpvae_core.validation import AUTO, check_device_name, parse_enum

#: The version of the cell cache: what a cell's canonical config holds and how it is hashed.
#: It is in every cell's config (so in its hash) and in ``OUT/run.json``; cells and runs of
#: another version are refused with one line (:func:`check_cache_schema`). Raise it when a change
#: alters what a cell's config means; no compatibility branch keeps old hashes alive.
#: 3 (issue 30, item 7): ``calibrated`` and ``lira-offline`` rows of a private cell read
#: reference models trained by the cell's mechanism (before: non-private Adam, now the
#: ``-nonprivate`` variants).
#: 4 (issue 40): ``run.json`` records the SHA-256 of every stored file and is sealed by its own
#: (:mod:`audit.results.integrity`); a release attack's cell hash digests its inputs and its
#: ``run.json`` records them.
CACHE_SCHEMA = 4


#: The cache schema whose config hash first keyed a target's training draws (issue 30, at schema
#: 3). :attr:`CellConfig.training_key` digests the identity with it, whatever the schema now, so a
#: new schema redraws no training (as :attr:`CellConfig.noise_key` redraws no noise).
TRAINING_DRAWS_SCHEMA = 3


#: {mechanism name: the arithmetic its training's DP per-example gradients run in for a cell of a
#: given precision}, declared by the registry as it registers each mechanism
#: (:meth:`audit.mechanisms.mechanism.Mechanism.dp_arithmetic`; this module sits below it).
_DP_ARITHMETIC: dict[str, Callable[[str], str]] = {}


def declare_dp_arithmetic(mech: str, arithmetic: Callable[[str], str] | None) -> None:
    """Record (or with None, forget) how a registered mechanism's DP per-example gradients
    follow a cell's precision (:attr:`CellConfig.dp_precision`)."""
    if arithmetic is None:
        _DP_ARITHMETIC.pop(mech, None)
    else:
        _DP_ARITHMETIC[mech] = arithmetic


#: The most cells ``--workers`` runs at a time on one machine.
MAX_WORKERS = 64


class ExecutorName(str, Enum):
    LOCAL = "local"
    RAY = "ray"


@dataclass(frozen=True)
class RaySettings:
    """``address``: a running cluster (``ray://host:10001``, ``auto``) or None to start a
    local Ray instance; ``cell_cpus``/``cell_gpus``: resources each cell's task requests
    (torch in the task uses ``cell_cpus`` threads); ``max_retries``: reruns of a task whose
    worker died (Ray's system-failure retries; an exception raised by the cell's own code is not
    retried)."""

    address: str | None = None
    cell_cpus: float = 1.0
    cell_gpus: float = 0.0
    max_retries: int = 2

    def __post_init__(self) -> None:
        if not (math.isfinite(self.cell_cpus) and self.cell_cpus > 0):
            raise ValueError(f"--cell-cpus must be a positive number, got {self.cell_cpus!r}")
        if not (math.isfinite(self.cell_gpus) and self.cell_gpus >= 0):
            raise ValueError(f"--cell-gpus must be a non-negative number, got {self.cell_gpus!r}")
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(
                f"max_retries must be a non-negative integer, got {self.max_retries!r}"
            )


def check_cache_schema(config: Mapping[str, Any], where: object) -> None:
    """Refuse ``config`` (a cell's canonical config or a run's settings, read from ``where``)
    unless it was written by this :data:`CACHE_SCHEMA`, in one line that says what to do."""
    found = config.get("cache_schema", 1)  # cells and runs before the version existed: 1
    if found != CACHE_SCHEMA:
        raise ValueError(
            f"{where} was written by cache schema {found} and this code reads {CACHE_SCHEMA}; "
            "rerun its sweep into a fresh --out (or delete that directory first)"
        )


#: Cell options that say how the run and its data were set up (not a mechanism's): the profile's
#: name, a windowed dataset's stride, the data's content hash, the precision, and ``--tune``'s
#: trials and seed (:mod:`audit.cell.tuning`; set only on tuned cells, so untuned hashes stay).
RUN_OPTIONS = (
    "profile_name",
    "window_stride",
    "data_sha256",
    "precision",
    "tune_trials",
    "tune_seed",
)

#: The most trials ``--tune`` takes: each trains a VAE and a classifier, about a cell's work, so a
#: thousand trials make a sweep about a thousand times longer.
MAX_TUNE_TRIALS = 1000


#: The settings every cell's identity holds; any other is in it only where not at its default.
IDENTITY_FIELDS = ("dataset", "mech", "param_name", "param_value", "seed", "profile", "options")


def _set_fields(obj: Any, skip: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """``obj``'s dataclass fields (not in ``skip``) as a dict, leaving out those at their default
    (a zero ``reference_models`` counts as its default, None: no reference models)."""
    out = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        if f.name in skip or (f.default is not MISSING and value == f.default):
            continue
        if f.name == "reference_models" and not value:
            continue
        out[f.name] = value
    return out


@dataclass(frozen=True)
class CellConfig:
    """Everything that determines one grid cell's result; its hash names the cell directory.

    ``mech``: a registered mechanism's name (:func:`audit.mechanisms.make_cell` checks it).
    ``options``: the run's (name, value) facts of :data:`RUN_OPTIONS`; ``mech_options``: the
    mechanism's typed options (None: all defaults). Both go into the hash as one ``options``
    mapping (run facts and the options set).
    ``attacks``: the registered attacks the cell runs, in the sweep's order
    (:func:`audit.attack_plan.plan_attacks`).
    ``audit``: run the mechanism's empirical audit in the cell (``--canary-audit``;
    :mod:`audit.empirical.cell_audit`); its result is in the cell's rows.
    ``untuned``: set on a tuned cell as it runs (:func:`audit.cell.tuning.tuned_cell`): the
    profile it was planned with, before ``--tune`` chose its learning rates, batch sizes and
    classifier epochs (``profile``). The identity, so the hash and the keys of the draws, is the
    planned cell's: the chosen values follow from it (the tuning is seeded and cached).
    """

    dataset: str
    mech: str
    param_name: str
    param_value: float | None
    seed: int
    profile: Profile
    options: tuple[tuple[str, Any], ...] = ()
    mech_options: MechanismOptions | None = None
    attacks: tuple[str, ...] = CELL_DEFAULT_ATTACKS
    audit: bool = False
    untuned: Profile | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.mech, str):
            raise TypeError(f"mech must be a mechanism's name, got {self.mech!r}")
        unknown = sorted({k for k, _ in self.options} - set(RUN_OPTIONS))
        if unknown:
            raise ValueError(
                f"cell options {unknown} are not run options ({', '.join(RUN_OPTIONS)}); "
                "a mechanism's options go in mech_options"
            )

    def identity(self) -> dict[str, Any]:
        """What the cell computes, as plain JSON data, whatever the cache schema: the grid point,
        the profile, the run facts and the mechanism's options (one ``options`` mapping), and
        each further knob that differs from its default. A knob at its default is left out (of
        the profile too), so that adding a knob never changes the identity, or the noise
        (:attr:`noise_key`), of a cell that does not use it. ``reference_models`` counts as the
        models the cell really trains (:attr:`reference_models`: none where no attack of the
        cell calibrates, so that R never splits cells it cannot change).
        """
        body = {name: getattr(self, name) for name in IDENTITY_FIELDS}
        body["options"] = {**dict(self.options), **self.mech_settings()}
        planned = self.untuned or self.profile  # a tuned cell is the cell it was planned as
        body["profile"] = _set_fields(replace(planned, reference_models=self.reference_models))
        body.update(_set_fields(self, skip={*IDENTITY_FIELDS, "mech_options", "untuned"}))
        if "attacks" in body:
            body["attacks"] = list(self.attacks)
        if self.dp_precision is not None:
            body["dp_precision"] = self.dp_precision
        return body

    def canonical(self) -> dict[str, Any]:
        """The cell's :meth:`identity` with the :data:`CACHE_SCHEMA`: what a cell directory's
        ``config.json`` holds and :attr:`config_hash` digests."""
        return {**self.identity(), "cache_schema": CACHE_SCHEMA}

    @property
    def noise_key(self) -> str:
        """What keys the cell's noise draws (DP noise, local perturbations, term-wise partitions):
        16 hex digits of its :meth:`identity`, so that two cells never share a draw and a new
        cache schema redraws nothing. A mixed-precision cell takes its float32 twin's
        (:attr:`draws`)."""
        return json_digest(self.draws.identity())

    @property
    def training_key(self) -> str:
        """What keys the target's training draws (shuffling or Poisson coins, reparameterisation
        noise, DP2-VAE's subsets): the digest of the float32 twin's identity with
        :data:`TRAINING_DRAWS_SCHEMA`, the config hash those draws were keyed by when they were
        first keyed by the cell. A new :data:`CACHE_SCHEMA` (a change of what is stored) changes
        :attr:`config_hash` but redraws no training."""
        return json_digest({**self.draws.identity(), "cache_schema": TRAINING_DRAWS_SCHEMA})

    @property
    def precision(self) -> str:
        """The arithmetic of the cell's non-private computations (:mod:`dpvae_core.precision`):
        the ``precision`` run option, float32 where unset."""
        return str(self.option("precision", "float32"))

    @property
    def dp_precision(self) -> str | None:
        """The arithmetic of the cell's DP per-example gradients where that is not float32
        (DP-Adam's book-keeping in a bf16 cell: :func:`models.dp.engine.dp_precision`), else
        None. Part of the identity, so that such a cell shares no hash (nor reference models,
        nor tuning) with those cached before c2c07a8, which ran DP-Adam in float32 under the
        same config; float32 cells, and the mechanisms whose DP stays float32, keep theirs.
        The draws stay the float32 twin's (:attr:`draws`). A mixed-precision cell's mechanism
        must be registered (:mod:`audit.mechanisms` imported)."""
        if self.precision == "float32":
            return None
        if self.mech not in _DP_ARITHMETIC:
            raise ValueError(
                f"mechanism {self.mech!r} is not registered: a {self.precision} cell's identity "
                "needs its DP arithmetic (import audit.mechanisms first)"
            )
        arithmetic = _DP_ARITHMETIC[self.mech](self.precision)
        return None if arithmetic == "float32" else arithmetic

    @property
    def draws(self) -> CellConfig:
        """The cell whose random draws this cell makes: itself in float32, else its float32
        twin (the ``precision`` option removed). Precision changes the arithmetic, not what is
        drawn, so a bf16 cell and its float32 twin share noise, shuffling and seeds, and their
        rows compare paired."""
        if "precision" not in dict(self.options):
            return self
        return replace(self, options=tuple((k, v) for k, v in self.options if k != "precision"))

    @property
    def reference_models(self) -> int:
        """R, the reference VAEs this cell's attacker trains: the profile's, where an attack of
        the cell calibrates (:func:`~audit.attack_plan.calibrates`), else 0."""
        return (self.profile.reference_models or 0) if calibrates(self.attacks) else 0

    def mech_settings(self) -> dict[str, Any]:
        """The mechanism options set, as JSON values."""
        return {} if self.mech_options is None else self.mech_options.canonical()

    @property
    def config_hash(self) -> str:
        return json_digest(self.canonical())

    def option(self, name: str, default: Any = None) -> Any:
        """A run option (:data:`RUN_OPTIONS`) of the cell."""
        if name not in RUN_OPTIONS:
            raise KeyError(f"{name!r} is not a run option; read mech_options for a mechanism's")
        return dict(self.options).get(name, default)


@dataclass(frozen=True)
class SweepConfig:
    """One invocation of the benchmark: which cells to run and where results go.

    ``window_stride`` (windowed datasets only, e.g. motionsense): samples between the starts of
    consecutive windows; None is the dataset's default. The effective stride is part of every
    cell's options (:meth:`data_options`), so it changes the cells' hashes.
    ``attacks`` (``--attack``): the attacks every cell runs, registered names of the sweep's
    attack list (:func:`attacks.registry.sweep_attacks`), stored in the sweep's order;
    None runs every attack of that list each mechanism's release allows. Whether the requested
    ones apply to the selected mechanisms is checked with the cells
    (:func:`audit.sweep.plan.build_cells`).
    """

    dataset: str
    mechs: tuple[str, ...]
    profile_name: ProfileName
    profile: Profile
    seeds: tuple[int, ...]
    out: Path
    device: str = "cpu"  # or "auto": resolved by run_sweep (audit.sweep.device_choice)
    data_home: Path | None = None
    grid: tuple[float, ...] | None = None
    overwrite: bool = False
    progress: bool = True
    mech_options: tuple[tuple[str, MechanismOptions], ...] = field(default=())
    window_stride: int | None = None
    executor: ExecutorName = ExecutorName.LOCAL
    ray: RaySettings | None = None
    report: bool = True  # write OUT/report at the end (no cell's hash depends on it)
    attacks: tuple[str, ...] | None = None
    audit: bool = False  # --canary-audit: each private cell runs its mechanism's empirical audit
    precision: str = "float32"  # --precision: autocast of the non-private computations; "auto"
    # is resolved by run_sweep before any cell is built (audit.sweep.device_choice)
    tune: int | None = None  # --tune N: each cell's hyperparameters chosen over N trials on D_val
    tune_seed: int = 0  # --tune-seed: the tuning's sampler seed (with each cell's root seed)
    workers: int | None = None  # --workers: cells at a time with --executor local (None: auto,
    # resolved by run_sweep: audit.sweep.device_choice.resolve_workers); no cell's hash has it

    def __post_init__(self) -> None:
        check_dataset_name(self.dataset)
        if self.attacks is not None:
            object.__setattr__(self, "attacks", check_requested(self.attacks))
        object.__setattr__(self, "executor", parse_enum(ExecutorName, self.executor, "executor"))
        if self.ray is not None and self.executor is not ExecutorName.RAY:
            raise ValueError(
                "--ray-address, --cell-cpus and --cell-gpus apply to --executor ray only"
            )
        if self.workers is not None:
            if self.executor is not ExecutorName.LOCAL:
                raise ValueError("--workers applies to --executor local only (Ray: --cell-gpus)")
            if isinstance(self.workers, bool) or not isinstance(self.workers, int):
                raise ValueError(
                    f"--workers must be a positive integer or auto, got {self.workers!r}"
                )
            if not 1 <= self.workers <= MAX_WORKERS:
                raise ValueError(
                    f"--workers must be between 1 and {MAX_WORKERS} (or auto), got {self.workers}"
                )
        resolve_window_stride(self.dataset, self.window_stride)
        if not self.seeds:
            raise ValueError("at least one seed is required")
        for seed in self.seeds:
            if not isinstance(seed, int) or seed < 0:
                raise ValueError(f"seeds must be non-negative integers, got {seed!r}")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct, got {list(self.seeds)}")
        check_device_name(self.device, auto=True)
        if self.precision != AUTO:
            object.__setattr__(self, "precision", parse_precision(self.precision).value)
        _check_tune(self.tune, self.tune_seed)
        if self.grid is not None:
            if not self.grid:
                raise ValueError("--grid needs at least one value")
            for value in self.grid:
                if not math.isfinite(value) or value <= 0:
                    raise ValueError(f"grid values must be positive finite numbers, got {value!r}")

    def options_for(self, mech: str) -> MechanismOptions | None:
        """The typed options of ``mech`` in this sweep (None: all defaults)."""
        return dict(self.mech_options).get(mech)

    def data_options(self) -> tuple[tuple[str, Any], ...]:
        """How the dataset is cut into records, as cell options: ``(("window_stride", s),)`` for
        a windowed dataset (the effective stride, default included), else nothing."""
        stride = resolve_window_stride(self.dataset, self.window_stride)
        return () if stride is None else (("window_stride", stride),)

    def precision_options(self) -> tuple[tuple[str, Any], ...]:
        """The precision as a cell option: ``(("precision", "bf16"),)``, nothing for float32
        (so float32 cells keep the hashes they had before the option existed). ``auto`` is
        resolved before any cell is built, and never stored in one."""
        if self.precision == AUTO:
            raise ValueError("precision 'auto' must be resolved before cells are built")
        return () if self.precision == "float32" else (("precision", self.precision),)

    def tune_options(self) -> tuple[tuple[str, Any], ...]:
        """``--tune`` as cell options: its trials and seed, nothing where the sweep does not tune
        (so untuned cells keep their hashes)."""
        if self.tune is None:
            return ()
        return (("tune_trials", self.tune), ("tune_seed", self.tune_seed))


def _check_tune(trials: int | None, seed: int) -> None:
    """``--tune``: a whole number of trials from 1 to :data:`MAX_TUNE_TRIALS` (None: no
    tuning); ``--tune-seed``: a non-negative integer, given only with ``--tune``."""
    if trials is None:
        if seed != 0:
            raise ValueError(f"--tune-seed {seed!r} applies with --tune only; add --tune N")
        return
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"--tune must be a positive integer (trials), got {trials!r}")
    if trials > MAX_TUNE_TRIALS:
        raise ValueError(
            f"--tune must be at most {MAX_TUNE_TRIALS} trials (each trains a VAE and a "
            f"classifier, as a cell does), got {trials!r}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"--tune-seed must be a non-negative integer, got {seed!r}")
