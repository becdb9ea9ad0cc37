"""Which cells a sweep has (:func:`build_cells`) and the checks of its options before any work
(:func:`check_sweep`)."""

from __future__ import annotations

import math

from audit.attack_plan import attack_settings, check_ssim_window, plan_attacks
from audit.cell.tuning import check_tuning_available
from audit.config import CellConfig, SweepConfig
from audit.datasets import Dataset, Split, dataset_modality
from audit.mechanisms import BASELINE, DataFacts, Mechanism, get_mechanism
from audit.options import MechanismOptions
from audit.sweep.paper_cells import (
    check_audit_clip_norm,
    setting_options,
    setting_profile,
    sweep_batch_sizes,
)
from dpvae_core.validation import check_fits_memory
from models.face_embedding import FACE_EMBEDDING, INSTALL_HINT
from models.face_embedding import available as face_embedding_available


def build_cells(
    config: SweepConfig, *, data_sha256: str | None = None
) -> list[tuple[CellConfig, CellConfig]]:
    """(cell, its non-private baseline cell) for every seed, mechanism and grid value.

    The baseline of seed s is the cell of the :data:`~audit.mechanisms.BASELINE` mechanism with
    the same profile and seed; it
    comes first so that phi can be filled as soon as a private cell finishes. ``data_sha256``,
    the loaded data's :attr:`Dataset.content_hash`, goes into every cell's options (and hash),
    so changed data never reuses a cell. Each cell runs the attacks its mechanism's release
    allows (:func:`audit.attack_plan.plan_attacks`). The options are checked by
    :func:`check_sweep`, not here.
    """
    attacks = plan_attacks(
        config.attacks,
        {m: get_mechanism(m).release for m in (BASELINE, *config.mechs)},
    )
    data = () if data_sha256 is None else (("data_sha256", data_sha256),)
    pairs: list[tuple[CellConfig, CellConfig]] = []
    for seed in config.seeds:
        base = CellConfig(
            config.dataset,
            BASELINE,
            get_mechanism(BASELINE).param_name,
            None,
            seed,
            setting_profile(config, BASELINE, None, None),
            (
                ("profile_name", config.profile_name.value),
                *config.data_options(),
                *data,
                *config.precision_options(),
                *config.tune_options(),
            ),
            attacks=attacks[BASELINE],
        )
        pairs.append((base, base))
        for name in config.mechs:
            if name == BASELINE:
                continue
            mech = get_mechanism(name)
            options = setting_options(config, name)
            for param_name, value in _grid(mech, config, options):
                cell = CellConfig(
                    config.dataset,
                    name,
                    param_name,
                    float(value),
                    seed,
                    setting_profile(config, name, param_name, float(value)),
                    base.options,
                    mech_options=options if options.given() else None,
                    attacks=attacks[name],
                    audit=config.audit,
                )
                pairs.append((cell, base))
    return pairs


def check_sweep(config: SweepConfig, data: tuple[Dataset, dict[int, Split]] | None = None) -> None:
    """Every check of a sweep's options, in one place, before any cell runs: that they apply
    (:func:`_check_options_apply`), the attack plan, and each selected mechanism's
    :meth:`~audit.mechanisms.mechanism.Mechanism.check_options` (its grid values, its options,
    and, given the loaded ``data`` and its splits, the records' modality and sizes; |D_train| is
    the smallest over the seeds after the ``max_train`` cap), and, given ``data``, that images
    fit SSIM's window where a planned attack scores SSIM
    (:func:`~audit.attack_plan.check_ssim_window`). Called without ``data`` before the data is
    loaded, and with it after."""
    _check_options_apply(config)
    check_audit_clip_norm(config)
    if config.tune is not None:
        check_tuning_available()  # Optuna, an optional extra: named in one line
    # once the data is loaded (a dataset that cannot be read says so first), before any cell
    face = data is not None and config.profile.classifier == FACE_EMBEDDING
    if face and not face_embedding_available():
        raise ValueError(
            f"--dataset {config.dataset}'s classifier is {FACE_EMBEDDING}: {INSTALL_HINT}; "
            "or pass --classifier resnet-half"
        )
    if face and tuple(data[0].shape)[:1] != (3,):
        raise ValueError(
            f"--classifier {FACE_EMBEDDING} needs RGB images (3, H, W), and --dataset "
            f"{config.dataset}'s records are {tuple(data[0].shape)}; pass --classifier "
            "small-cnn, resnet or resnet-half"
        )
    mechs = (BASELINE, *config.mechs)
    releases = {m: get_mechanism(m).release for m in mechs}
    plan = plan_attacks(config.attacks, releases)
    facts = None if data is None else _data_facts(config, *data)
    if data is not None:
        dataset = data[0]
        check_ssim_window(
            dataset.shape,
            plan,
            releases,
            settings=attack_settings(
                attack_samples=config.profile.attack_samples, modality=dataset.modality
            ),
            what=f"--dataset {config.dataset}",
        )
    for name in config.mechs:
        if name == BASELINE:
            continue
        mech = get_mechanism(name)
        options = setting_options(config, name)
        points = _grid(mech, config, options)
        grid = [value for _, value in points]
        for batch_size in sorted(sweep_batch_sizes(config, name, points)):
            mech.check_options(options, grid=grid, batch_size=batch_size, data=facts)
    if facts is not None:
        _check_sizes(config, facts)


def _check_sizes(config: SweepConfig, facts: DataFacts) -> None:
    """The sizes the loaded data bounds, for every mechanism the non-private baseline included:
    a batch of at most |D_train| records (after the ``max_train`` cap), and a D_gen that fits in
    memory (its records in float32 and the utility classifier's copy of them)."""
    batch_size, n_train = _largest_batch(config), facts.n_train
    if batch_size > n_train:
        raise ValueError(
            f"--batch-size {batch_size} exceeds |D_train| = {n_train} (after the max-train cap) "
            f"for every mechanism, {BASELINE} included; choose a batch size of at most {n_train}"
        )
    n_gen = config.profile.gen_records or n_train
    values = math.prod(facts.record_shape)
    check_fits_memory(
        f"--gen-records {n_gen}",
        2 * 4 * n_gen * values,
        f"{n_gen} generated records of shape {tuple(facts.record_shape)} in float32, and the "
        "utility classifier's copy",
    )


def _largest_batch(config: SweepConfig) -> int:
    """The largest batch size of the sweep's cells (the paper's recipe sets it per setting)."""
    sizes = {setting_profile(config, BASELINE, None, None).batch_size}
    for m in config.mechs:
        if m != BASELINE:
            points = _grid(get_mechanism(m), config, setting_options(config, m))
            sizes |= sweep_batch_sizes(config, m, points)
    return max(sizes)


def _data_facts(config: SweepConfig, dataset: Dataset, splits: dict[int, Split]) -> DataFacts:
    cap = config.profile.max_train
    n_train = min(len(s.train) if cap is None else min(cap, len(s.train)) for s in splits.values())
    return DataFacts(record_shape=dataset.shape, n_train=n_train, epochs=config.profile.epochs)


def _check_options_apply(config: SweepConfig) -> None:
    """Refuse options of mechanisms not selected, and a ``--grid`` that is ambiguous.

    Options are refused by name when no selected mechanism reads them as the command line
    builds them (:func:`audit.mechanisms.build_options`); here the typed options must belong to
    selected mechanisms. One ``--grid`` gives one list of values; with private mechanisms of
    different parameters it would set z, eps_i and sigma alike, so all selected private
    mechanisms must share one parameter (cdp and cdp-termwise share the noise multiplier z);
    and no ``--target-epsilon``, which replaces the grid.
    """
    private = [m for m in config.mechs if m != BASELINE]
    for name, options in config.mech_options:
        if name not in private:
            raise ValueError(f"options given for --mech {name}, which is not selected")
        if not isinstance(options, get_mechanism(name).options_type):
            raise ValueError(
                f"{name} takes {get_mechanism(name).options_type.__name__}, "
                f"got {type(options).__name__}"
            )
    if config.grid is None:
        return
    if not private:
        raise ValueError(
            f"--grid does not apply to --mech {BASELINE} (the non-private baseline has no "
            "parameter); "
            "drop --grid or add a private mechanism"
        )
    if len({get_mechanism(m).param_name for m in private}) > 1:
        params = ", ".join(f"{m}: {get_mechanism(m).param_name}" for m in private)
        raise ValueError(
            f"--grid gives one list of values but --mech selects {len(private)} private "
            f"mechanisms with different parameters ({params}); run mechanisms of different "
            "parameters with a --grid each"
        )
    if any(getattr(o, "target_epsilon", None) is not None for _, o in config.mech_options):
        raise ValueError(
            "--target-epsilon replaces the grid with one calibrated noise multiplier; "
            "give either --target-epsilon or --grid, not both"
        )


def _grid(
    mech: Mechanism, config: SweepConfig, options: MechanismOptions
) -> list[tuple[str, float]]:
    """(parameter name, value) of each cell: the grid, or one cell for ``--target-epsilon``."""
    target = getattr(options, "target_epsilon", None)
    if target is not None:
        return [("target_epsilon", float(target))]
    values = config.grid or mech.default_grid_for(dataset_modality(config.dataset))
    return [(mech.param_name, value) for value in values]
