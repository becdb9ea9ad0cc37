"""Reference models: R VAEs trained on reference records with the cell's recipe, cached on disk.

The calibrated variants of latent search (GAN-Leaks, Chen et al. 2020, Section 5.4) and of the
likelihood attack (offline LiRA, Carlini et al. 2022, Section 4.2) compare a record's score under
the target with its scores under models of the same kind trained without it. A cell's attacker
trains R such VAEs:

* on the cell's reference records (:func:`audit.pipeline.reference_records`: D_test records
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
  (:func:`audit.target_training.train_target`: DP-Adam at the cell's noise multiplier for cdp,
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
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from attacks.threat import Records
from audit import io
from audit.attack_plan import CELL_DEFAULT_ATTACKS
from audit.config import CellConfig
from audit.mechanisms import CellData, Context
from audit.target_training import train_target
from dpvae_core.digests import json_digest
from dpvae_core.progress import ProgressFactory, null_progress
from dpvae_core.seeding import Purpose, derive_seed, numpy_rng
from models.factory import model_family
from models.lstm_vae import without_dp_lstm_aliases
from models.training import VAETrainSettings, train_vae

log = logging.getLogger(__name__)

REFERENCE_DIR = "reference-models"
"""The cache's folder under a sweep's output directory."""
SPEC_FILE = "reference.json"


NONPRIVATE = "none"
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
    if copy_mechanism and cell.mech.value != NONPRIVATE:
        batch = min(recipe.batch_size, recipe.records_per_model)
        base = reference_cell(cell, batch_size=batch).identity()
        base.pop("seed")
        recipe = replace(
            recipe,
            batch_size=batch,
            mechanism=cell.mech.value,
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


def _subset(spec: ReferenceSpec, index: int) -> tuple[np.ndarray, np.ndarray]:
    """(training positions, the other positions), sorted, of model ``index``."""
    rng = numpy_rng(spec.seed, Purpose.REFERENCE, "records", index)
    order = rng.permutation(spec.n_reference)
    k = spec.recipe.records_per_model
    return np.sort(order[:k]), np.sort(order[k:])


def _fresh_model(recipe: ReferenceRecipe, *, init_seed: int | None) -> nn.Module:
    family = model_family(recipe.record_shape, recipe.num_classes)
    with torch.random.fork_rng(devices=[]):
        if init_seed is not None:
            torch.manual_seed(init_seed)
        return family.target_vae(latent_dim=recipe.latent_dim, per_example_gradients=False)


def _train_copying(
    spec: ReferenceSpec,
    train: tuple[torch.Tensor, torch.Tensor],
    val: tuple[torch.Tensor, torch.Tensor],
    index: int,
    *,
    device: str,
    progress: ProgressFactory,
) -> dict[str, torch.Tensor]:
    """Model ``index``'s state, trained by the copied cell's mechanism through the target's own
    code path (:func:`audit.target_training.train_target`) on ``train``, validated on ``val``."""
    assert spec.copied is not None
    cell = reference_cell(spec.copied, batch_size=spec.recipe.batch_size, index=index)
    data = CellData(
        train=train,
        val=val,
        test=val,
        num_classes=spec.recipe.num_classes,
        n_total=spec.n_reference,
    )
    target = train_target(cell, data, Context(device=device, progress=progress))
    # in its inference form (DP-Adam's DPLSTMs fused): the keys of the model _fresh_model builds
    return without_dp_lstm_aliases(target.model.state_dict())


def train_reference_model(
    spec: ReferenceSpec,
    reference: Records,
    index: int,
    *,
    device: str = "cpu",
    progress: ProgressFactory = null_progress,
) -> ReferenceModel:
    """Train reference model ``index`` of ``spec`` on its subset of ``reference``.

    The reference records it does not train on validate it (the loss history only; validation
    never changes the weights).
    """
    if len(reference) != spec.n_reference:
        raise ValueError(
            f"spec {spec.key} is for {spec.n_reference} reference records, got {len(reference)}"
        )
    if not 0 <= index < spec.n_models:
        raise ValueError(f"model index must lie in [0, {spec.n_models}), got {index!r}")
    recipe = spec.recipe
    train_at, val_at = _subset(spec, index)
    start = time.perf_counter()
    pair = (reference.x[train_at], reference.y[train_at])
    val = (reference.x[val_at], reference.y[val_at])
    if recipe.nonprivate:
        model = _fresh_model(
            recipe, init_seed=derive_seed(spec.seed, Purpose.REFERENCE, "init", index) % 2**63
        )
        settings = VAETrainSettings(
            epochs=recipe.epochs,
            batch_size=recipe.batch_size,
            lr=recipe.lr,
            beta=recipe.beta,
            seed=derive_seed(spec.seed, Purpose.REFERENCE, "train", index),
            device=device,
            precision=recipe.precision,
        )
        train_vae(model, pair, val, settings, progress=progress)
        trained = model.state_dict()
    else:
        trained = _train_copying(spec, pair, val, index, device=device, progress=progress)
    state = {name: value.detach().cpu().clone() for name, value in trained.items()}
    return ReferenceModel(
        key=spec.key,
        index=index,
        state=state,
        records=train_at.astype(np.int64),
        seconds=time.perf_counter() - start,
    )


def build_reference_model(
    recipe: ReferenceRecipe, model: ReferenceModel, *, device: str = "cpu"
) -> nn.Module:
    """The trained VAE of ``model``, on ``device``, in eval mode and its inference
    implementation (:meth:`models.factory.ModelFamily.for_inference`)."""
    vae = _fresh_model(recipe, init_seed=None)
    vae.load_state_dict(model.state)
    family = model_family(recipe.record_shape, recipe.num_classes)
    return family.for_inference(vae.to(torch.device(device))).eval()


@dataclass(frozen=True)
class ReferenceSet:
    """A cell's R reference models: ``models`` in index order, ``trained`` the indices trained
    by this cell (the others came from the cache)."""

    spec: ReferenceSpec
    models: tuple[ReferenceModel, ...]
    trained: tuple[int, ...]

    @property
    def new_models(self) -> tuple[ReferenceModel, ...]:
        """The models this cell trained (what the cache lacks)."""
        return tuple(m for m in self.models if m.index in self.trained)

    @property
    def seconds_trained_here(self) -> float:
        """Training seconds spent by this cell."""
        return sum(m.seconds for m in self.new_models)

    def modules(self, *, device: str = "cpu") -> tuple[nn.Module, ...]:
        """The R VAEs, ready for the attacks."""
        return tuple(build_reference_model(self.spec.recipe, m, device=device) for m in self.models)

    def note(self) -> str:
        """What a row says of its reference models."""
        total = sum(m.seconds for m in self.models)
        cached = len(self.models) - len(self.trained)
        return (
            f"{self.spec.describe()}, {len(self.trained)} trained in this cell "
            f"({self.seconds_trained_here:.1f} s) and {cached} from the cache, "
            f"{total:.1f} s of training in all"
        )


def reference_set(
    spec: ReferenceSpec,
    reference: Records,
    *,
    cached: Iterable[ReferenceModel] = (),
    device: str = "cpu",
    progress: ProgressFactory = null_progress,
) -> ReferenceSet:
    """The R models of ``spec``: those of ``cached`` that belong to it, the others trained."""
    have = {m.index: m for m in cached if m.key == spec.key and 0 <= m.index < spec.n_models}
    models, trained = [], []
    for index in range(spec.n_models):
        if index not in have:
            log.info("training reference VAE %d of %d (%s)", index + 1, spec.n_models, spec.key)
            have[index] = train_reference_model(
                spec, reference, index, device=device, progress=progress
            )
            trained.append(index)
        models.append(have[index])
    return ReferenceSet(spec=spec, models=tuple(models), trained=tuple(trained))


# ---- the cache -------------------------------------------------------------------------------


def cache_dir(out: Path, spec: ReferenceSpec) -> Path:
    """``out/reference-models/<key>``."""
    return Path(out) / REFERENCE_DIR / spec.key


def _model_path(out: Path, spec: ReferenceSpec, index: int) -> Path:
    return cache_dir(out, spec) / f"model_{index}.pt"


def load_cached(out: Path, spec: ReferenceSpec) -> dict[int, ReferenceModel]:
    """The models of ``spec`` cached under ``out``, by index; a file that does not load, or
    holds another key or index, is skipped with a warning (that model is trained again)."""
    found: dict[int, ReferenceModel] = {}
    for index in range(spec.n_models):
        path = _model_path(out, spec, index)
        if not path.is_file():
            continue
        try:
            payload = io.load_state(path)
            if payload.get("schema_version") != io.SCHEMA_VERSION:
                raise ValueError(f"schema_version {payload.get('schema_version')!r}")
            if payload["key"] != spec.key or payload["index"] != index:
                raise ValueError(f"holds model {payload['index']} of key {payload['key']}")
            model = ReferenceModel(
                key=spec.key,
                index=index,
                state=dict(payload["model"]),
                records=payload["records"].numpy().astype(np.int64),
                seconds=float(payload["seconds"]),
            )
        except Exception as exc:  # noqa: BLE001 - any unreadable file: train that model again
            log.warning("not using reference model file %s (%s: %s)", path, type(exc).__name__, exc)
            continue
        found[index] = model
    return found


def save_models(out: Path, spec: ReferenceSpec, models: Iterable[ReferenceModel]) -> None:
    """Write ``models`` of ``spec`` under ``out`` (each atomically), then ``reference.json``
    describing every model of the spec found there."""
    for model in models:
        if model.key != spec.key:
            raise ValueError(f"model {model.index} belongs to key {model.key}, not {spec.key}")
        io.save_state(
            _model_path(out, spec, model.index),
            {
                "key": model.key,
                "index": model.index,
                "model": model.state,
                "records": torch.from_numpy(model.records),
                "seconds": model.seconds,
            },
        )
    present = load_cached(out, spec)
    io.write_json(
        cache_dir(out, spec) / SPEC_FILE,
        {
            "key": spec.key,
            "spec": spec.canonical(),
            "models": [
                {"index": m.index, "records": int(m.records.size), "seconds": m.seconds}
                for m in sorted(present.values(), key=lambda m: m.index)
            ],
        },
    )


def cached_models(out: Path, spec: ReferenceSpec | None) -> tuple[ReferenceModel, ...]:
    """:func:`load_cached` as a tuple in index order; empty for no spec."""
    if spec is None:
        return ()
    return tuple(m for _, m in sorted(load_cached(out, spec).items()))


def save_trained(out: Path, references: ReferenceSet | None) -> None:
    """Cache the models ``references`` trained (nothing where it trained none)."""
    if references is None or not references.trained:
        return
    save_models(out, references.spec, references.new_models)
