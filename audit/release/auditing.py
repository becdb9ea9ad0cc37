"""Audit a release made outside the suite: every attack the release allows, the held-out worst
case and the DCR baseline, written as a sweep writes a cell (``cells/<hash>/rows.json``,
``runs.csv``), through the sweep's own attack runner and row builder
(:func:`audit.pipeline.run_release_attacks`, :func:`audit.pipeline.attack_rows`), then the
release's report (:mod:`audit.release.release_report`). What it returns,
:class:`ReleaseAudit`, is read with ``.table()`` (the rows of ``runs.csv``) and ``.summary()``
(one line per threat model)."""

from __future__ import annotations

import hashlib
import logging
import math
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from attacks import Records, Release
from attacks.attack import check_positive_ints, check_seed
from attacks.dcr import DcrResult, dcr_baseline
from attacks.registry import get_attack
from attacks.threat import applicable
from audit import io
from audit.attack_plan import SWEEP_ATTACKS, attack_settings, check_requested
from audit.cell_rows import result_rows
from audit.config import CACHE_SCHEMA
from audit.derived import accuracy_valid
from audit.mechanisms import Context
from audit.pipeline import run_release_attacks
from audit.release.entry_points import as_released, check_model
from audit.release.record_sets import SERIES_RANGE, AuditRecords, RecordSet, Role
from audit.release.release_report import FORMATS, write_release_report
from audit.release.release_rows import (
    DCR_FILE,
    EXTERNAL,
    RELEASE_PROFILE,
    check_release_out,
)
from audit.release.release_summary import cell_summary, one_line, summary_frame
from audit.release.utility import check_test_set, release_utility
from audit.results import SCORES_FILE, cell_path, run_hash, scores_key, setting_hash, write_csv
from audit.results.layout import SORT_KEYS
from audit.rows import Row
from dpvae_core.progress import ProgressFactory, null_progress
from dpvae_core.records import Modality
from dpvae_core.seeding import Purpose, torch_generator
from dpvae_core.validation import parse_enum
from models.generation import gen_labels

log = logging.getLogger(__name__)

__all__ = [
    "DCR_FILE",
    "EXTERNAL",
    "RELEASE_PROFILE",
    "ReleaseAudit",
    "ReleaseAuditConfig",
    "audit_arrays",
    "audit_release",
    "check_name",
]

#: Records per batch when the released decoder draws samples.
GEN_BATCH = 512
#: The longest release name (it titles the report and names its figure files).
NAME_MAX = 80


def check_name(name: object) -> str:
    """``name`` if it can name a release (the rows' ``dataset`` column, the report's title, its
    figure files): one line of at most :data:`NAME_MAX` printable characters, not blank, no
    ``/`` or ``\\``; else ValueError in one line."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"--name must be a non-blank name, got {name!r}")
    bad = [c for c in name if unicodedata.category(c).startswith(("C", "Z")) and c != " "]
    if bad or "/" in name or "\\" in name or name != name.strip():
        raise ValueError(
            f"--name must be one line of printable characters without '/', '\\' or "
            f"leading/trailing spaces, got {name!r}"
        )
    if len(name) > NAME_MAX:
        raise ValueError(f"--name must be at most {NAME_MAX} characters, got {len(name)}")
    return name


@dataclass(frozen=True, kw_only=True)
class ReleaseAuditConfig:
    """How to audit a release.

    Attributes:
        name: the ``dataset`` column of the rows (names the report's section; one line,
            :func:`check_name`).
        modality: what the records are (images in [0, 1], series in [-1, 1]).
        attacks: the attacks to run (registered names of the sweep's list); None: every one
            the release allows.
        attack_samples: N, the samples behind each score (as a profile's ``attack_samples``).
        seed: the root seed; attacks and the worst case are seeded from it as a cell's are
            from the cell's seed, so a cell exported with its seed gives the cell's rows.
        epsilon, delta: the privacy the user claims for the release (NaN: none stated).
        gen_records: samples the released decoder draws where no samples are given (None:
            as many as there are members).
        device: where the models and attacks run.
        membership_coins: the user states that each record of members + non-members was put
            into the training set by its own fair coin (the premise of the one-run analysis);
            only then, with a claim, is ``epsilon_lower_attack`` computed from each attack's
            scores (Steinke, Nasr and Jagielski 2023; else NaN, with why).
        classifier_epochs: the utility classifiers' epoch budget where a labelled test set is
            given (:mod:`audit.release.utility`; early stopping on a holdout of their own
            training records).
    """

    name: str = "release"
    modality: Modality = Modality.IMAGE
    attacks: tuple[str, ...] | None = None
    attack_samples: int = 100
    seed: int = 0
    epsilon: float = math.nan
    delta: float = math.nan
    gen_records: int | None = None
    device: str = "cpu"
    membership_coins: bool = False
    classifier_epochs: int = 40

    def __post_init__(self) -> None:
        object.__setattr__(self, "modality", parse_enum(Modality, self.modality, "modality"))
        if self.modality not in (Modality.IMAGE, Modality.SERIES):
            raise ValueError(f"modality must be image or series, got {self.modality.value!r}")
        check_name(self.name)
        if self.attacks is not None:
            object.__setattr__(self, "attacks", check_requested(list(self.attacks)))
        check_seed(self.seed)
        check_positive_ints(
            attack_samples=self.attack_samples, classifier_epochs=self.classifier_epochs
        )
        if self.gen_records is not None and self.gen_records < 1:
            raise ValueError(f"gen_records must be a positive integer, got {self.gen_records!r}")
        _check_claim(self.epsilon, self.delta)

    @property
    def value_range(self) -> tuple[float, float]:
        return SERIES_RANGE if self.modality is Modality.SERIES else (0.0, 1.0)


def _check_claim(epsilon: float, delta: float) -> None:
    if math.isnan(epsilon) != math.isnan(delta):
        raise ValueError(
            f"--epsilon and --delta go together, got epsilon {epsilon} and delta {delta}"
        )
    if not math.isnan(epsilon) and not (epsilon > 0 and math.isfinite(epsilon) and 0 <= delta < 1):
        raise ValueError(
            f"the claim needs a finite epsilon > 0 and 0 <= delta < 1, got epsilon {epsilon} "
            f"and delta {delta}"
        )


@dataclass(frozen=True, repr=False)
class ReleaseAudit:
    """What :func:`audit_release` produced.

    Read it with :meth:`table` (the rows of ``runs.csv``, a DataFrame) and :meth:`summary` (one
    line per threat model: the strongest attack, the held-out worst case with its interval, the
    verdict, the utility and DCR); its repr is a few lines.

    Attributes:
        rows: one :class:`~audit.rows.Row` per attack result.
        dcr: the DCR baseline (None without samples).
        scores: every result's scores (``scores_<attack>_<distance>_<variant>``) and
            ``is_member``, as the cell's ``scores.npz`` holds them.
        cell_dir: the release's cell (None where no ``out`` was given).
        report: the ``report.md`` written (None where no ``out`` was given).
        canonical: the cell's canonical config (its ``config.json``).
    """

    rows: tuple[Row, ...]
    dcr: DcrResult | None
    scores: dict[str, np.ndarray]
    cell_dir: Path | None = None
    report: Path | None = None
    canonical: dict = field(default_factory=dict)

    def table(self) -> pd.DataFrame:
        """The release's rows as ``runs.csv`` holds them (its columns, in its order, and its
        ``utility_valid``; ``run_hash``, ``setting_hash`` and ``precision`` from the cell's
        config), one per attack result."""
        frame = pd.DataFrame([row.to_dict() for row in self.rows])
        frame["run_hash"] = run_hash(self.canonical)
        frame["setting_hash"] = setting_hash(self.canonical)
        frame["precision"] = self.canonical.get("options", {}).get("precision", "float32")
        frame = frame.sort_values(SORT_KEYS, na_position="first").reset_index(drop=True)
        return frame

    def summary(self) -> pd.DataFrame:
        """One line per threat model (samples only, decoder only, encoder and decoder, those
        the release allows), each over its own attacks and the weaker models':
        :func:`audit.release.release_summary.summary_frame`."""
        scores = dict(self.scores)
        is_member = scores.pop("is_member")
        return summary_frame(self.table(), lambda digest: (is_member, scores))

    @property
    def name(self) -> str:
        return self.rows[0].dataset if self.rows else ""

    def __repr__(self) -> str:
        if not self.rows:
            return "ReleaseAudit(no rows)"
        first = self.rows[0]
        widest = pd.DataFrame(cell_summary(self.table(), None)).tail(1)
        lines = [
            f"ReleaseAudit {first.dataset!r}: {len(self.rows)} attack results on "
            f"{first.attack_members} + {first.attack_nonmembers} records, seed {first.seed}",
            "  " + one_line(widest),
            "  " + _utility_words(first) + "; " + _dcr_words(self.dcr),
        ]
        if self.report is not None:
            lines.append(f"  report: {self.report}")
        lines.append("  .table(): the rows of runs.csv; .summary(): one line per threat model")
        return "\n".join(lines)


def _utility_words(row: Row) -> str:
    if not math.isfinite(row.acc):
        return "utility not measured (no test set)"
    valid = "above chance" if row.utility_valid else "not above chance"
    return f"utility acc {row.acc:.3f} on {row.n_test} test records ({valid})"


def _dcr_words(dcr: DcrResult | None) -> str:
    if dcr is None:
        return "DCR not computed (no samples)"
    verdict = "passes" if dcr.passes else "fails"
    return (
        f"DCR {verdict} (share {dcr.share_closer_to_members:.3f} closer to a member, "
        f"expected {dcr.expected_share:.3f}, p = {dcr.p_value:.3g})"
    )


def audit_release(
    records: AuditRecords,
    *,
    model: nn.Module | None = None,
    whole: bool = False,
    config: ReleaseAuditConfig,
    out: Path | None = None,
    progress: ProgressFactory = null_progress,
    test: RecordSet | None = None,
    formats: Sequence[str] = FORMATS,
) -> ReleaseAudit:
    """Attack the release: ``model`` (a whole VAE where ``whole``, else its decoder; None for
    samples alone) with ``records.samples`` where given, else samples it draws from the prior.

    ``records`` is checked already (:class:`AuditRecords`); the model is run on one batch of
    members before any attack (:func:`~audit.release.entry_points.check_model`). With ``out``,
    writes the cell's files, ``runs.csv`` and the report (``out/report/report.md`` and
    ``report.html``, figures in ``formats``: what ``benchmark.py attack`` writes); an ``out``
    holding a sweep is refused before any work.
    """
    start = time.perf_counter()
    if out is not None:
        check_release_out(Path(out))
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
        samples = _draw_samples(model, records, config)
    release = Release(
        model=model if whole else None,
        decoder=model,
        samples=samples,
        reference=records.records(Role.REFERENCE),
    )
    requested = config.attacks or SWEEP_ATTACKS
    names = [n for n in requested if applicable(get_attack(n), release)]
    skipped = [n for n in requested if n not in names]
    if config.attacks is not None and skipped:
        lacks = ", ".join(
            sorted(c.value for c in get_attack(skipped[0]).needs - release.capabilities)
        )
        raise ValueError(f"--attack {skipped[0]} needs {lacks}, which this release lacks")
    settings = attack_settings(attack_samples=config.attack_samples, modality=config.modality)
    ctx = Context(device=config.device, progress=progress)
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
    digest = _config_hash(records, config, release, model, test)
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
    audit = ReleaseAudit(rows=rows, dcr=dcr, scores=scores, canonical=canonical)
    if out is None:
        return audit
    cell_dir = _write(Path(out), digest, audit)
    write_csv(Path(out))
    report = write_release_report(Path(out), formats=formats)
    return ReleaseAudit(
        rows=rows,
        dcr=dcr,
        scores=scores,
        cell_dir=cell_dir,
        report=report.markdown,
        canonical=canonical,
    )


def _dcr_columns(dcr: DcrResult | None) -> dict[str, object]:
    """The rows' DCR columns (:class:`~audit.rows.Row`'s ``dcr_*``); empty without samples."""
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
    facts: dict[str, object], results: list, *, release: Release, config: ReleaseAuditConfig
) -> tuple[Row, ...]:
    """One row per result, built as a cell's (:func:`audit.cell_rows.result_rows`), with the
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


def _draw_samples(model: nn.Module, records: AuditRecords, config: ReleaseAuditConfig) -> Records:
    """D_gen drawn from the released decoder: z ~ N(0, I), labels in the non-members' class
    shares (public-side records, not the members'), seeded from the config's seed."""
    labels_from = torch.from_numpy(
        records.non_members.y if records.labelled else np.zeros(len(records.non_members), np.int64)
    )
    n = config.gen_records or len(records.members)
    labels = gen_labels(labels_from, n, seed=config.seed)
    gen = torch_generator(config.seed, Purpose.GENERATE)
    device = next(iter(model.parameters()), torch.empty(0)).device
    out = []
    with torch.inference_mode():
        for start in range(0, n, GEN_BATCH):
            y = labels[start : start + GEN_BATCH]
            z = torch.randn(len(y), model.latent_dim, generator=gen)
            out.append(model.decode(z.to(device), y.to(device)).float().cpu())
    x = torch.cat(out).clamp(*config.value_range)
    return Records(x, labels.clone())


def _config_hash(
    records: AuditRecords, config: ReleaseAuditConfig, release: Release, model, test=None
) -> str:
    h = hashlib.sha256()
    for s in (records.members, records.non_members, records.reference, records.samples, test):
        if s is not None:
            h.update(s.role.value.encode())
            h.update(np.ascontiguousarray(s.x).tobytes())
            if s.y is not None:
                h.update(s.y.tobytes())
    if model is not None:
        for name, value in model.state_dict().items():
            h.update(name.encode())
            h.update(value.detach().cpu().contiguous().numpy().tobytes())
    h.update(repr(sorted(c.value for c in release.capabilities)).encode())
    h.update(
        repr(
            (config.attacks, config.attack_samples, config.seed, config.gen_records)
            + (config.epsilon, config.delta, config.membership_coins)
            + ((config.classifier_epochs,) if test is not None else ())
        ).encode()
    )
    return h.hexdigest()[:16]


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


def _canonical(config: ReleaseAuditConfig) -> dict[str, object]:
    """The release cell's canonical config (its ``config.json``)."""
    return {
        "cache_schema": CACHE_SCHEMA,  # read back by the report and the gate like a sweep's cells
        "dataset": config.name,
        "mech": EXTERNAL,
        "seed": config.seed,
        "profile": {"attack_samples": config.attack_samples, "gen_records": config.gen_records},
        "options": {"profile_name": RELEASE_PROFILE, "attacks": list(config.attacks or ())},
    }


def _write(out: Path, digest: str, audit: ReleaseAudit) -> Path:
    io.check_writable_dir(out)
    cell_dir = cell_path(out, digest)
    io.write_json(cell_dir / "config.json", {"config": audit.canonical, "hash": digest})
    io.save_npz(cell_dir / SCORES_FILE, audit.scores)
    if audit.dcr is not None:
        io.write_json(cell_dir / DCR_FILE, audit.dcr.to_dict())
    io.write_json(cell_dir / "rows.json", {"rows": [row.to_dict() for row in audit.rows]})
    return cell_dir


def audit_arrays(
    members: tuple[np.ndarray, np.ndarray | None],
    non_members: tuple[np.ndarray, np.ndarray | None],
    *,
    reference: tuple[np.ndarray, np.ndarray | None] | None = None,
    samples: tuple[np.ndarray, np.ndarray | None] | None = None,
    model: object | None = None,
    whole: bool = False,
    config: ReleaseAuditConfig | None = None,
    out: Path | None = None,
    test: tuple[np.ndarray, np.ndarray] | None = None,
) -> ReleaseAudit:
    """:func:`audit_release` from arrays ``(X, y)`` (y None where unlabelled) and a model (an
    :class:`~audit.release.entry_points.ExternalModel` or a module with the suite's protocol), each
    checked as the command line checks files and entry points. With ``out``, writes what
    ``benchmark.py attack --out`` writes: the cell, ``runs.csv`` and the report.

    Example::

        audit = audit_arrays((X_m, None), (X_n, None), reference=(X_r, None),
                             samples=(X_s, None), out=Path("my-release"))
        audit                # a few lines: the worst case, its interval, the verdict, DCR
        audit.summary()      # one line per threat model
        audit.table()        # runs.csv's rows
    """
    config = config or ReleaseAuditConfig()
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
    records = AuditRecords(
        sets[Role.MEMBERS], sets[Role.NON_MEMBERS], sets.get(Role.REFERENCE), sets.get(Role.SAMPLES)
    )
    released = None
    if model is not None:
        where = "the model given (whole VAE)" if whole else "the model given (decoder)"
        released = as_released(model, whole=whole, where=where).to(config.device).eval()
    return audit_release(
        records, model=released, whole=whole, config=config, out=out, test=sets.get(Role.TEST)
    )
