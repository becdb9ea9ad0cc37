"""Reference models: R VAEs trained on reference records with the cell's recipe, cached on disk.

The calibrated variants of latent search (GAN-Leaks, Chen et al. 2020, Section 5.4) and of the
likelihood attack (offline LiRA, Carlini et al. 2022, Section 4.2) compare a record's score under
the target with its scores under models of the same kind trained without it. A cell's attacker
trains R such VAEs:

* on the cell's reference records (:func:`audit.cell.membership.reference_records`: D_test records
  outside D_atk, so in neither D_train nor D_atk), model r on a seeded random subset of
  min(half of them, |D_train|) records, so that the models differ and none sees more records than
  the target (Carlini et al. train shadow models on datasets of the target's size: a VAE fitted
  to more records memorises less, and its scores would not follow the target's OUT distribution.
  Measured on digits, quick profile, mech none, R = 4, seeds 0-4, MI AP of latent search's /
  the likelihood attack's calibrated variant / lira-offline: 0.699 / 0.709 / 0.716 with 50
  records per model (|D_train|), 0.682 / 0.665 / 0.654 with 245 (half), at 5 times the cost);
* with the cell's training procedure, its privacy mechanism included (:class:`ReferenceRecipe`;
  Carlini et al.'s shadow models copy the target's training): the cell's mechanism, grid value
  and options, run through the very code that trains the target
  (:func:`audit.cell.target.train_target`: DP-Adam at the cell's noise multiplier for cdp,
  cdp-termwise and dp2vae's decoder, the cell's ldp or vae-ldp perturbation of the reference
  records), with the target's model family and latent size and the profile's epochs, learning
  rate and beta; the batch size is the profile's, or the model's record count where that is
  smaller (a Poisson rate above 1 does not exist). With ``--target-epsilon`` a reference model
  calibrates its noise multiplier to that epsilon at its own record count, as the target did at
  its own. An adversary who knows the training code and the published mechanism can reproduce
  all of it; the noise draws are its own (keyed by the model's index).
* the non-private set (:func:`cell_spec` with ``copy_mechanism=False``): the same records and
  settings, non-private Adam (:func:`models.training.train_vae`); the pipeline trains it besides
  the mechanism-copying set in every private cell, and its calibrated variants are labelled
  ``calibrated-nonprivate`` / ``lira-offline-nonprivate``. For mech none the two are one set.

Seeds derive from the cell's root seed (:attr:`dpvae_core.seeding.Purpose.REFERENCE`) and the
model's index, never from a cell's config hash, so every cell of a seed with the same recipe gets
the same models (every private cell shares the non-private set).

On disk, under the sweep's output directory (only the sweep's driver writes it)::

    OUT/reference-models/<key>/model_<r>.pt     model r: state dict, key, index, the positions
                                                 of the reference records it trained on, seconds
    OUT/reference-models/<key>/reference.json   what the models are: the spec and each model's
                                                 record count and training seconds

``<key>`` digests the :class:`ReferenceSpec`: dataset, data content hash, seed, recipe (the
mechanism copied and a digest of every setting of the copied cell's training), the reference
records' content and R. Every file is written atomically (:mod:`audit.io`); a model
file that does not load, or names another key or index, is not used, and that model is trained
again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np
import torch

from attacks import Records
from audit.attack_plan import CELL_DEFAULT_ATTACKS
from audit.cell.membership import reference_records
from audit.config import CellConfig
from audit.mechanisms import BASELINE, CellData
from dpvae_core.digests import json_digest
from dpvae_core.seeding import Purpose, derive_seed
from models.factory import model_family

log = logging.getLogger(__name__)


REFERENCE_DIR = "reference-models"
"""The cache's folder under a sweep's output directory."""


SPEC_FILE = "reference.json"


NONPRIVATE = BASELINE
""":attr:`ReferenceRecipe.mechanism` of reference models trained with non-private Adam."""


@dataclass(frozen=True)
class ReferenceRecipe:
    """How each reference VAE is built and trained.

    Attributes:
        family: the model family's class name (:func:`models.factory.model_family`).
        record_shape, num_classes: the records' (C, H, W) or (T, F) and the number of classes.
        latent_dim, epochs, batch_size, lr, beta: the VAE settings (``batch_size``: the
            profile's, at most ``records_per_model`` where the mechanism is copied).
        records_per_model: records each model trains on, min(half the reference records,
            |D_train|).
        mechanism: the privacy mechanism the training copies (the cell's), or
            :data:`NONPRIVATE` for non-private Adam.
        copies: what of the cell's mechanism is copied, in words (e.g. ``noise_multiplier=1``
            and its options); empty for non-private Adam.
        training: digest of the copied cell's whole identity but its seed (grid value, mechanism
            options, profile, data hash: everything its training may read); empty for
            non-private Adam.
        precision: the cell's (:mod:`dpvae_core.precision`); in the key only where not float32.
    """

    family: str
    record_shape: tuple[int, ...]
    num_classes: int
    latent_dim: int
    epochs: int
    batch_size: int
    lr: float
    beta: float
    records_per_model: int
    mechanism: str = NONPRIVATE
    copies: str = ""
    training: str = ""
    precision: str = "float32"

    @property
    def nonprivate(self) -> bool:
        """Whether the models train with non-private Adam."""
        return self.mechanism == NONPRIVATE

    def describe(self) -> str:
        """One line for a row's notes (and its ``side_models_trained``)."""
        how = (
            "non-private Adam"
            if self.nonprivate
            else f"the cell's mechanism, {self.mechanism} {self.copies}".rstrip()
        )
        return (
            f"{self.family} d={self.latent_dim}, {self.epochs} epochs, batch {self.batch_size}, "
            f"lr {self.lr:g}, beta {self.beta:g}, {how}"
        )


@dataclass(frozen=True)
class ReferenceSpec:
    """What identifies a set of reference models (the cache key digests all of it).

    Attributes:
        dataset, data_sha256: the dataset's name and content hash (None where unknown).
        seed: the cell's root seed.
        recipe: how each model is trained.
        records_sha256: SHA-256 of the reference records (x and y as stored).
        n_reference: how many reference records there are.
        n_models: R.
    """

    dataset: str
    data_sha256: str | None
    seed: int
    recipe: ReferenceRecipe
    records_sha256: str
    n_reference: int
    n_models: int
    copied: CellConfig | None = field(default=None, compare=False, repr=False)
    """The cell whose training the models copy (None: non-private); not part of the key, which
    holds :attr:`ReferenceRecipe.training`, its digest."""

    def __post_init__(self) -> None:
        if self.recipe.nonprivate != (self.copied is None):
            raise ValueError("a mechanism-copying recipe needs the cell it copies, and only it")
        if not isinstance(self.n_models, int) or self.n_models < 1:
            raise ValueError(f"n_models must be a positive integer, got {self.n_models!r}")
        n, k = self.n_reference, self.recipe.records_per_model
        if not 1 <= k <= n:
            raise ValueError(f"records_per_model must lie in [1, {n}], got {k!r}")

    def canonical(self) -> dict[str, Any]:
        """The spec as plain JSON data (:attr:`copied` left out: the recipe digests it)."""
        body = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "copied"}
        body["recipe"] = asdict(self.recipe)
        if body["recipe"]["precision"] == "float32":  # float32 keys as before the field existed
            del body["recipe"]["precision"]
        return json.loads(json.dumps(body))

    @property
    def key(self) -> str:
        """16 hex digits naming the cache folder."""
        return json_digest(self.canonical())

    def describe(self) -> str:
        """One line for a row's notes."""
        return (
            f"{self.n_models} VAEs ({self.recipe.describe()}), each on "
            f"{self.recipe.records_per_model} of the {self.n_reference} reference records, "
            f"key {self.key}"
        )


@dataclass(frozen=True)
class ReferenceModel:
    """One trained reference VAE.

    Attributes:
        key: the :attr:`ReferenceSpec.key` it belongs to.
        index: r, in [0, R).
        state: its state dict, on the CPU.
        records: (k,) int64 sorted positions, among the reference records, of those it trained on.
        seconds: how long training it took.
    """

    key: str
    index: int
    state: dict[str, torch.Tensor]
    records: np.ndarray
    seconds: float


def records_digest(records: Records) -> str:
    """SHA-256 of the records' values and labels (dtype, shape and bytes of each)."""
    digest = hashlib.sha256()
    for tensor in (records.x, records.y):
        array = tensor.detach().cpu().contiguous().numpy()
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def reference_recipe(
    *,
    record_shape: tuple[int, ...],
    num_classes: int,
    latent_dim: int,
    epochs: int,
    batch_size: int,
    lr: float,
    beta: float,
    n_reference: int,
    n_train: int,
) -> ReferenceRecipe:
    """The recipe for records of ``record_shape``, each model on min(n_reference // 2, n_train)
    records."""
    family = model_family(record_shape, num_classes)
    return ReferenceRecipe(
        family=type(family).__name__,
        record_shape=tuple(int(s) for s in record_shape),
        num_classes=int(num_classes),
        latent_dim=latent_dim,
        epochs=epochs,
        batch_size=batch_size,
        lr=float(lr),
        beta=float(beta),
        records_per_model=max(1, min(n_reference // 2, n_train)),
    )


def reference_cell(cell: CellConfig, *, batch_size: int, index: int | None = None) -> CellConfig:
    """The cell whose training reference model ``index`` runs: ``cell``'s mechanism, grid value,
    options and profile (batch size ``batch_size``, no reference models), its default attack
    list and no audit (neither touches training), and a seed derived from ``cell``'s and
    ``index`` (None: seed 0, the form whose identity the recipe digests), which keys its
    initialisation, training draws and noise apart from the target's and the other models'."""
    seed = 0 if index is None else derive_seed(cell.seed, Purpose.REFERENCE, "cell", index) % 2**31
    profile = replace(cell.profile, batch_size=batch_size, reference_models=None)
    return replace(cell, seed=seed, profile=profile, attacks=CELL_DEFAULT_ATTACKS, audit=False)


def _copies(cell: CellConfig) -> str:
    """What of ``cell``'s mechanism the models copy, in words."""
    parts = [] if cell.param_value is None else [f"{cell.param_name}={cell.param_value:g}"]
    parts += [f"{k}={v}" for k, v in sorted(cell.mech_settings().items())]
    return " ".join(parts)


def cell_spec(
    cell: CellConfig,
    data: CellData,
    reference: Records | None,
    *,
    copy_mechanism: bool = True,
) -> ReferenceSpec | None:
    """The spec of a cell's reference models: R = ``cell.reference_models`` VAEs of the cell's
    recipe (its record shape, classes and profile, and with ``copy_mechanism`` its mechanism;
    else non-private Adam) on ``reference``, each on min(half of them, |D_train|) records; None
    where the cell trains none (R = 0: no attack of the cell calibrates or
    ``--reference-models 0``; or no reference records). For mech none both forms are one spec."""
    if not cell.reference_models or reference is None:
        return None
    p = cell.profile
    recipe = reference_recipe(
        record_shape=data.shape,
        num_classes=data.num_classes,
        latent_dim=p.latent_dim,
        epochs=p.epochs,
        batch_size=p.batch_size,
        lr=p.lr,
        beta=p.beta,
        n_reference=len(reference),
        n_train=len(data.train[0]),
    )
    recipe = replace(recipe, precision=cell.precision)
    copied = None
    if copy_mechanism and cell.mech != NONPRIVATE:
        batch = min(recipe.batch_size, recipe.records_per_model)
        base = reference_cell(cell, batch_size=batch).identity()
        base.pop("seed")
        recipe = replace(
            recipe,
            batch_size=batch,
            mechanism=cell.mech,
            copies=_copies(cell),
            training=json_digest(base),
        )
        copied = cell
    return ReferenceSpec(
        dataset=cell.dataset,
        data_sha256=cell.option("data_sha256"),
        seed=cell.seed,
        recipe=recipe,
        records_sha256=records_digest(reference),
        n_reference=len(reference),
        n_models=cell.reference_models,
        copied=copied,
    )


def cell_reference_specs(cell: CellConfig, data: CellData) -> tuple[ReferenceSpec, ...]:
    """The specs of the cell's reference models on its own reference records (what the sweep's
    driver looks up in the cache before the cell runs): the mechanism-copying set, then, for a
    private mechanism, the non-private one (:func:`~audit.cell.references.cell_spec`); empty
    where the cell trains none."""
    return _specs(cell, data, reference_records(data, cell))


def _specs(
    cell: CellConfig, data: CellData, reference: Records | None
) -> tuple[ReferenceSpec, ...]:
    copying = cell_spec(cell, data, reference)
    if copying is None:
        return ()
    plain = cell_spec(cell, data, reference, copy_mechanism=False)
    return (copying,) if plain is None or plain.key == copying.key else (copying, plain)
