"""The profiles: how much work a cell does (epochs, records, attacks' samples, reference models),
quick, standard and paper. The measurements behind each value: ``docs/profiles.md``."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from enum import Enum
from typing import Any

from audit.paper_recipe import PAPER_VAE_TABLE, RECIPE_KNOBS
from models.factory import CLASSIFIERS


class ProfileName(str, Enum):
    QUICK = "quick"
    STANDARD = "standard"
    PAPER = "paper"


#: The largest value of each size a profile may set, about 100 times the paper profile's (epochs
#: 1000, classifier epochs 100, N 300, R 8, d 100): a larger one would run for days or allocate past
#: any machine's memory, so it is refused before any work. The sizes bounded by the data
#: (``max_train``, ``attack_records``, ``batch_size``) and |D_gen|, whose memory depends on the
#: records, are checked once the data is loaded (:func:`audit.sweep.plan.check_sweep`).
SIZE_LIMITS: dict[str, int] = {
    "epochs": 100_000,
    "classifier_epochs": 10_000,
    "classifier_patience": 10_000,
    "attack_samples": 30_000,
    "reference_models": 800,
    "latent_dim": 10_000,
}
SIZE_LIMIT_REASON = "about 100 times the paper profile's; more would run for days"


@dataclass(frozen=True)
class Profile:
    """Every knob a profile sets; each can be overridden on the command line.

    ``max_train``: cap on |D_train| (None = the split's full training set); a small training set
    is what lets a VAE memorise, which is what the attacks detect.
    ``gen_records``: |D_gen|, the generated records the utility classifier trains on, independent
    of |D_train| (labels follow D_train's class shares; see :func:`models.generation.gen_labels`).
    None means |D_gen| = |D_train|; every profile sets it.
    ``reference_models``: R, the reference VAEs the attacker trains for the calibrated variants
    (:mod:`audit.cell.references`; quick 2, standard 4, paper 8); 0 or None trains none. A
    cell whose attacks do not calibrate is hashed with 0 (:meth:`CellConfig.canonical`).
    ``balanced_train``: the ``max_train`` cap takes records per class as evenly as the classes
    allow (:func:`audit.cell.membership.balanced_subset`; LFW20 and LFW50: 10 per person) instead of
    in proportion to the class sizes. ``classifier``: the target classifier's kind
    (:data:`models.factory.CLASSIFIERS`; None: the modality's original one).
    ``membership_coins``: D_atk's candidates join D_train each on its own fair coin
    (:func:`audit.cell.membership.membership_by_coins`), which the attack-based epsilon bound
    (``epsilon_lower_attack``) needs; False (the default, so left out of the hash) keeps the
    balanced D_atk, whose rows carry no such bound.
    ``per_setting``: the knobs of :data:`audit.paper_recipe.RECIPE_KNOBS` that the trade-off
    paper's recipe sets per setting (the paper profile on a dataset of its Table 2; () elsewhere,
    the default, left out of the hash): a cell's profile holds its setting's value
    (:func:`audit.sweep.paper_cells.setting_profile`), and the run's settings leave them out.
    ``classifier_lr``, ``classifier_batch_size``: the target classifier's Adam learning rate and
    batch size where set (None, the default and left out of the hash: its recipe's); ``--tune``
    sets them in the cell it runs (:mod:`audit.cell.tuning`).
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
    per_setting: tuple[str, ...] = ()
    classifier_lr: float | None = None
    classifier_batch_size: int | None = None

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
        for name, limit in SIZE_LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, int) and value > limit:
                raise ValueError(
                    f"{name.replace('_', '-')} must be at most {limit} ({SIZE_LIMIT_REASON}), "
                    f"got {value!r}"
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
        if isinstance(self.per_setting, list):  # as a cell's stored config.json reads back
            object.__setattr__(self, "per_setting", tuple(self.per_setting))
        unknown = [k for k in self.per_setting if k not in RECIPE_KNOBS]
        if not isinstance(self.per_setting, tuple) or unknown:
            allowed = ", ".join(RECIPE_KNOBS)
            raise ValueError(f"per_setting must be a tuple of {allowed}, got {self.per_setting!r}")
        c_lr, c_batch = self.classifier_lr, self.classifier_batch_size
        if c_lr is not None and not (isinstance(c_lr, float | int) and 0 < c_lr < math.inf):
            raise ValueError(f"classifier-lr must be a positive finite number, got {c_lr!r}")
        if c_batch is not None and (not isinstance(c_batch, int) or c_batch < 1):
            raise ValueError(f"classifier-batch-size must be a positive integer, got {c_batch!r}")


#: The three profiles; why each value (|D_gen|, N, R): docs/profiles.md.
PROFILES: dict[ProfileName, Profile] = {
    ProfileName.QUICK: Profile(
        epochs=40,
        batch_size=16,
        lr=2e-3,
        latent_dim=16,
        beta=1.0,
        # N: within MI AP's sampling noise of N = 300 from N = 5 on (docs/profiles.md)
        attack_samples=20,
        attack_records=None,
        classifier_epochs=20,
        classifier_patience=5,
        max_train=50,
        gen_records=1000,
        # R = 2 under-reads the calibrated variants by 0.01-0.05 against R = 4, at 80 % of its
        # cost; kept until the lead decides (docs/profiles.md)
        reference_models=2,
    ),
    ProfileName.STANDARD: Profile(
        epochs=300,
        batch_size=16,
        lr=1e-3,
        latent_dim=100,
        beta=1.0,
        # N is also latent search's Adam steps and the likelihood attack's importance samples,
        # which the study of N did not measure: kept at 100 (docs/profiles.md)
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
        attack_samples=300,  # the trade-off paper's N (Eq. 1)
        attack_records=2000,
        classifier_epochs=100,
        classifier_patience=10,
        max_train=None,
        gen_records=2000,
        reference_models=8,
    ),
}


#: Target-VAE epochs of series datasets (the LSTM VAE) where a profile's image setting is too
#: few: the multitask VAE needs about 200 epochs before its class-latent samples carry the classes
#: (measured on basicmotions: docs/profiles.md).
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
    10 records per person) instead of a fixed number; the paper profile keeps all of D_train,
    and takes its learning rate and batch size per setting from the trade-off paper's Table 2
    where it covers the dataset (``per_setting``: LFW20, LFW50); and the settings the dataset
    replaces in that profile (``DatasetSpec.profile_overrides``: LFW20's and LFW50's quick
    learning rate and classifier budget)."""
    from audit.datasets import SPECS, dataset_modality

    profile = profile_for(name, dataset_modality(dataset))
    if ProfileName(name) is ProfileName.PAPER and dataset in PAPER_VAE_TABLE:
        profile = replace(profile, per_setting=RECIPE_KNOBS)
    spec = SPECS.get(dataset)
    if spec is None:
        return profile
    profile = replace(profile, **spec.overrides_for(ProfileName(name).value))
    cap = spec.train_cap
    if cap is None or profile.max_train is None:
        return profile
    return replace(profile, max_train=cap)


def override_profile(profile: Profile, **overrides: Any) -> Profile:
    """A copy of ``profile`` with the non-None overrides applied (validated again); a knob set
    here is no longer set per setting (``per_setting``)."""
    known = {f.name for f in fields(Profile)}
    unknown = set(overrides) - known
    if unknown:
        raise ValueError(f"unknown profile setting(s) {sorted(unknown)}; known: {sorted(known)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    if "per_setting" not in given:
        given["per_setting"] = tuple(k for k in profile.per_setting if k not in given)
    return replace(profile, **given)
