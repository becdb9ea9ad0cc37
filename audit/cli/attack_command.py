"""``benchmark.py attack``: attack a release made outside the suite (:mod:`audit.release`).

Everything is read and checked before any attack runs: the record files, their agreement, the
model (one batch), the output directory; bad input is one ``error:`` line and status 2.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path

from attacks.registry import sweep_attacks
from audit.cli.logs import configure_logging
from audit.cli.parsing import Parser, add_verbosity, finite_float, path_arg
from audit.release.record_sets import ReleaseRecords, Role, read_records
from dpvae_core.path_checks import check_input_file, check_output_dir
from dpvae_core.records import Modality
from dpvae_core.validation import DeviceChoice, resolve_device

#: The utility classifiers' epoch budget where --test is given and --classifier-epochs is not.
CLASSIFIER_EPOCHS = 40


def build_attack_parser() -> Parser:
    p = Parser(
        prog="benchmark.py attack",
        description="Attack a release you made yourself: every attack it allows, the held-out "
        "worst case and the DCR baseline, against your members and non-members. Record files "
        "are .npz files as for --dataset npz:PATH (X, and y where labels are known).",
    )
    p.add_argument("--members", type=path_arg, required=True, help="the training records (.npz)")
    p.add_argument(
        "--non-members",
        type=path_arg,
        required=True,
        help="records of the same population the model never saw (.npz)",
    )
    p.add_argument(
        "--reference",
        type=path_arg,
        help="further records the model never saw, the attacker's "
        "side knowledge (DOMIAS, PCA features); in neither --members nor --non-members",
    )
    p.add_argument("--samples", type=path_arg, help="the released synthetic records (.npz)")
    model = p.add_mutually_exclusive_group()
    model.add_argument(
        "--decoder",
        metavar="PKG.MOD:FN",
        help="entry point returning the released decoder "
        "(an audit.release.ExternalModel or a module with decode(z, y) and latent_dim); "
        "path/to/file.py:FN works too",
    )
    model.add_argument(
        "--vae",
        metavar="PKG.MOD:FN",
        help="entry point returning the released VAE (encoder and decoder)",
    )
    p.add_argument("--epsilon", type=finite_float, help="the epsilon you claim for the release")
    p.add_argument("--delta", type=finite_float, help="the delta of that claim")
    p.add_argument(
        "--test",
        type=path_arg,
        help="labelled real test records (.npz, never seen by the model): trains the suite's "
        "classifier on the samples (acc) and on the members (acc_real) and scores it on them; "
        "without it the rows carry no utility",
    )
    p.add_argument(
        "--classifier-epochs",
        type=int,
        default=None,
        help="--test: the classifiers' epoch budget (early stopping on a 20 %% holdout of their "
        f"own training records; default {CLASSIFIER_EPOCHS})",
    )
    p.add_argument(
        "--membership-coins",
        action="store_true",
        help="state that each record of --members and --non-members went into the training set "
        "by its own fair coin: with --epsilon/--delta, each attack's scores then give an "
        "epsilon lower bound at 95 %% confidence (epsilon_lower_attack; one-run analysis)",
    )
    p.add_argument("--out", type=path_arg, required=True, help="output directory (rows, report)")
    p.add_argument(
        "--name",
        default=None,
        help="the release's name: the rows' dataset column and the report's title (one line; "
        "default: the --decoder/--vae module file's stem, else the --samples file's stem)",
    )
    p.add_argument(
        "--modality",
        choices=[Modality.IMAGE.value, Modality.SERIES.value],
        default=Modality.IMAGE.value,
        help="images in [0, 1] (or 0..255 integers) or series (N, T, F) in [-1, 1]",
    )
    p.add_argument(
        "--attack",
        nargs="+",
        metavar="NAME",
        help="run only these attacks "
        f"(default: every one the release allows, of {', '.join(sweep_attacks())})",
    )
    p.add_argument(
        "--attack-samples",
        type=int,
        default=100,
        help="N, samples behind each score (the standard profile's)",
    )
    p.add_argument(
        "--gen-records",
        type=int,
        help="samples the decoder draws where no "
        "--samples are given (default: half of --members plus --non-members; labels in the "
        "class shares of both, so neither follows the membership coins)",
    )
    p.add_argument("--seed", type=int, default=0, help="root seed of the attacks")
    p.add_argument(
        "--device",
        default="auto",
        help="torch device of the model and attacks: auto (default: the first CUDA GPU where "
        "there is one, else the CPU; printed as the attacks start), cpu, cuda or cuda:N",
    )
    p.add_argument(
        "--no-progress", dest="progress", action="store_false", help="hide progress bars"
    )
    add_verbosity(p)
    return p


def attack_main(argv: Sequence[str]) -> int:
    """Parse, check everything, attack, write rows and report; prints where they went."""
    args = build_attack_parser().parse_args(argv)
    configure_logging(args.verbose)
    try:
        return _attack(args)
    except SystemExit as exc:  # argparse is done: only the release's own code can exit here
        raise ValueError(
            f"the release's code called sys.exit({exc.code!r}) during the attack; a model "
            "must return, not exit"
        ) from None


def _check_arguments(args) -> DeviceChoice:  # noqa: ANN001 (the parsed arguments)
    """What the flags say together, and every path and the device, before anything is read;
    the device the attack runs on (``auto`` resolved)."""
    if args.samples is None and args.decoder is None and args.vae is None:
        raise ValueError(
            "give the release: --samples S.npz, --decoder PKG.MOD:FN or --vae PKG.MOD:FN"
        )
    if args.gen_records is not None and (
        args.samples is not None or not (args.decoder or args.vae)
    ):
        raise ValueError(
            "--gen-records sets how many samples the decoder draws; it applies with --decoder "
            "or --vae and no --samples"
        )
    if args.classifier_epochs is not None and args.test is None:
        raise ValueError("--classifier-epochs applies with --test only (the utility classifiers)")
    for role, path in _record_paths(args):
        check_input_file(path, f"--{role.value}", kind=".npz file")
    check_output_dir(args.out, "--out")
    return resolve_device(args.device)


def _record_paths(args) -> list[tuple[Role, Path]]:  # noqa: ANN001 (the parsed arguments)
    given = (
        (Role.MEMBERS, args.members),
        (Role.NON_MEMBERS, args.non_members),
        (Role.REFERENCE, args.reference),
        (Role.SAMPLES, args.samples),
        (Role.TEST, args.test),
    )
    return [(role, path) for role, path in given if path is not None]


def _attack(args) -> int:  # noqa: ANN001 (the parsed arguments)
    from audit.release.entry_points import load_model
    from audit.release.release_attack import attack_release
    from audit.release.release_config import ReleaseAttackConfig
    from audit.release.release_rows import check_release_out

    device = _check_arguments(args)
    config = ReleaseAttackConfig(
        name=default_name(args) if args.name is None else args.name,
        modality=args.modality,
        attacks=tuple(args.attack) if args.attack else None,
        attack_samples=args.attack_samples,
        seed=args.seed,
        epsilon=math.nan if args.epsilon is None else args.epsilon,
        delta=math.nan if args.delta is None else args.delta,
        gen_records=args.gen_records,
        device=device.device,
        membership_coins=args.membership_coins,
        classifier_epochs=(
            CLASSIFIER_EPOCHS if args.classifier_epochs is None else args.classifier_epochs
        ),
    )
    check_release_out(args.out)
    sets = {
        role: read_records(path, role, modality=config.modality)
        for role, path in _record_paths(args)
    }
    records = ReleaseRecords(
        sets[Role.MEMBERS], sets[Role.NON_MEMBERS], sets.get(Role.REFERENCE), sets.get(Role.SAMPLES)
    )
    spec = args.vae or args.decoder
    model = (
        None if spec is None else load_model(spec, whole=args.vae is not None, device=device.device)
    )
    progress = _progress(args.progress)
    attacked = attack_release(
        records,
        model=model,
        whole=args.vae is not None,
        config=config,
        out=args.out,
        progress=progress,
        test=sets.get(Role.TEST),
        on_start=lambda: print(device.line(), file=sys.stderr, flush=True),
    )
    print(
        f"{len(attacked.rows)} rows in {args.out / 'runs.csv'}; report {attacked.report} (and "
        "report.html beside it)",
        file=sys.stderr,
    )
    return 0


def default_name(args) -> str:  # noqa: ANN001 (the parsed arguments)
    """The release's default name: the stem of the module file of ``--decoder``/``--vae``
    (``pkg.mod:fn`` -> ``mod``, ``path/to/file.py:fn`` -> ``file``), else of ``--samples``."""
    spec = args.vae or args.decoder
    if spec is None:
        return args.samples.stem
    module = spec.rsplit(":", 1)[0]
    if module.endswith(".py") or "/" in module:
        return Path(module).stem or "release"
    return module.rsplit(".", 1)[-1]


def _progress(show: bool):  # noqa: ANN202 (tqdm or the null factory)
    from dpvae_core.progress import null_progress

    if not show:
        return null_progress
    from audit.cli.run_command import tqdm_progress

    return tqdm_progress
