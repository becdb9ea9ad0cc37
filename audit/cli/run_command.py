"""The sweep: ``benchmark.py [--dataset NAME] [--mech MECH ...] [--profile P] ...``.

The arguments become one frozen, validated :class:`~audit.config.SweepConfig` here (the run
request: profile overrides applied, each mechanism's typed options built once); nothing deeper
sees the argparse namespace.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from pathlib import Path

from audit.cli.logs import configure_logging
from audit.cli.parsing import (
    Parser,
    add_verbosity,
    finite_float,
    int_or_auto,
    path_arg,
    positive_int_or_all,
)
from audit.cli.tune_flags import add_tune_flags

SUBCOMMANDS = ("epsilon", "audit", "report", "check")


def build_run_parser() -> argparse.ArgumentParser:
    from attacks.registry import sweep_attacks
    from audit.datasets import dataset_names
    from audit.empirical.cell_audit import audited_mechanisms, local_mechanisms
    from audit.mechanisms import (
        BASELINE,
        available_mechanisms,
        by_param_label,
        private_mechanisms,
    )
    from audit.profiles import PROFILES, SERIES_EPOCHS, ProfileName
    from dpvae_core.precision import Precision

    params = by_param_label(private_mechanisms())
    p = Parser(
        prog="benchmark.py",
        description="Train VAEs under a privacy mechanism, attack them with the reconstruction "
        "membership-inference attack (MSE and SSIM), measure the utility of generated data, and "
        "write one CSV row per (dataset, mechanism, parameter, seed, distance) to OUT/runs.csv. "
        f"Other commands: {', '.join(SUBCOMMANDS)} (run 'benchmark.py COMMAND --help').",
    )
    p.add_argument(
        "--dataset",
        default="lfw-subset",
        help=f"dataset: {', '.join(dataset_names())} (PATH: an .npz with X and y)",
    )
    p.add_argument(
        "--mech",
        nargs="+",
        default=[BASELINE],
        metavar="MECH",
        help="mechanism(s): "
        + ", ".join(available_mechanisms())
        + f", or 'all'; the non-private baseline ({BASELINE}) always runs too, for phi",
    )
    p.add_argument(
        "--profile",
        default=ProfileName.STANDARD.value,
        choices=[x.value for x in ProfileName],
        help="quick: CI scale (minutes); standard: a full grid on an embedded dataset "
        "within the hour on 2 cores; paper: the trade-off paper's scale (GPU)",
    )
    p.add_argument(
        "--out",
        type=path_arg,
        default=None,
        help="output directory (default results/DATASET-PROFILE)",
    )
    p.add_argument("--seeds", nargs="+", type=int, default=[0], help="root seeds, one run each")
    p.add_argument(
        "--device",
        default="auto",
        help="auto (default: the first CUDA GPU where there is one, else the CPU; the choice is "
        "printed and each cell's metadata records it), cpu, cuda or cuda:N",
    )
    p.add_argument(
        "--precision",
        default="auto",
        choices=["auto", *(precision.value for precision in Precision)],
        help="arithmetic of the non-private computations (non-private and perturbation-VAE "
        "training, generation, the attacks' decoding, the classifier): auto (default: bf16 on a "
        "CPU with AVX-512 BF16 or AMX, and on a GPU where a probe of a few training steps "
        "measures it faster; else float32; printed before any work), float32, bf16 (a GPU with "
        "bf16, or such a CPU) or fp16 (CUDA); autocast, float32 weights. DP-Adam's norms, "
        "clipping, sum and noise, and VAE-LDP's noise, stay float32. Part of every cell's hash "
        "but float32's; one precision per --out (auto takes the one the --out holds)",
    )
    p.add_argument(
        "--data-home",
        type=path_arg,
        default=None,
        help="where downloadable datasets (LFW, MotionSense) live or are downloaded to",
    )
    p.add_argument(
        "--window-stride",
        type=int,
        default=None,
        metavar="N",
        help="motionsense: samples between the starts of consecutive 10 s windows of a "
        "recording (default 500: non-overlapping; 250: half overlap); recorded in every cell",
    )
    p.add_argument(
        "--attack",
        nargs="+",
        default=None,
        metavar="NAME",
        help="attack(s) every cell runs, from the sweep's attack list ("
        + ", ".join(sweep_attacks())
        + "); each must apply to what every selected mechanism releases "
        "(default: every attack of the list the release allows, the cell's held-out worst case "
        "over them; name some to restrict)",
    )
    p.add_argument(
        "--grid",
        nargs="+",
        type=finite_float,
        default=None,
        help="parameter values replacing the mechanism's default grid ("
        + "; ".join(f"{label} for {', '.join(mechs)}" for label, mechs in params.items())
        + ")",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--resume",
        dest="overwrite",
        action="store_false",
        default=False,
        help="reuse finished cells (the default)",
    )
    g.add_argument(
        "--overwrite",
        dest="overwrite",
        action="store_true",
        help="recompute every cell even if it finished before",
    )
    p.add_argument(
        "--no-progress", dest="progress", action="store_false", help="hide progress bars"
    )
    p.add_argument(
        "--no-report",
        dest="report",
        action="store_false",
        help="do not write OUT/report (tables and figures) at the end; "
        "'benchmark.py report OUT' writes it later",
    )
    p.add_argument(
        "--canary-audit",
        action="store_true",
        help="run each private cell's empirical audit (epsilon_lower columns): "
        f"{', '.join(local_mechanisms())} threshold tests on worst-case inputs (M draws by "
        "profile, seconds); "
        f"{', '.join(m for m in audited_mechanisms() if m not in local_mechanisms())} the "
        "one-run audit, twice (gradient canaries: white box; input canaries "
        "scored by the release's strongest attack), m canaries by profile, one extra training "
        "run each. Audited cells get their own hashes. ('benchmark.py audit' audits one "
        "setting on its own.)",
    )
    add_verbosity(p)
    ex = p.add_argument_group("where cells run")
    ex.add_argument(
        "--executor",
        default="local",
        choices=["local", "ray"],
        help="local: one cell after another in this process (default); ray: each cell is a Ray "
        "task (pip install -e '.[ray]'); the driver alone writes cells and runs.csv",
    )
    ex.add_argument(
        "--workers",
        type=int_or_auto,
        default=None,
        metavar="N",
        help="local: cells computed at a time, each in its own process with a share of the "
        "cores (auto, the default: 1 on the CPU; on a GPU up to 8 side by side, as cores and "
        "free memory allow: one cell's small kernels leave the GPU idle most of its time)",
    )
    ex.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="a running Ray cluster (e.g. auto, ray://host:10001); default: start a local one",
    )
    ex.add_argument(
        "--cell-cpus", type=finite_float, default=None, metavar="N", help="CPUs per cell task (1)"
    )
    ex.add_argument(
        "--cell-gpus", type=finite_float, default=None, metavar="N", help="GPUs per cell task (0)"
    )

    prof = p.add_argument_group("profile overrides (defaults come from --profile)")
    std = PROFILES[ProfileName.STANDARD]
    quick_series = SERIES_EPOCHS[ProfileName.QUICK]
    prof.add_argument(
        "--epochs",
        type=int,
        help=f"target VAE epochs (standard: {std.epochs}; quick: "
        f"{PROFILES[ProfileName.QUICK].epochs}, {quick_series} for series datasets)",
    )
    prof.add_argument("--batch-size", type=int, help=f"VAE batch size (standard: {std.batch_size})")
    prof.add_argument(
        "--lr", type=finite_float, help=f"VAE Adam learning rate (standard: {std.lr})"
    )
    prof.add_argument("--latent-dim", type=int, help=f"latent size d (standard: {std.latent_dim})")
    prof.add_argument("--beta", type=finite_float, help=f"KL weight (standard: {std.beta})")
    prof.add_argument(
        "--attack-samples",
        type=int,
        help=f"reconstructions N per attacked record (paper 300; standard: {std.attack_samples})",
    )
    prof.add_argument(
        "--attack-records",
        type=positive_int_or_all,
        default=argparse.SUPPRESS,
        help="size of D_atk, half members half non-members, or 'all' "
        "(paper 2000; capped by |D_train| and |D_test|)",
    )
    from models.factory import CLASSIFIERS

    prof.add_argument(
        "--classifier",
        choices=CLASSIFIERS,
        help="the target classifier (images): small-cnn, resnet, resnet-half, or face-embedding "
        "(dlib's frozen face descriptor and a logistic regression; needs the faces extra; "
        "lfw20 and lfw50 use it)",
    )
    prof.add_argument("--classifier-epochs", type=int, help="target classifier max epochs")
    prof.add_argument("--classifier-patience", type=int, help="early-stopping patience")
    prof.add_argument(
        "--max-train",
        type=positive_int_or_all,
        default=argparse.SUPPRESS,
        help=f"cap on |D_train| (stratified subset), or 'all' (standard: {std.max_train}; "
        "lfw20 and lfw50: 10 records per person)",
    )

    prof.add_argument(
        "--gen-records",
        type=int,
        help="|D_gen|: generated records the utility classifier trains on, labels in "
        f"D_val's class shares (standard: {std.gen_records}; quick: "
        f"{PROFILES[ProfileName.QUICK].gen_records})",
    )
    prof.add_argument(
        "--reference-models",
        type=int,
        metavar="R",
        help="reference VAEs for the calibrated variants of latent search and the likelihood "
        "attack, trained with the cell's mechanism (a private cell also trains R non-private "
        "ones: the -nonprivate variants), once per dataset, seed and recipe, cached in "
        "OUT/reference-models; "
        f"0 trains none (quick: {PROFILES[ProfileName.QUICK].reference_models}, standard: "
        f"{std.reference_models}, paper: {PROFILES[ProfileName.PAPER].reference_models})",
    )

    prof.add_argument(
        "--membership-coins",
        action="store_true",
        default=None,
        help="draw D_atk's membership by independent fair coins (each candidate joins D_train "
        "on its own coin; |D_train| varies) so that every attack's scores also give an "
        "epsilon lower bound (epsilon_lower_attack); default: the balanced D_atk, no such bound",
    )

    mech = p.add_argument_group("mechanism options (each mechanism declares its own)")
    from audit.mechanisms import declared_options
    from audit.options import option_flags

    for option in option_flags(declared_options()):
        option.add_to(mech)
    add_tune_flags(p)
    return p


PROFILE_FIELDS = (
    "epochs",
    "batch_size",
    "lr",
    "latent_dim",
    "beta",
    "attack_samples",
    "attack_records",
    "classifier",
    "classifier_epochs",
    "classifier_patience",
    "max_train",
    "gen_records",
    "reference_models",
    "membership_coins",
)


def config_from_args(args: argparse.Namespace):  # -> SweepConfig
    from audit.config import SweepConfig
    from audit.mechanisms import (
        available_mechanisms,
        build_options,
        declared_options,
        parse_mechanism,
    )
    from audit.profiles import ProfileName, override_profile, profile_for_dataset

    profile_name = ProfileName(args.profile)
    overrides = {f: getattr(args, f) for f in PROFILE_FIELDS if hasattr(args, f)}
    profile = profile_for_dataset(profile_name, args.dataset)
    for name in ("attack_records", "max_train"):  # 'all' is None, which must still override
        if name in overrides and overrides[name] is None:
            from dataclasses import replace

            profile = replace(profile, **{name: None})
    profile = override_profile(profile, **overrides)
    if "all" in args.mech:
        mechs = tuple(available_mechanisms())
    else:
        mechs = tuple(parse_mechanism(m) for m in args.mech)
    # every option some registered mechanism reads, typed once here per selected mechanism
    names = {n for options_type in declared_options().values() for n in options_type.names()}
    options = build_options(mechs, {k: getattr(args, k, None) for k in sorted(names)})
    out = (
        args.out
        or Path("results") / f"{args.dataset.replace(':', '_').replace('/', '_')}-{args.profile}"
    )
    return SweepConfig(
        dataset=args.dataset,
        mechs=mechs,
        profile_name=profile_name,
        profile=profile,
        seeds=tuple(args.seeds),
        out=out,
        device=args.device,
        data_home=args.data_home,
        grid=tuple(args.grid) if args.grid else None,
        overwrite=args.overwrite,
        progress=args.progress,
        mech_options=options,
        window_stride=args.window_stride,
        executor=args.executor,
        ray=_ray_settings(args),
        report=args.report,
        attacks=tuple(args.attack) if args.attack else None,
        audit=args.canary_audit,
        precision=args.precision,
        tune=args.tune,
        tune_seed=args.tune_seed,
        workers=args.workers,
    )


def _ray_settings(args: argparse.Namespace):  # -> RaySettings | None
    given = {
        "address": args.ray_address,
        "cell_cpus": args.cell_cpus,
        "cell_gpus": args.cell_gpus,
    }
    given = {k: v for k, v in given.items() if v is not None}
    if args.executor != "ray":
        if given:
            flags = ", ".join("--" + k.replace("_", "-") for k in given)
            flags = flags.replace("--address", "--ray-address")
            raise ValueError(f"{flags} apply to --executor ray only; add --executor ray")
        return None
    from audit.config import RaySettings

    return RaySettings(**given)


def tqdm_progress(*, total: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, leave=False, dynamic_ncols=True)


def run_main(argv: Sequence[str]) -> int:
    args = build_run_parser().parse_args(argv)
    configure_logging(args.verbose)
    config = config_from_args(args)
    from audit.sweep.runner import report_command, run_sweep
    from dpvae_core.precision import check_precision_supported
    from dpvae_core.progress import null_progress
    from dpvae_core.validation import AUTO, resolve_device

    device = resolve_device(config.device).device  # an explicit one this machine lacks: refused
    if config.precision != AUTO:
        check_precision_supported(config.precision, device)
    result = run_sweep(  # resolves auto after its checks and prints the choices
        config,
        progress=tqdm_progress if config.progress else null_progress,
        command=shlex.join(["python", "benchmark.py", *argv]),
        announce=lambda line: print(line, flush=True),
    )
    print(f"{result.ran} cell(s) run, {result.reused} reused; results: {result.csv_path}")
    if result.report is not None:
        print(f"report: {result.report}")
        from audit.report.sweet_spots import recommendation_lines
        from audit.report.writer import SWEET_SPOTS_CSV

        for line in recommendation_lines(result.report.parent / SWEET_SPOTS_CSV):
            print(f"recommended: {line}")
    elif config.report:
        rerun = report_command(config.out, config.data_home)
        print(f"no report (it failed, see the warning above); rerun: {rerun}")
    return 0
