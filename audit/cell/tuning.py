"""Per-setting tuning (``--tune N``): a cell's learning rates, batch sizes and classifier epochs
chosen by Bayesian optimisation on D_val, as the trade-off paper chose its recipe per noise level
(its Tables 1 and 2), before the cell trains with them as usual.

Each of the N trials trains the target VAE under the cell's mechanism on D_train with the
trial's hyperparameters, draws D_gen from it, trains the target classifier on D_gen and scores
its accuracy on the real D_val (:data:`OBJECTIVE`); Optuna's TPE sampler, seeded, proposes the
trials, the first being the profile's own recipe. D_test and D_atk are never read: the trials
see the cell's data through :func:`tuning_data`, which holds D_train and D_val alone. The cell
then trains with the best trial's values (:func:`tuned_cell`) and fresh draws: its rows report
accuracy on D_test, which no trial saw, and its noise is not the chosen trial's.

Privacy: every trial trains on D_train, so the chosen values depend on it; that cost is not
accounted (:data:`NOT_ACCOUNTED`), as in the trade-off paper, and every row says so
(:func:`tuning_notes`). ``docs/tuning.md`` has the search space and why the objective.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

from audit.cell.gen_accuracy import classifier_settings, generate_and_classify
from audit.cell.target import train_target
from audit.config import CellConfig
from audit.mechanisms import BASELINE, CellData, Context, DataFacts, get_mechanism, param_symbol
from audit.profiles import Profile
from dpvae_core.digests import json_digest
from dpvae_core.seeding import Purpose, derive_seed
from models.face_embedding import FACE_EMBEDDING

log = logging.getLogger(__name__)

TUNE_EXTRA = "pip install -e '.[tune]'"
#: What each trial maximises.
OBJECTIVE = "accuracy on the real D_val of the classifier trained on D_gen"
NOT_ACCOUNTED = "the tuning's privacy cost is not accounted"
#: The cell options that say a cell is tuned (:meth:`audit.config.SweepConfig.tune_options`).
TUNE_OPTIONS = ("tune_trials", "tune_seed")
#: The version of a tuning record's fields (:class:`TuningRecord`), in its key.
TUNING_SCHEMA = 1

#: The search space (docs/tuning.md): the VAE's Adam learning rate (log-uniform) and batch size,
#: spanning the trade-off paper's LFW choices (4.0e-5 to 5.6e-4, batches 16 to 64); the
#: classifier's learning rate, batch size and epochs (a network only), around its recipe.
VAE_LR = (1e-5, 1e-2)
VAE_BATCHES = (16, 32, 64)
CLASSIFIER_LR = (1e-4, 1e-2)
CLASSIFIER_BATCHES = (16, 32, 64, 128)
#: The classifier's epochs run from the profile's budget E divided by this to E.
EPOCHS_SHARE = 4


def import_optuna() -> Any:
    """The ``optuna`` module, or a ValueError naming the extra to install."""
    try:
        import optuna
    except ImportError:
        raise ValueError(
            f"--tune needs Optuna, which is not installed; install the extra: {TUNE_EXTRA}"
        ) from None
    return optuna


def check_tuning_available() -> None:
    """Refuse ``--tune`` in one line where Optuna is missing (before any work)."""
    import_optuna()


@dataclass(frozen=True)
class SearchSpace:
    """Where the trials look: the VAE's learning rate range and batch sizes, and, where the
    classifier is a network, its learning rate range, batch sizes and epoch range (else None)."""

    lr: tuple[float, float]
    batch_sizes: tuple[int, ...]
    classifier_lr: tuple[float, float] | None = None
    classifier_batch_sizes: tuple[int, ...] | None = None
    classifier_epochs: tuple[int, int] | None = None

    def suggest(self, trial: Any) -> dict[str, Any]:
        """The profile settings ``trial`` (an Optuna trial) proposes."""
        params = {
            "lr": trial.suggest_float("lr", *self.lr, log=True),
            "batch_size": trial.suggest_categorical("batch_size", list(self.batch_sizes)),
        }
        if self.classifier_lr is not None:
            params["classifier_lr"] = trial.suggest_float(
                "classifier_lr", *self.classifier_lr, log=True
            )
        if self.classifier_batch_sizes is not None:
            params["classifier_batch_size"] = trial.suggest_categorical(
                "classifier_batch_size", list(self.classifier_batch_sizes)
            )
        if self.classifier_epochs is not None:
            params["classifier_epochs"] = trial.suggest_int(
                "classifier_epochs", *self.classifier_epochs
            )
        return params

    def describe(self) -> dict[str, Any]:
        """The space as JSON data (the tuning record's ``search_space``)."""
        return {
            "lr": {"log_uniform": list(self.lr)},
            "batch_size": {"choices": list(self.batch_sizes)},
            **(
                {
                    "classifier_lr": {"log_uniform": list(self.classifier_lr)},
                    "classifier_batch_size": {"choices": list(self.classifier_batch_sizes or ())},
                    "classifier_epochs": {"int_range": list(self.classifier_epochs or ())},
                }
                if self.classifier_lr is not None
                else {}
            ),
        }


def search_space(cell: CellConfig, data: CellData) -> SearchSpace:
    """The cell's search space: batch sizes of at most |D_train| that the mechanism's options
    accept, the profile's own among them; the classifier's settings unless it is the face
    descriptor's logistic regression (no network)."""
    p = cell.profile
    batches = tuple(b for b in sorted({*VAE_BATCHES, p.batch_size}) if _batch_ok(cell, data, b))
    batches = batches or (p.batch_size,)  # the sweep checked the profile's
    lr = (min(VAE_LR[0], p.lr), max(VAE_LR[1], p.lr))
    if p.classifier == FACE_EMBEDDING:
        return SearchSpace(lr=lr, batch_sizes=batches)
    start = classifier_start(cell)
    epochs = p.classifier_epochs
    return SearchSpace(
        lr=lr,
        batch_sizes=batches,
        classifier_lr=(min(CLASSIFIER_LR[0], start["lr"]), max(CLASSIFIER_LR[1], start["lr"])),
        classifier_batch_sizes=tuple(sorted({*CLASSIFIER_BATCHES, start["batch_size"]})),
        classifier_epochs=(max(1, epochs // EPOCHS_SHARE), epochs),
    )


def _batch_ok(cell: CellConfig, data: CellData, batch_size: int) -> bool:
    """Whether the cell's mechanism trains with ``batch_size`` on ``data``'s D_train."""
    if batch_size > len(data.train[1]):
        return False
    if cell.mech == BASELINE:
        return True
    mech = get_mechanism(cell.mech)
    facts = DataFacts(
        record_shape=data.shape, n_train=len(data.train[1]), epochs=cell.profile.epochs
    )
    try:
        mech.check_options(
            cell.mech_options or mech.options_type(), grid=(), batch_size=batch_size, data=facts
        )
    except ValueError:
        return False
    return True


def classifier_start(cell: CellConfig) -> dict[str, Any]:
    """The classifier's learning rate and batch size as the untuned cell trains it."""
    settings = classifier_settings(cell, "cpu", "gen")
    return {"lr": settings.lr, "batch_size": settings.batch_size}


def start_params(cell: CellConfig, space: SearchSpace) -> dict[str, Any]:
    """The first trial: the profile's own recipe (so the chosen values do at least as well on
    D_val as the untuned cell's, trials being deterministic)."""
    p = cell.profile
    params: dict[str, Any] = {"lr": p.lr, "batch_size": p.batch_size}
    if p.batch_size not in space.batch_sizes:
        params["batch_size"] = space.batch_sizes[0]
    if space.classifier_lr is not None:
        start = classifier_start(cell)
        params["classifier_lr"] = start["lr"]
        params["classifier_batch_size"] = start["batch_size"]
        params["classifier_epochs"] = p.classifier_epochs
    return params


def tuning_data(data: CellData) -> CellData:
    """What the trials see of the cell's data: D_train, and the real D_val where D_test stood
    (the objective's accuracy is on it); D_test, its rows and D_atk's positions are dropped."""
    return replace(
        data, test=data.val, test_index=None, attack_members=None, attack_nonmembers=None
    )


def trial_cell(cell: CellConfig, params: dict[str, Any]) -> CellConfig:
    """The untuned cell with ``params`` set in its profile: a trial trains as a sweep with those
    settings would (its own draws, none of them the tuned cell's); the first trial, the
    profile's recipe, is the untuned cell itself."""
    options = tuple((k, v) for k, v in cell.options if k not in TUNE_OPTIONS)
    planned = replace(cell, profile=cell.untuned or cell.profile, untuned=None)
    return replace(planned, profile=with_params(planned, params), options=options, audit=False)


def with_params(cell: CellConfig, params: dict[str, Any]) -> Profile:
    """``cell``'s profile with ``params`` set; a classifier learning rate or batch size equal to
    its recipe's stays unset, so the profile's recipe gives the profile itself."""
    start = classifier_start(cell)
    given = {
        k: v
        for k, v in params.items()
        if k not in CLASSIFIER_KEYS or v != start[CLASSIFIER_KEYS[k]]
    }
    return replace(cell.profile, **given)


#: The classifier's profile settings and their names in its recipe (:func:`classifier_start`).
CLASSIFIER_KEYS = {"classifier_lr": "lr", "classifier_batch_size": "batch_size"}


def tuning_key(cell: CellConfig) -> str:
    """Names the tuning of ``cell``: the digest of what it depends on, the cell's identity
    without its attacks, audit and reference models (which no trial runs)."""
    body = cell.identity()
    body.pop("attacks", None)
    body.pop("audit", None)
    body["profile"] = {k: v for k, v in body["profile"].items() if k != "reference_models"}
    return json_digest({**body, "tuning_schema": TUNING_SCHEMA})


@dataclass(frozen=True)
class TuningRecord:
    """A cell's tuning: its key (:func:`tuning_key`), every trial (``params``, ``value``: the
    objective, ``epsilon``: the trial's claim, ``seconds``), the chosen trial and its values,
    and how it was searched (space, sampler seed, Optuna's version)."""

    key: str
    trials: tuple[dict[str, Any], ...]
    chosen_trial: int
    chosen: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "objective": OBJECTIVE,
            "privacy": NOT_ACCOUNTED,
            "chosen_trial": self.chosen_trial,
            "chosen": self.chosen,
            "trials": list(self.trials),
            **self.info,
        }

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> TuningRecord:
        """A record read back; ValueError where it is not one this code writes."""
        allowed = set(Profile.__dataclass_fields__)
        chosen = dict(body["chosen"])
        trials = tuple(dict(t) for t in body["trials"])
        if not trials or not set(chosen) <= allowed or not isinstance(body["key"], str):
            raise ValueError("not a tuning record (no trials, or chosen values of no profile)")
        Profile(**{**_TEMPLATE, **chosen})  # the chosen values must make a valid profile
        info = {k: v for k, v in body.items() if k not in _OWN_KEYS}
        return cls(body["key"], trials, int(body["chosen_trial"]), chosen, info)


_OWN_KEYS = {"key", "objective", "privacy", "chosen_trial", "chosen", "trials"}
_TEMPLATE = dict(
    epochs=1,
    batch_size=1,
    lr=1e-3,
    latent_dim=1,
    beta=1.0,
    attack_samples=1,
    attack_records=None,
    classifier_epochs=1,
    classifier_patience=1,
    max_train=None,
)


def tuned_cell(cell: CellConfig, record: TuningRecord) -> CellConfig:
    """``cell`` as it runs after its tuning: the chosen values in its profile, its identity
    (hash, draws) that of the planned cell (:attr:`CellConfig.untuned`)."""
    if record.key != tuning_key(cell):
        raise ValueError(f"tuning record {record.key} is not cell {cell.config_hash}'s")
    return replace(cell, profile=with_params(cell, record.chosen), untuned=cell.profile)


def tune_cell(cell: CellConfig, data: CellData, ctx: Context) -> TuningRecord:
    """Run the cell's tuning: ``tune_trials`` trials of Optuna's TPE sampler (seeded from the
    root seed, ``tune_seed`` and :func:`tuning_key`), the profile's recipe first, each scored by
    :data:`OBJECTIVE` on :func:`tuning_data` alone; the trials show on a progress bar."""
    optuna = import_optuna()
    trials, tune_seed = int(cell.option("tune_trials")), int(cell.option("tune_seed", 0))
    key = tuning_key(cell)
    restricted = tuning_data(data)
    space = search_space(cell, restricted)
    sampler_seed = derive_seed(cell.seed, Purpose.TUNE, tune_seed, key) % 2**32
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no line per trial on stderr
    setting = (
        "" if cell.param_value is None else f" {param_symbol(cell.param_name)}={cell.param_value:g}"
    )
    bar = ctx.progress(total=trials, desc=f"tuning {cell.mech}{setting}")
    began = time.perf_counter()
    scores: list[float] = []

    def objective(trial: Any) -> float:
        params = space.suggest(trial)
        start = time.perf_counter()
        run = trial_cell(cell, params)
        target = train_target(run, restricted, ctx)
        acc = generate_and_classify(run, restricted, target, ctx).acc
        trial.set_user_attr("epsilon", target.claim.epsilon)
        trial.set_user_attr("seconds", time.perf_counter() - start)
        scores.append(acc)
        bar.update(1)
        bar.set_postfix(acc_val=f"{acc:.3f}", best=f"{max(scores):.3f}")
        return acc

    try:
        study = optuna.create_study(
            direction="maximize", sampler=optuna.samplers.TPESampler(seed=sampler_seed)
        )
        study.enqueue_trial(start_params(cell, space))
        study.optimize(objective, n_trials=trials)
    finally:
        optuna.logging.set_verbosity(verbosity)
        bar.close()
    done = [
        {
            "number": t.number,
            "params": dict(t.params),
            "value": float(t.value),
            "epsilon": _json_float(t.user_attrs.get("epsilon", math.nan)),
            "seconds": round(float(t.user_attrs.get("seconds", math.nan)), 3),
        }
        for t in sorted(study.trials, key=lambda t: t.number)
    ]
    best = max(done, key=lambda t: (t["value"], -t["number"]))  # ties: the earliest trial
    log.info("cell %s tuned: trial %d of %d, %s", cell.config_hash, best["number"], trials, best)
    info = {
        "cell": cell.config_hash,
        "trials_requested": trials,
        "tune_seed": tune_seed,
        "sampler": "optuna.samplers.TPESampler",
        "sampler_seed": sampler_seed,
        "optuna_version": optuna.__version__,
        "search_space": space.describe(),
        "seconds": round(time.perf_counter() - began, 3),
    }
    return TuningRecord(key, tuple(done), best["number"], dict(best["params"]), info)


def _json_float(value: float) -> float | str:
    """``value`` for strict JSON: infinite epsilons as the strings ``inf``/``nan``."""
    value = float(value)
    return value if math.isfinite(value) else str(value)


def tuning_notes(cell: CellConfig) -> dict[str, str]:
    """The ``privacy_notes`` of a tuned cell's rows (none for an untuned cell): how it was tuned,
    what was chosen, and that the tuning's privacy cost is not accounted."""
    trials = cell.option("tune_trials")
    if trials is None:
        return {}
    chosen = {}
    if cell.untuned is not None:
        start = classifier_start(cell)  # the classifier's, where its recipe's were chosen
        names = ("lr", "batch_size", "classifier_lr", "classifier_batch_size", "classifier_epochs")
        chosen = {n: getattr(cell.profile, n) for n in names}
        chosen.update({k: start[v] for k, v in CLASSIFIER_KEYS.items() if chosen[k] is None})
        if cell.profile.classifier == FACE_EMBEDDING:
            chosen = {"lr": cell.profile.lr, "batch_size": cell.profile.batch_size}
    values = ", ".join(
        f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
        for k, v in chosen.items()
        if v is not None
    )
    return {
        "tuning": f"tuned over {trials} trials on D_val (Optuna TPE, --tune-seed "
        f"{cell.option('tune_seed', 0)}, objective: {OBJECTIVE}), chosen: {values or 'n/a'}",
        "tuning_privacy": f"{NOT_ACCOUNTED}: every trial trained on D_train, so the chosen "
        "values depend on it: epsilon is the final training's alone",
    }
