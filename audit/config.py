"""Frozen, validated configuration: profiles, one sweep, and one grid cell (hashed canonically)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from enum import Enum
from pathlib import Path
from typing import Any

from audit.attack_plan import CELL_DEFAULT_ATTACKS, calibrates, check_requested
from audit.datasets import check_dataset_name, resolve_window_stride
from audit.executors import ExecutorName, RaySettings
from audit.options import MechanismOptions
from dpvae_core.digests import json_digest
from dpvae_core.precision import parse_precision
from dpvae_core.validation import check_device_name, parse_enum
from models.factory import CLASSIFIERS


class MechanismName(str, Enum):
    NONE = "none"
    CDP = "cdp"
    CDP_TERMWISE = "cdp-termwise"
    LDP = "ldp"
    VAE_LDP = "vae-ldp"
    DP2VAE = "dp2vae"


class ProfileName(str, Enum):
    QUICK = "quick"
    STANDARD = "standard"
    PAPER = "paper"


@dataclass(frozen=True)
class Profile:
    """Every knob a profile sets; each can be overridden on the command line.

    ``max_train``: cap on |D_train| (None = the split's full training set); a small training set
    is what lets a VAE memorise, which is what the attack detects (see README).
    ``gen_records``: |D_gen|, the generated records the utility classifier trains on, independent
    of |D_train| (labels follow D_train's class shares; see :func:`models.generation.gen_labels`).
    None means |D_gen| = |D_train|; every profile sets it.
    ``reference_models``: R, the reference VAEs the attacker trains for the calibrated variants
    (:mod:`audit.reference_models`; quick 2, standard 4, paper 8); 0 or None trains none. A
    cell whose attacks do not calibrate is hashed with 0 (:meth:`CellConfig.canonical`).
    ``balanced_train``: the ``max_train`` cap takes records per class as evenly as the classes
    allow (:func:`audit.pipeline.balanced_subset`; LFW20 and LFW50: 10 per person) instead of
    in proportion to the class sizes. ``classifier``: the target classifier's kind
    (:data:`models.factory.CLASSIFIERS`; None: the modality's original one).
    ``membership_coins``: D_atk's candidates join D_train each on its own fair coin
    (:func:`audit.pipeline.membership_by_coins`), which the attack-based epsilon bound
    (``epsilon_lower_attack``) needs; False (the default, so left out of the hash) keeps the
    balanced D_atk, whose rows carry no such bound.
    """

    epochs: int
    batch_size: int
    lr: float
    latent_dim: int
    beta: float
    attack_samples: int
    attack_records: int | None
    classifier_epochs: int
    classifier_patience: int
    max_train: int | None
    gen_records: int | None = None
    reference_models: int | None = None
    balanced_train: bool = False
    classifier: str | None = None
    membership_coins: bool = False

    def __post_init__(self) -> None:
        for name in (
            "epochs",
            "batch_size",
            "latent_dim",
            "attack_samples",
            "classifier_epochs",
            "classifier_patience",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"{name.replace('_', '-')} must be a positive integer, got {value!r}"
                )
        for name in ("attack_records", "max_train", "gen_records"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 2):
                raise ValueError(f"{name.replace('_', '-')} must be an integer >= 2, got {value!r}")
        r = self.reference_models
        if r is not None and (not isinstance(r, int) or isinstance(r, bool) or r < 0):
            raise ValueError(f"reference-models must be an integer >= 0, got {r!r}")
        if not isinstance(self.membership_coins, bool):
            raise ValueError(f"membership-coins must be a bool, got {self.membership_coins!r}")
        if not (isinstance(self.lr, float | int) and math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a positive finite number, got {self.lr!r}")
        if not isinstance(self.balanced_train, bool):
            raise ValueError(f"balanced_train must be True or False, got {self.balanced_train!r}")
        if self.classifier is not None and self.classifier not in CLASSIFIERS:
            raise ValueError(
                f"unknown classifier {self.classifier!r}; known: {', '.join(sorted(CLASSIFIERS))}"
            )
        if not (math.isfinite(self.beta) and self.beta >= 0):
            raise ValueError(f"beta must be a non-negative finite number, got {self.beta!r}")


#: gen_records (|D_gen|) per profile. Measured with benchmarks/bench_gen_records.py: the quick
#: baseline (mech none, seed 0, |D_train| = 50) trained once, the classifier trained on n of its
#: generated records, accuracy on the real D_test (chance: digits 0.1, lfw-subset 0.5):
#:   n           50     200    500    1000   2000
#:   digits      0.096  0.630  0.665  0.704  0.717   (classifier on the 50 real D_train: 0.541)
#:   lfw-subset  0.850  0.867  0.833  0.800  0.800   (real: 0.800; n_test = 60, sd ~0.05)
#: |D_gen| = |D_train| = 50 (the old rule) leaves digits at chance; 1000 reaches within 0.02 of
#: 2000 at half the classifier's cost, and lfw-subset (2 classes) is flat from 50 on within its
#: test-set noise, so quick and standard use 1000 (lfw-subset's quick profile draws 200: CI's
#: budget, ``LFW_SUBSET_OVERRIDES`` in ``audit/datasets/lfw.py``). paper (|D_train| in the
#: hundreds to thousands) uses 2000, not measured at that scale.
PROFILES: dict[ProfileName, Profile] = {
    ProfileName.QUICK: Profile(
        epochs=40,
        batch_size=16,
        lr=2e-3,
        latent_dim=16,
        beta=1.0,
        # attack_samples (N of the reconstruction attack): measured on LFW20, seed 0, 40-epoch
        # VAEs (benchmarks/study_attack_samples.py, docs/attack-studies.md, issue 27): MI AP at
        # N = 5, 10, 20, 50, 100 against N = 300 on the same records (the noise of a smaller N
        # is a prefix of a larger N's). Quick architecture, non-private, 200 + 200 records:
        # MSE 0.893 / 0.895 / 0.895 / 0.895 / 0.895 vs 0.895 (bootstrap SE 0.021), SSIM 0.919 /
        # 0.920 / 0.919 / 0.920 / 0.919 vs 0.919 (SE 0.013); latent 100 and cdp z = 0.5 on
        # 100 + 100 records: every |difference| <= 0.010 against SEs of 0.036-0.042 (at N = 20
        # <= 0.004 non-private, 0.008 DP). Monte Carlo noise is <= 1.5 % of the scores' variance
        # across records at N = 5, <= 0.4 % at N = 20; the time is linear in N (N = 20: 0.08 of
        # N = 300). So every N >= 5 here is within MI AP's sampling noise of N = 300.
        attack_samples=20,
        attack_records=None,
        classifier_epochs=20,
        classifier_patience=5,
        max_train=50,
        gen_records=1000,
        # R: measured on digits, quick, mech none, seeds 0-4 (docs/attack-studies.md, MI AP
        # mean, latent search calibrated / likelihood calibrated / lira-offline): R = 2 0.689 /
        # 0.676 / 0.676, R = 4 0.699 / 0.709 / 0.716, R = 8 0.704 / 0.708 / 0.749; reference
        # training 0.28 / 0.55 / 1.31 x the cell's own seconds. Issue 30 item 7, this code,
        # seeds 0 / 1, MI AP latent search raw / calibrated, likelihood raw / calibrated /
        # lira-offline: R = 2: 0.648 / 0.686, 0.622 / 0.664 / 0.664 and 0.693 / 0.690, 0.634 /
        # 0.662 / 0.662 (cell 17-18 s); R = 4: 0.644 / 0.712, 0.619 / 0.699 / 0.673 and 0.715 /
        # 0.735, 0.641 / 0.692 / 0.711 (cell 21-24 s). So R = 2 under-reads the calibrated
        # variants by 0.01-0.05 (lira-offline pools one variance below 4 models) but, on this
        # quick model, not below raw (bar 0.690 vs 0.693); the raw variants stay candidates of
        # every worst case, so a weak calibration cannot hide a raw leak. R = 4 costs +25 % a
        # calibrating cell; CI's sweeps train no reference models at any R (lfw-subset quick
        # leaves 10 reference records, basicmotions 0: fewer than 20), so R = 4 would cost only
        # local quick runs and the test suite. Kept at 2 until the lead decides.
        reference_models=2,
    ),
    ProfileName.STANDARD: Profile(
        epochs=300,
        batch_size=16,
        lr=1e-3,
        latent_dim=100,
        beta=1.0,
        # N: the reconstruction attack alone would do with 20 (the quick profile's note), but
        # the profile's N is also latent search's Adam steps and the likelihood attack's
        # importance samples, which that study did not measure: kept at 100.
        attack_samples=100,
        attack_records=None,
        classifier_epochs=60,
        classifier_patience=8,
        max_train=50,
        gen_records=1000,
        reference_models=4,
    ),
    ProfileName.PAPER: Profile(
        epochs=1000,
        batch_size=32,
        lr=1e-3,
        latent_dim=100,
        beta=1.0,
        attack_samples=300,  # paper 003's N (Eq. 1); see the quick profile's note
        attack_records=2000,
        classifier_epochs=100,
        classifier_patience=10,
        max_train=None,
        gen_records=2000,
        reference_models=8,
    ),
}


#: Target-VAE epochs of series datasets (the LSTM VAE) where a profile's image setting is too
#: few. Measured on basicmotions, quick profile otherwise, mech none, seeds 0-2 (fused LSTM):
#: HAR-CNN accuracy on generated data (real D_test, chance 0.25) was 0.44 at 40 epochs (the
#: image quick setting), 0.47 at 100, 0.78 at 200, 0.79 at 300, 0.68 at 400 (one seed back at
#: chance), so the multitask VAE needs about 200 epochs before its class-latent samples carry the
#: classes. Standard (300) and paper (1000) train longer already (their series accuracy was not
#: measured here: standard also halves the learning rate).
SERIES_EPOCHS: dict[ProfileName, int] = {ProfileName.QUICK: 200}


def profile_for(name: ProfileName, modality: str) -> Profile:
    """The profile ``name`` for records of ``modality`` ('image' or 'series'): the image settings,
    with :data:`SERIES_EPOCHS` for series. The epochs end up in every cell's config (and hash)."""
    profile = PROFILES[ProfileName(name)]
    if modality == "series" and name in SERIES_EPOCHS:
        return replace(profile, epochs=SERIES_EPOCHS[ProfileName(name)])
    return profile


def profile_for_dataset(name: ProfileName, dataset: str) -> Profile:
    """The profile ``name`` for ``dataset``: :func:`profile_for` its modality, with |D_train|
    capped per class where the dataset declares it (``DatasetSpec.train_cap``: LFW20 and LFW50,
    10 records per person) instead of a fixed number; the paper profile keeps all of D_train;
    and the settings the dataset replaces in that profile (``DatasetSpec.profile_overrides``:
    LFW20's and LFW50's quick learning rate and classifier budget)."""
    from audit.datasets import SPECS, dataset_modality

    profile = profile_for(name, dataset_modality(dataset))
    spec = SPECS.get(dataset)
    if spec is None:
        return profile
    profile = replace(profile, **spec.overrides_for(ProfileName(name).value))
    cap = spec.train_cap
    if cap is None or profile.max_train is None:
        return profile
    return replace(profile, max_train=cap)


#: The version of the cell cache: what a cell's canonical config holds and how it is hashed.
#: It is in every cell's config (so in its hash) and in ``OUT/run.json``; cells and runs of
#: another version are refused with one line (:func:`check_cache_schema`). Raise it when a change
#: alters what a cell's config means; no compatibility branch keeps old hashes alive.
#: 3 (issue 30, item 7): ``calibrated`` and ``lira-offline`` rows of a private cell read
#: reference models trained by the cell's mechanism (before: non-private Adam, now the
#: ``-nonprivate`` variants).
CACHE_SCHEMA = 3


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
#: name, a windowed dataset's stride, the data's content hash.
RUN_OPTIONS = ("profile_name", "window_stride", "data_sha256", "precision")


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

    ``options``: the run's (name, value) facts of :data:`RUN_OPTIONS`; ``mech_options``: the
    mechanism's typed options (None: all defaults). Both go into the hash as one ``options``
    mapping (run facts and the options set).
    ``attacks``: the registered attacks the cell runs, in the sweep's order
    (:func:`audit.attack_plan.plan_attacks`).
    ``audit``: run the mechanism's empirical audit in the cell (``--canary-audit``;
    :mod:`audit.empirical.cell_audit`); its result is in the cell's rows.
    """

    dataset: str
    mech: MechanismName
    param_name: str
    param_value: float | None
    seed: int
    profile: Profile
    options: tuple[tuple[str, Any], ...] = ()
    mech_options: MechanismOptions | None = None
    attacks: tuple[str, ...] = CELL_DEFAULT_ATTACKS
    audit: bool = False

    def __post_init__(self) -> None:
        unknown = sorted({k for k, _ in self.options} - set(RUN_OPTIONS))
        if unknown:
            raise ValueError(
                f"cell options {unknown} are not run options ({', '.join(RUN_OPTIONS)}); "
                "a mechanism's options go in mech_options"
            )

    def identity(self) -> dict[str, Any]:
        """What the cell computes, as plain JSON data, whatever the cache schema: the grid point,
        the profile, the run facts and the mechanism's options (one ``options`` mapping), and
        each further setting that differs from its default. A setting at its default is left out
        (of the profile too), so that adding a setting never changes the identity, or the noise
        (:attr:`noise_key`), of a cell that does not use it. ``reference_models`` counts as the
        models the cell really trains (:attr:`reference_models`: none where no attack of the
        cell calibrates, so that R never splits cells it cannot change).
        """
        body = {name: getattr(self, name) for name in IDENTITY_FIELDS}
        body["mech"] = self.mech.value
        body["options"] = {**dict(self.options), **self.mech_settings()}
        body["profile"] = _set_fields(replace(self.profile, reference_models=self.reference_models))
        body.update(_set_fields(self, skip={*IDENTITY_FIELDS, "mech_options"}))
        if "attacks" in body:
            body["attacks"] = list(self.attacks)
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
    def precision(self) -> str:
        """The arithmetic of the cell's non-private computations (:mod:`dpvae_core.precision`):
        the ``precision`` run option, float32 where unset."""
        return str(self.option("precision", "float32"))

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
    attack list (:data:`audit.attack_plan.SWEEP_ATTACKS`), stored in the sweep's order; None runs
    every attack of that list each mechanism's release allows. Whether the requested ones apply
    to the selected mechanisms is checked with the cells (:func:`audit.sweep.build_cells`).
    """

    dataset: str
    mechs: tuple[MechanismName, ...]
    profile_name: ProfileName
    profile: Profile
    seeds: tuple[int, ...]
    out: Path
    device: str = "cpu"
    data_home: Path | None = None
    grid: tuple[float, ...] | None = None
    overwrite: bool = False
    progress: bool = True
    mech_options: tuple[tuple[MechanismName, MechanismOptions], ...] = field(default=())
    window_stride: int | None = None
    executor: ExecutorName = ExecutorName.LOCAL
    ray: RaySettings | None = None
    report: bool = True  # write OUT/report at the end (no cell's hash depends on it)
    attacks: tuple[str, ...] | None = None
    audit: bool = False  # --canary-audit: each private cell runs its mechanism's empirical audit
    precision: str = "float32"  # --precision: autocast of the non-private computations

    def __post_init__(self) -> None:
        check_dataset_name(self.dataset)
        if self.attacks is not None:
            object.__setattr__(self, "attacks", check_requested(self.attacks))
        object.__setattr__(self, "executor", parse_enum(ExecutorName, self.executor, "executor"))
        if self.ray is not None and self.executor is not ExecutorName.RAY:
            raise ValueError(
                "--ray-address, --cell-cpus and --cell-gpus apply to --executor ray only"
            )
        resolve_window_stride(self.dataset, self.window_stride)
        if not self.seeds:
            raise ValueError("at least one seed is required")
        for seed in self.seeds:
            if not isinstance(seed, int) or seed < 0:
                raise ValueError(f"seeds must be non-negative integers, got {seed!r}")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct, got {list(self.seeds)}")
        check_device_name(self.device)
        object.__setattr__(self, "precision", parse_precision(self.precision).value)
        if self.grid is not None:
            if not self.grid:
                raise ValueError("--grid needs at least one value")
            for value in self.grid:
                if not math.isfinite(value) or value <= 0:
                    raise ValueError(f"grid values must be positive finite numbers, got {value!r}")

    def options_for(self, mech: MechanismName) -> MechanismOptions | None:
        """The typed options of ``mech`` in this sweep (None: all defaults)."""
        return dict(self.mech_options).get(mech)

    def data_options(self) -> tuple[tuple[str, Any], ...]:
        """How the dataset is cut into records, as cell options: ``(("window_stride", s),)`` for
        a windowed dataset (the effective stride, default included), else nothing."""
        stride = resolve_window_stride(self.dataset, self.window_stride)
        return () if stride is None else (("window_stride", stride),)

    def precision_options(self) -> tuple[tuple[str, Any], ...]:
        """The precision as a cell option: ``(("precision", "bf16"),)``, nothing for float32
        (so float32 cells keep the hashes they had before the option existed)."""
        return () if self.precision == "float32" else (("precision", self.precision),)


def override_profile(profile: Profile, **overrides: Any) -> Profile:
    """A copy of ``profile`` with the non-None overrides applied (validated again)."""
    known = {f.name for f in fields(Profile)}
    unknown = set(overrides) - known
    if unknown:
        raise ValueError(f"unknown profile setting(s) {sorted(unknown)}; known: {sorted(known)}")
    return replace(profile, **{k: v for k, v in overrides.items() if v is not None})
