"""Attack a release made outside the suite: every attack the release allows, the held-out worst case
and the DCR baseline, written as a sweep writes a cell (``cells/<hash>/rows.json``, ``runs.csv``),
through the sweep's own attack runner and row builder
(:func:`audit.cell.attack_step.run_release_attacks`, :func:`audit.rows.filling.result_rows`), then
the release's report (:mod:`audit.release.release_report`). What it returns, :class:`ReleaseAttack`,
is read with ``.table()`` (the rows of ``runs.csv``) and ``.summary()`` (one line per threat
model)."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from attacks import Records, Release
from attacks.dcr import DcrResult, dcr_baseline
from attacks.registry import get_attack, sweep_attacks
from attacks.threat import applicable
from audit import io
from audit.attack_plan import attack_settings
from audit.cell.attack_step import run_release_attacks
from audit.config import CACHE_SCHEMA
from audit.mechanisms import Context
from audit.release.entry_points import as_released, check_model
from audit.release.record_sets import RecordSet, ReleaseRecords, Role
from audit.release.release_config import ReleaseAttackConfig, check_name
from audit.release.release_report import write_release_report
from audit.release.release_result import ReleaseAttack
from audit.release.release_rows import (
    DCR_FILE,
    EXTERNAL,
    RELEASE_PROFILE,
    check_release_out,
    claim_release,
    release_hash,
    release_inputs,
)
from audit.release.utility import check_test_set, release_utility
from audit.report.figure_style import FORMATS
from audit.results import (
    SCORES_FILE,
    begin_cell,
    cell_lock,
    cell_path,
    finish_cell,
    scores_key,
    write_csv,
)
from audit.rows.derived import accuracy_valid
from audit.rows.filling import result_rows
from audit.rows.row import Row
from dpvae_core.progress import ProgressFactory, null_progress
from dpvae_core.validation import check_fits_memory
from models.generation import gen_labels, generate

log = logging.getLogger(__name__)


__all__ = [
    "DCR_FILE",
    "EXTERNAL",
    "RELEASE_PROFILE",
    "ReleaseAttack",
    "ReleaseAttackConfig",
    "attack_arrays",
    "attack_release",
    "check_name",
]


def attack_release(
    records: ReleaseRecords,
    *,
    model: nn.Module | None = None,
    whole: bool = False,
    config: ReleaseAttackConfig,
    out: Path | None = None,
    progress: ProgressFactory = null_progress,
    test: RecordSet | None = None,
    formats: Sequence[str] = FORMATS,
    on_start: Callable[[], None] | None = None,
) -> ReleaseAttack:
    """Attack the release: ``model`` (a whole VAE where ``whole``, else its decoder; None for
    samples alone) with ``records.samples`` where given, else samples it draws from the prior.

    ``records`` is checked already (:class:`ReleaseRecords`); the model is run on one batch of
    members before any attack (:func:`~audit.release.entry_points.check_model`). With ``out``,
    writes the cell's files, ``runs.csv`` and the report (``out/report/report.md`` and
    ``report.html``, figures in ``formats``: what ``benchmark.py attack`` writes); an ``out``
    holding a sweep is refused before any work. ``on_start``: called once every check has
    passed, as the first attack starts (the command line prints its device there).
    """
    start = time.perf_counter()
    inputs = release_inputs(records, config, model=model, whole=whole, test=test)
    if out is not None:
        check_release_out(Path(out), inputs)  # one release attack per --out, before any work
    if test is not None:
        check_test_set(test, records)
    data = records.attack_data()
    if model is not None:
        if not records.labelled and getattr(getattr(model, "external", None), "conditional", False):
            raise ValueError("the model takes labels, but --members and --non-members carry none")
        where = "--vae" if whole else "--decoder"
        check_model(model, data.x[:2], data.y[:2], value_range=config.value_range, where=where)
    samples = records.records(Role.SAMPLES)
    if samples is None and model is not None:
        samples = _draw_samples(model, records, config, where=where)
    release = Release(
        model=model if whole else None,
        decoder=model,
        samples=samples,
        reference=records.records(Role.REFERENCE),
    )
    requested = config.attacks or sweep_attacks()
    names = [n for n in requested if applicable(get_attack(n), release)]
    skipped = [n for n in requested if n not in names]
    if config.attacks is not None and skipped:
        lacks = ", ".join(
            sorted(c.value for c in get_attack(skipped[0]).needs - release.capabilities)
        )
        raise ValueError(f"--attack {skipped[0]} needs {lacks}, which this release lacks")
    settings = attack_settings(attack_samples=config.attack_samples, modality=config.modality)
    ctx = Context(device=config.device, progress=progress)
    if on_start is not None:
        on_start()
    results = run_release_attacks(
        names, release, data, settings=settings, seed=config.seed, ctx=ctx
    )
    dcr = None
    if release.samples is not None:
        members, non_members = data.x[data.is_member], data.x[~data.is_member]
        dcr = dcr_baseline(release.samples.x, members, non_members)
    utility = {}
    if test is not None:
        gen = (release.samples.x, release.samples.y)
        utility = release_utility(
            gen,
            records.members,
            test,
            epochs=config.classifier_epochs,
            seed=config.seed,
            device=config.device,
            progress=progress,
        )
    digest = release_hash(inputs)
    facts = _facts(records, config, release, digest, time.perf_counter() - start, skipped, model)
    facts.update(utility)
    if test is not None:
        facts["privacy_notes"] += (
            f"; utility=classifier on the {len(release.samples)} samples (acc) and on the members "
            f"(acc_real), tested on {len(test)} user-given labelled records"
        )
    facts["utility_valid"] = accuracy_valid(
        acc=float(facts["acc"]),
        acc_base=float(facts["acc_base"]),
        acc_majority=float(facts.get("acc_majority", math.nan)),
        n_test=float(facts["n_test"]),
    )
    facts.update(_dcr_columns(dcr))
    rows = _rows(facts, results, release=release, config=config)
    scores = {scores_key(r.attack, r.distance.value, r.variant.value): r.scores for r in results}
    scores["is_member"] = data.is_member
    canonical = _canonical(config)
    attacked = ReleaseAttack(rows=rows, dcr=dcr, scores=scores, canonical=canonical)
    if out is None:
        return attacked
    cell_dir = _write(Path(out), digest, attacked, inputs)
    write_csv(Path(out))
    report = write_release_report(Path(out), formats=formats)
    return ReleaseAttack(
        rows=rows,
        dcr=dcr,
        scores=scores,
        cell_dir=cell_dir,
        report=report.markdown,
        canonical=canonical,
    )


def _dcr_columns(dcr: DcrResult | None) -> dict[str, object]:
    """The rows' DCR columns (:class:`~audit.rows.row.Row`'s ``dcr_*``); empty without samples."""
    if dcr is None:
        return {}
    return {
        "dcr_samples": dcr.n_samples,
        "dcr_share": dcr.share_closer_to_members,
        "dcr_expected_share": dcr.expected_share,
        "dcr_p_value": dcr.p_value,
        "dcr_passes": bool(dcr.passes),
    }


def _rows(
    facts: dict[str, object], results: list, *, release: Release, config: ReleaseAttackConfig
) -> tuple[Row, ...]:
    """One row per result, built as a cell's (:func:`audit.rows.filling.result_rows`), with the
    held-out worst case seeded as a cell's from its seed. The user drew the membership, so the
    attack-based epsilon bound is computed only where the user states that each record's
    membership was its own fair coin (``membership_coins``) and states a claim's delta
    (``epsilon_lower_attack`` NaN, with why, otherwise)."""
    return result_rows(
        facts,
        results,
        release=release,
        references=(),
        independent=config.membership_coins,
        seed=config.seed,
        delta=config.delta,
    )


def _draw_samples(
    model: nn.Module,
    records: ReleaseRecords,
    config: ReleaseAttackConfig,
    *,
    where: str = "--decoder",
) -> Records:
    """D_gen drawn from the released decoder: z ~ N(0, I), seeded from the config's seed; n =
    ``gen_records``, else half the attacked records (members plus non-members, rounded down:
    the member count of a balanced split, and its mean under fair coins); labels in the class
    shares of all attacked records (:meth:`ReleaseRecords.pool_labels`, exact counts).

    Size and labels are functions of the pool of candidates, never of which of them are
    members. Under ``membership_coins`` the one-run analysis (Steinke et al. 2023) needs every
    attack's guesses to be a function of the release alone (and of what is fixed before the
    coins: the candidates, which the auditor holds), and sample-based scores read D_gen; with
    n = |members| and the non-members' class shares, as before, a second coin draw over the same
    records gave another size and other labels (issue 40: 28 samples against 26). The
    candidates' labels are the auditor's to see; only their membership is secret. Two coin
    draws over the same records and seed give the same samples."""
    labels_from = torch.from_numpy(records.pool_labels())
    n = config.gen_records or len(labels_from) // 2
    check_sample_memory(n, records.members.record_shape)
    x, y = generate(model, gen_labels(labels_from, n, seed=config.seed), seed=config.seed)
    bad = int((~torch.isfinite(x).flatten(1).all(1)).sum())
    if bad:
        raise ValueError(
            f"{where}: decode returned NaN or infinite values for {bad} of the {n} latents "
            "drawn from the prior N(0, I) (the samples the attacks read)"
        )
    return Records(x.float().clamp(*config.value_range), y)


def check_sample_memory(n: int, record_shape: tuple[int, ...]) -> None:
    """Refuse ``n`` samples of ``record_shape`` that would not fit in memory (float32, the
    decoder's output and its clamped copy; --gen-records, before the decoder draws any)."""
    check_fits_memory(
        f"--gen-records {n}",
        2 * 4 * n * math.prod(record_shape),
        f"{n} samples of shape {tuple(record_shape)} in float32, twice",
    )


def _facts(records, config, release, digest, wall, skipped, model) -> dict[str, object]:
    n_samples = len(release.samples) if release.samples is not None else 0
    what = ", ".join(sorted(c.value for c in release.capabilities))
    notes = {
        "release": "external: " + what,
        "reference": f"{len(records.reference)} user-given records"
        if records.reference
        else "none",
        "samples": (
            "user-given"
            if records.samples
            else f"{n_samples} drawn from the released decoder's prior"
        )
        if release.samples is not None
        else "none",
        **({"not_run": ", ".join(skipped)} if skipped else {}),
        "claim": "stated by the user" if not math.isnan(config.epsilon) else "none stated",
        "membership": "independent fair coins, as the user states"
        if config.membership_coins
        else "drawn by the user (no attack-based bound)",
    }
    return {
        "dataset": config.name,
        "mech": EXTERNAL,
        "param_name": "",
        "param_value": math.nan,
        "seed": config.seed,
        "profile": RELEASE_PROFILE,
        "acc": math.nan,
        "acc_base": math.nan,
        "acc_real": math.nan,
        "n_test": len(records.non_members),
        "gen_records": n_samples,
        "train_test_gap": math.nan,
        "epsilon": config.epsilon,
        "delta": config.delta,
        "epsilon_method": "stated" if not math.isnan(config.epsilon) else "",
        "accountant": "",
        "privacy_notes": "; ".join(f"{k}={v}" for k, v in notes.items()),
        "epochs": 0,
        "batch_size": 0,
        "lr": math.nan,
        "latent_dim": int(model.latent_dim) if model is not None else 0,
        "n_train": len(records.members),
        "n_attack": len(records.members) + len(records.non_members),
        "clip_norm": math.nan,
        "wall_s": wall,
        "config_hash": digest,
        "code_version": "",
        "baseline_hash": "",
    }


def _canonical(config: ReleaseAttackConfig) -> dict[str, object]:
    """The release cell's canonical config (its ``config.json``)."""
    return {
        "cache_schema": CACHE_SCHEMA,  # read back by the report and the gate like a sweep's cells
        "dataset": config.name,
        "mech": EXTERNAL,
        "seed": config.seed,
        "profile": {"attack_samples": config.attack_samples, "gen_records": config.gen_records},
        "options": {"profile_name": RELEASE_PROFILE, "attacks": list(config.attacks or ())},
    }


def _write(out: Path, digest: str, attacked: ReleaseAttack, inputs: dict) -> Path:
    """Claim ``out`` for this release (``run.json`` records its inputs) and write its cell as a
    sweep writes one: old files removed, new ones written, their digests recorded, ``rows.json``
    last."""
    io.check_writable_dir(out)
    claim_release(out, inputs)
    cell_dir = cell_path(out, digest)
    with cell_lock(out, digest):
        begin_cell(cell_dir)
        io.write_json(cell_dir / "config.json", {"config": attacked.canonical, "hash": digest})
        io.save_npz(cell_dir / SCORES_FILE, attacked.scores)
        if attacked.dcr is not None:
            io.write_json(cell_dir / DCR_FILE, attacked.dcr.to_dict())
        finish_cell(out, cell_dir, {"rows": [row.to_dict() for row in attacked.rows]})
    return cell_dir


def attack_arrays(
    members: tuple[np.ndarray, np.ndarray | None],
    non_members: tuple[np.ndarray, np.ndarray | None],
    *,
    reference: tuple[np.ndarray, np.ndarray | None] | None = None,
    samples: tuple[np.ndarray, np.ndarray | None] | None = None,
    model: object | None = None,
    whole: bool = False,
    config: ReleaseAttackConfig | None = None,
    out: Path | None = None,
    test: tuple[np.ndarray, np.ndarray] | None = None,
) -> ReleaseAttack:
    """:func:`attack_release` from arrays ``(X, y)`` (y None where unlabelled) and a model (an
    :class:`~audit.release.entry_points.ExternalModel` or a module with the suite's protocol), each
    checked as the command line checks files and entry points. With ``out``, writes what
    ``benchmark.py attack --out`` writes: the cell, ``runs.csv`` and the report.

    Example::

        attacked = attack_arrays((X_m, None), (X_n, None), reference=(X_r, None),
                             samples=(X_s, None), out=Path("my-release"))
        attacked             # a few lines: the worst case, its interval, the verdict, DCR
        attacked.summary()   # one line per threat model
        attacked.table()     # runs.csv's rows
    """
    config = config or ReleaseAttackConfig()
    given = {
        Role.MEMBERS: members,
        Role.NON_MEMBERS: non_members,
        Role.REFERENCE: reference,
        Role.SAMPLES: samples,
        Role.TEST: test,
    }
    sets = {
        role: RecordSet.from_arrays(role, *pair, modality=config.modality)
        for role, pair in given.items()
        if pair is not None
    }
    records = ReleaseRecords(
        sets[Role.MEMBERS], sets[Role.NON_MEMBERS], sets.get(Role.REFERENCE), sets.get(Role.SAMPLES)
    )
    released = None
    if model is not None:
        where = "the model given (whole VAE)" if whole else "the model given (decoder)"
        released = as_released(model, whole=whole, where=where).to(config.device).eval()
    return attack_release(
        records, model=released, whole=whole, config=config, out=out, test=sets.get(Role.TEST)
    )
