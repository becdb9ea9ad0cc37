"""The ``audit`` command's flags and the request they make, checked before any work."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, fields
from pathlib import Path

from audit.cli.parsing import Parser, add_verbosity, finite_float, path_arg
from audit.empirical.cell_audit import audited_mechanisms, local_mechanisms
from audit.empirical.local import DRAWS
from audit.empirical.one_run import one_run_mechanisms
from audit.mechanisms import by_param_label, get_mechanism
from dpvae_core.validation import check_at_most


def build_audit_parser() -> argparse.ArgumentParser:
    from audit.datasets import dataset_names
    from audit.profiles import ProfileName

    one_run, local = ", ".join(one_run_mechanisms()), ", ".join(local_mechanisms())
    with_delta = ", ".join(m for m in local_mechanisms() if not get_mechanism(m).pure_dp)
    p = Parser(
        prog="benchmark.py audit",
        description="Empirical epsilon lower bound for one mechanism and parameter value. "
        f"{local}: black-box threshold tests on worst-case inputs (M draws each, "
        f"Clopper-Pearson at 95 % confidence); {one_run}: the one-run audit "
        "with m canaries in one extra training run of the mechanism, bounded by Steinke, Nasr "
        "and Jagielski (2023) and by the f-DP analysis of Mahloujifar, Melis and Chaudhuri; "
        "with --runs R, R runs and the Clopper-Pearson and GDP (Nasr et al. 2023) estimates "
        "over their pooled scores. The last line is the bare bound: one-run's (Steinke et al.) "
        "for one run, GDP's for --runs.",
    )
    p.add_argument("--dataset", default="lfw-subset", help=f"dataset: {', '.join(dataset_names())}")
    p.add_argument(
        "--mech", required=True, choices=audited_mechanisms(), help="the mechanism to audit"
    )
    params = by_param_label(audited_mechanisms())
    p.add_argument(
        "--grid",
        required=True,
        type=finite_float,
        metavar="VALUE",
        help="the parameter: "
        + ", ".join(f"{label} ({', '.join(mechs)})" for label, mechs in params.items()),
    )
    p.add_argument(
        "--profile",
        default=ProfileName.QUICK.value,
        choices=[x.value for x in ProfileName],
        help="sets the cell's training settings and the default M "
        + ", ".join(f"{k} {v:.0e}" for k, v in DRAWS.items()),
    )
    p.add_argument("--canaries", type=int, default=None, metavar="m", help=f"{one_run}: canaries m")
    p.add_argument(
        "--canary-kind",
        default="gradient",
        choices=("gradient", "input"),
        help="one-run audits: gradient canaries (the implementation) or input canaries scored "
        "by the strongest attack of the release (reconstruction; latent search for a released "
        "decoder) (default gradient)",
    )
    p.add_argument(
        "--k-plus", type=int, default=None, help="one-run: top scores guessed in (default: rule)"
    )
    p.add_argument(
        "--k-minus",
        type=int,
        default=None,
        help="one-run: bottom scores guessed out (default: rule)",
    )
    p.add_argument(
        "--input-design",
        default=None,
        choices=("uniform-noise", "blocks", "patches", "marked-mean", "mean-blocks", "label-slot"),
        help="input canaries (audit/empirical/input_canaries.py): uniform-noise records; "
        "images only: blocks (random black-and-white 5x5 patterns), patches (black, one white "
        "block of a grid each), marked-mean (D_val's mean image, one block of the grid flipped "
        "each), "
        "mean-blocks (D_val's mean plus a random +-0.5 8x8 pattern), label-slot (blocks "
        "images, each with its own label value outside the real classes; the audited model "
        "gets one extra class slot per canary; scored from the decoder alone) "
        "(default uniform-noise)",
    )
    p.add_argument(
        "--copies",
        type=int,
        default=1,
        metavar="k",
        help="input canaries: each included canary goes into D_train k times (one coin per "
        "canary); the bound is then compared with the group claim for k records (Mironov "
        "2017, Prop. 2, on the run's RDP curve) (default 1)",
    )
    p.add_argument(
        "--reference-model",
        action="store_true",
        help="input canaries: score minus the same attack's score on a model trained without "
        "canaries (one more training)",
    )
    p.add_argument(
        "--clip-norm",
        type=finite_float,
        default=None,
        help=f"{one_run}: the clip norm C of the audited runs (the claim does "
        "not depend on it; default the mechanism's)",
    )
    p.add_argument(
        "--guess-rule",
        default="design",
        choices=("design", "quarter"),
        help="one-run guesses where --k-plus/--k-minus are not given: design (the guesses that "
        "maximise the bound a mechanism at its claim would give, from m, delta and the claim "
        "only) or quarter (m/4 each) (default design)",
    )
    p.add_argument(
        "--runs",
        type=int,
        default=None,
        metavar="R",
        help=f"{one_run}: R training runs with gradient canaries (each canary in "
        "about half of them), cached in --out and resumable; Clopper-Pearson (threshold from "
        "the first R//2 runs) and GDP estimates over the pooled scores",
    )
    p.add_argument(
        "--out", type=path_arg, default=None, help="--runs: where each run's scores are cached"
    )
    p.add_argument(
        "--executor",
        default="local",
        choices=("local", "ray"),
        help="--runs: where runs train: local (this process) or ray (each run a Ray task, as "
        "sweep cells)",
    )
    p.add_argument(
        "--delta",
        type=finite_float,
        default=None,
        help=f"one-run audits, {with_delta}: the delta at which both the claim and the bound are "
        "computed (default the claim's: 1/N_train, or 1/|D| for a local randomizer); Steinke "
        "et al.'s one-run bound is computed at any delta and proves nothing once 2 delta >= "
        "0.05",
    )
    p.add_argument("--draws", type=int, default=None, metavar="M", help=f"{local}: draws M")
    p.add_argument("--seed", type=int, default=0, help="root seed (cell and audit)")
    p.add_argument(
        "--device",
        default="auto",
        help="one-run audits: auto (default: the first CUDA GPU where there is one, else the "
        "CPU; printed as the audit's training starts), cpu, cuda or cuda:N",
    )
    p.add_argument("--data-home", type=path_arg, default=None, help="where LFW/MotionSense live")
    add_verbosity(p)
    return p


#: The largest --canaries, --copies, --runs and --draws, each far past the designs' (m 1000
#: gradient or 100 input canaries, M up to 10^6 draws): more would allocate past a machine's
#: memory or train for weeks, so they are refused before any work.
AUDIT_LIMITS = (
    ("canaries", 100_000, "100 times the default m of gradient canaries"),
    ("copies", 100, "100 copies of each canary already outnumber most training sets"),
    ("runs", 1000, "each run is one training of the mechanism"),
    ("draws", 10**8, "100 times the paper profile's M; the draws are held in memory"),
)
#: The input canaries' design where --input-design is not given.
INPUT_DESIGN = "uniform-noise"


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class AuditRequest:
    """A validated ``benchmark.py audit`` request (one mechanism, one parameter value)."""

    dataset: str
    mech: str
    grid: float
    profile: str
    seed: int = 0
    canaries: int | None = None
    canary_kind: str = "gradient"
    k_plus: int | None = None
    k_minus: int | None = None
    guess_rule: str = "design"
    input_design: str | None = None
    copies: int = 1
    reference_model: bool = False
    clip_norm: float | None = None
    runs: int | None = None
    out: Path | None = None
    executor: str = "local"
    delta: float | None = None
    draws: int | None = None
    device: str = "cpu"  # "auto" until check_environment resolves it
    data_home: Path | None = None
    device_reason: str = ""  # why this device (DeviceChoice.reason), printed by one-run audits

    def __post_init__(self) -> None:
        audited = tuple(audited_mechanisms())
        if self.mech not in audited:
            raise ValueError(f"unknown mechanism {self.mech!r} to audit; choose one of {audited}")
        one_run_mechs = one_run_mechanisms()
        _positive("--canaries", self.canaries)
        _positive("--draws", self.draws)
        _positive("--copies", self.copies)
        if self.copies != 1 and self.canary_kind != "input":
            raise ValueError("--copies applies to input canaries (--canary-kind input) only")
        if self.canary_kind != "input" and (self.input_design or self.reference_model):
            given = "--input-design" if self.input_design else "--reference-model"
            raise ValueError(
                f"{given} applies to input canaries only; add --canary-kind input (the "
                f"{self.canary_kind} canaries ignore it)"
            )
        for name, limit, why in AUDIT_LIMITS:
            value = getattr(self, name)
            if value is not None:
                check_at_most(f"--{name}", value, limit, why)
        if self.seed < 0:
            raise ValueError(f"--seed must be >= 0, got {self.seed!r}")
        if not (math.isfinite(self.grid) and self.grid > 0):
            raise ValueError(f"--grid must be a positive finite number, got {self.grid!r}")
        one_run = ", ".join(one_run_mechs)
        guesses = (self.canaries, self.k_plus, self.k_minus)
        if self.mech not in one_run_mechs and guesses != (None,) * 3:
            raise ValueError(
                f"--canaries/--k-plus/--k-minus apply to {one_run} only, not {self.mech!r}"
            )
        if self.delta is not None and not 0 < self.delta < 1:
            raise ValueError(f"--delta must lie in (0, 1), got {self.delta!r}")
        if get_mechanism(self.mech).pure_dp and self.delta is not None:
            raise ValueError(f"--delta does not apply to {self.mech} (pure eps-DP, delta = 0)")
        if self.runs is not None:
            if self.mech not in one_run_mechs:
                raise ValueError(f"--runs applies to {one_run} only, not {self.mech!r}")
            if self.runs < 2:
                raise ValueError(f"--runs must be an integer >= 2, got {self.runs!r}")
            if self.out is None:
                raise ValueError("--runs needs --out DIR (where the runs' scores are cached)")
            if self.canary_kind != "gradient":
                raise ValueError("--runs audits gradient canaries only; drop --canary-kind")
        if self.mech not in one_run_mechs and (self.clip_norm is not None or self.reference_model):
            raise ValueError(f"--clip-norm/--reference-model apply to {one_run} only")
        if self.clip_norm is not None and not (
            math.isfinite(self.clip_norm) and self.clip_norm > 0
        ):
            raise ValueError(f"--clip-norm must be a positive number, got {self.clip_norm!r}")
        if self.runs is None and (self.out is not None or self.executor != "local"):
            raise ValueError("--out and --executor apply with --runs R only")
        if self.mech in one_run_mechs and self.draws is not None:
            local = ", ".join(local_mechanisms())
            raise ValueError(f"--draws applies to {local}; {self.mech} takes --canaries")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AuditRequest:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names})
