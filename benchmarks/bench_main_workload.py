"""Issue 38's fixed workload, this tree against another (a ``git archive`` of an older commit),
in one run, the two trees taking turns (or side by side, one core each, with ``--parallel``):
process CPU seconds in all and per part.

The workload (issue 38)::

    python benchmark.py --dataset lfw20 --data-home DIR --mech cdp --grid 1 --profile quick \
        --seeds 0 --epochs 30 --no-report

(the non-private and the z = 1 cell, every attack), each run into a fresh ``--out`` so nothing
is read from a cache. Each tree runs in its own process started in its own directory (the
script's directory shadows an editable install, so each tree imports its own code).

Parts, in process CPU seconds (all threads), each *exclusive* of the parts nested inside it:
``train`` (non-private VAE training: ``train_vae``, target and reference models), ``dp_train``
(``train_dp_vae``), ``generate`` (``models.generation.generate``, wherever it is called: D_gen,
the attacks' samples), ``classifier`` (``train_classifier``, or on LFW ``embedding_accuracy``:
the target classifier on D_gen and on real data), ``attacks`` (``run_attacks`` less the
generation inside it), ``other`` (the rest: data, audits' bookkeeping, writing). The functions
are wrapped where they are defined, before anything imports them, and in every module that
already bound them; their home moved between commits, so each is looked up
at its old and its new path.

Usage (an older tree prepared with ``git archive C | tar -x -C /tmp/old`` and
``ln -s $PWD/.venv /tmp/old/.venv``)::

    python benchmarks/bench_main_workload.py --old /tmp/old --data-home ../shared/data/lfw \
        --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: part -> its functions, each as candidate (module, function) homes: the first importable home of
#: each function is wrapped (a part with several functions: whichever the workload calls, e.g. the
#: LFW datasets' face-embedding classifier instead of a trained network)
PARTS: dict[str, tuple[tuple[tuple[str, str], ...], ...]] = {
    "train": ((("models.training", "train_vae"),),),
    "dp_train": ((("models.dp.dp_adam", "train_dp_vae"),),),
    "generate": ((("models.generation", "generate"),),),
    "classifier": (
        (
            ("models.classifier_training", "train_classifier"),
            ("models.training", "train_classifier"),
        ),
        (("models.face_embedding", "embedding_accuracy"),),
    ),
    "attacks": ((("audit.cell.attack_step", "run_attacks"), ("audit.pipeline", "run_attacks")),),
}


def workload(data_home: str, out: str, extra: list[str]) -> list[str]:
    return [
        "--dataset", "lfw20", "--data-home", data_home, "--mech", "cdp", "--grid", "1",
        "--profile", "quick", "--seeds", "0", "--epochs", "30", "--no-report",
        "--no-progress", "--out", out, *extra,
    ]  # fmt: skip


def _child(
    tree: Path, data_home: str, extra: list[str], keep: Path | None = None
) -> dict[str, float]:
    """Run the workload in this process on ``tree``'s code; return CPU seconds per part."""
    import functools
    import importlib

    sys.path.insert(0, str(tree))
    os.chdir(tree)
    spent = dict.fromkeys(PARTS, 0.0)
    stack: list[list[float]] = []  # per active timed call: [start, nested seconds]

    def timed(part, fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            stack.append([time.process_time(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                start, nested = stack.pop()
                total = time.process_time() - start
                spent[part] += total - nested
                if stack:
                    stack[-1][1] += total

        return inner

    wrapped: dict[int, object] = {}  # id(original) -> its wrapper
    for part, functions in PARTS.items():
        for homes in functions:
            for module_name, name in homes:
                try:
                    module = importlib.import_module(module_name)
                except ImportError:
                    continue
                if hasattr(module, name):
                    original = getattr(module, name)
                    wrapped[id(original)] = timed(part, original)
                    break
            else:
                raise SystemExit(f"no home of {part}'s {homes[0][1]} found in {tree}")
    from audit.cli.main import main  # after the wrapping: importers bind the wrapped functions

    # Every module imported so far that bound an original (a package re-exporting it, as
    # models.dp did with train_dp_vae at 3905565) gets the wrapper too; later imports bind it.
    for module in list(sys.modules.values()):
        for attr, value in list(getattr(module, "__dict__", {}).items()):
            if callable(value) and id(value) in wrapped:
                setattr(module, attr, wrapped[id(value)])

    with tempfile.TemporaryDirectory() as out:
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        rc = main(workload(data_home, out, extra))
        total, wall = time.process_time() - start_cpu, time.perf_counter() - start_wall
        if keep is not None and (Path(out) / "runs.csv").is_file():
            keep.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(out) / "runs.csv", keep)
    if rc not in (0, None):
        raise SystemExit(f"the workload failed in {tree} (exit {rc})")
    missing = [part for part, seconds in spent.items() if seconds == 0.0]
    if missing:  # a part bound before it was wrapped would time as "other": refuse, not mislead
        raise SystemExit(f"{tree}: parts never timed: {', '.join(missing)}")
    spent["other"] = total - sum(spent.values())
    return {**spent, "total": total, "wall": wall}


def _start(
    tree: Path, data_home: str, extra: list[str], keep: Path | None = None
) -> subprocess.Popen:
    kept = ["--keep-file", str(keep.resolve())] if keep is not None else []
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--child", str(tree),
         "--data-home", data_home, *kept, "--", *extra],
        cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _result(tree: Path, proc: subprocess.Popen) -> dict[str, float]:
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: exit {proc.returncode}\n{stderr[-3000:]}")
    return json.loads(stdout.strip().splitlines()[-1])


def _kept(folder: Path | None, label: str, round_: int) -> Path | None:
    return None if folder is None else folder / f"{label}-round{round_}-runs.csv"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", type=Path, help="the older tree (git archive, .venv linked)")
    p.add_argument("--new", type=Path, default=Path(__file__).resolve().parent.parent)
    p.add_argument("--data-home", required=True)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument(
        "--parallel",
        action="store_true",
        help="run the two trees at the same time (set OMP_NUM_THREADS=1: one core each) "
        "instead of taking turns",
    )
    p.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="a folder where each run's runs.csv is kept (old-round0-runs.csv, ...), for "
        "benchmarks/compare_precision.py",
    )
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--keep-file", type=Path, help=argparse.SUPPRESS)
    p.add_argument("extra", nargs="*", help="extra workload flags for the NEW tree, after --")
    args = p.parse_args()
    data_home = str(Path(args.data_home).resolve())
    if args.child is not None:
        keep = args.keep_file.resolve() if args.keep_file is not None else None
        print(json.dumps(_child(args.child.resolve(), data_home, args.extra, keep)))
        return
    if args.old is None:
        p.error("--old is required")
    trees = {"old": (args.old.resolve(), []), "new": (args.new.resolve(), args.extra)}
    results: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for r in range(args.rounds):
        if args.parallel:  # both at once, one core each: the same conditions for both
            procs = {
                label: _start(tree, data_home, extra, _kept(args.keep, label, r))
                for label, (tree, extra) in trees.items()
            }
            for label, proc in procs.items():
                results[label].append(_result(trees[label][0], proc))
                print(f"round {r} {label}: {json.dumps(results[label][-1])}", flush=True)
            continue
        for label, (tree, extra) in trees.items():
            proc = _start(tree, data_home, extra, _kept(args.keep, label, r))
            results[label].append(_result(tree, proc))
            print(f"round {r} {label}: {json.dumps(results[label][-1])}", flush=True)
    parts = [*PARTS, "other", "total", "wall"]
    print(f"\n{'part':<12}{'old s':>10}{'new s':>10}{'old/new':>10}")
    for part in parts:
        old = sorted(x[part] for x in results["old"])[len(results["old"]) // 2]
        new = sorted(x[part] for x in results["new"])[len(results["new"]) // 2]
        ratio = f"{old / new:.2f}x" if new > 0.05 else "-"
        print(f"{part:<12}{old:>10.1f}{new:>10.1f}{ratio:>10}")


if __name__ == "__main__":
    main()
