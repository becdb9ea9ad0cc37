"""PriVAE's clustering figure (Section 5.2): latent codes of the pinwheel training data at
epsilon = 2.87, with and without the batch-wise KL(p(z) || q(z)) term, coloured by spiral.

Runs two sweeps through the benchmark itself (``benchmark.py --dataset pinwheel``, so both
cells are ordinary rows with their epsilon, MI AP, accuracy and the Section 5.1 latent columns)
with PriVAE's settings: term-wise DP-Adam (``cdp-termwise``), C1 = 0.05, B = 20, learning
rate 0.01, L = 20, the 4-component mixture prior at the corners of the unit square, and

- with KL(p || q): C2 = 0.0005, b = 1 partition, alpha = 20 (= |s|, the printed sum), beta = 0
  (PriVAE's clustering objective: reconstruction plus the batch-wise KL);
- without: C2 = 0 (no batch-wise release: DP-Adam exactly, accounted as such), beta = 1 (the
  sample-wise Monte-Carlo KL to the mixture prior, PriVAE, Eq. 11).

Both noise multipliers are calibrated to the same epsilon (``--target-epsilon``) at the
dataset's delta = 1 / |D_train|. Writes a PNG with one scatter per run (encoder means of
D_train coloured by spiral, the prior's means as black crosses) and prints, per run, the
epsilon, the share of codes at a prior mean, how many corners the spirals take, how well the
spiral can be told from the code (:func:`clustering`), the Hoyer sparsity, the MMD^2 to the
prior, accuracy on generated data and MI AP. Reruns reuse finished cells (the sweeps resume).

    PYTHONPATH=. .venv/bin/python benchmarks/pinwheel_figure.py --out /tmp/pinwheel \\
        --figure pinwheel.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure

from audit import results
from audit.cli.main import main as benchmark_main
from audit.datasets import load_dataset
from audit.report.grids import load_target_vae
from models.divergences import model_prior

#: PriVAE, Section 5.2.
PAPER_EPSILON, C1, C2, PARTITIONS, ALPHA = 2.87, 0.05, 0.0005, 1, 20.0
COLOURS = np.array(["tab:blue", "tab:orange", "tab:green", "tab:red"])
RUNS = {
    "with KL(p||q)": [
        "--clip-norm-2",
        "{c2}",
        "--divergence",
        "kl-prior",
        "--alpha",
        str(ALPHA),
        "--beta",
        "0",
    ],
    "without KL(p||q)": ["--clip-norm-2", "0", "--beta", "1"],
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory of the two sweeps")
    parser.add_argument("--figure", type=Path, required=True, help="PNG to write")
    parser.add_argument("--epsilon", type=float, default=PAPER_EPSILON)
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--clip-norm-2", type=float, default=C2, help=f"C2 of the KL run (PriVAE: {C2:g})"
    )
    return parser.parse_args()


def sweep(args: argparse.Namespace, name: str, extra: list[str]) -> Path:
    out = args.out / name.replace(" ", "-").replace("(", "").replace(")", "").replace("|", "")
    argv = [
        "--dataset", "pinwheel", "--mech", "cdp-termwise", "--profile", args.profile,
        "--target-epsilon", f"{args.epsilon:g}", "--clip-norm", str(C1),
        "--partitions", str(PARTITIONS), "--seeds", str(args.seed), "--out", str(out),
        "--no-progress", *(a.format(c2=f"{args.clip_norm_2:g}") for a in extra),
    ]  # fmt: skip
    status = benchmark_main(argv)
    if status != 0:
        raise SystemExit(f"the sweep for {name!r} failed with status {status}")
    return out


#: A code is "at" a prior mean within this distance (about 8 component standard deviations
#: of PriVAE's sigma = 0.03; a quarter of the distance between neighbouring corners).
AT_CORNER = 0.25
#: Neighbours of the leave-one-out spiral classifier in latent space.
NEIGHBOURS = 5


def clustering(codes: np.ndarray, labels: np.ndarray, means: np.ndarray) -> dict[str, float]:
    """What the figure shows, in numbers: the share of codes within :data:`AT_CORNER` of a prior
    mean; the number of distinct corners the spirals' codes at a corner take by majority; and
    the leave-one-out k-nearest-neighbour accuracy of the spiral from the code (1: spirals
    apart in latent space, wherever they are; 0.25: mixed)."""
    dist = np.sqrt(((codes[:, None] - means[None]) ** 2).sum(-1))
    nearest, at = dist.argmin(1), dist.min(1) <= AT_CORNER
    corners = {
        int(np.bincount(nearest[at & (labels == k)], minlength=len(means)).argmax())
        for k in np.unique(labels)
        if (at & (labels == k)).any()
    }
    pair = ((codes[:, None] - codes[None]) ** 2).sum(-1)
    np.fill_diagonal(pair, np.inf)
    votes = labels[np.argsort(pair, axis=1)[:, :NEIGHBOURS]]
    guess = np.array([np.bincount(v, minlength=labels.max() + 1).argmax() for v in votes])
    return {
        "at_corner": float(at.mean()),
        "corners": float(len(corners)),
        "knn": float((guess == labels).mean()),
    }


def private_codes(run_dir: Path) -> tuple[pd.Series, np.ndarray, np.ndarray, np.ndarray]:
    """The private cell's row, its encoder means of D_train, their spirals and the prior means."""
    frame = pd.read_csv(run_dir / "runs.csv")
    row = frame[frame["mech"] == "cdp-termwise"].iloc[0]
    cell_dir = results.cell_path(run_dir, row["config_hash"])
    cell = results.load_cell_config(cell_dir)
    dataset = load_dataset("pinwheel")
    model = load_target_vae(cell_dir, cell, dataset)
    attacked = results.read_attack_index(cell_dir)
    if attacked is None:
        raise SystemExit(f"{cell_dir} has no attack_index.npz (its D_train is unknown)")
    index = attacked.train_index
    x, y = torch.from_numpy(dataset.x[index]), torch.from_numpy(dataset.y[index])
    with torch.inference_mode():
        mu, _ = model.encode(x, y)
    return row, mu.numpy(), y.numpy(), model_prior(model).means.numpy()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    fig = Figure(figsize=(10, 4.8), layout="constrained")
    axes = fig.subplots(1, len(RUNS))
    for ax, (name, extra) in zip(axes, RUNS.items(), strict=True):
        row, codes, labels, means = private_codes(sweep(args, name, extra))
        stats = clustering(codes, labels, means)
        print(
            f"{name}: epsilon {row['epsilon']:.3g} (delta {row['delta']:.3g}); codes within "
            f"{AT_CORNER} of a prior mean {stats['at_corner']:.3f}, spirals' corners "
            f"{stats['corners']:.0f}, {NEIGHBOURS}-NN spiral accuracy from the code "
            f"{stats['knn']:.3f}; Hoyer {row['latent_hoyer']:.3f}, MMD^2 to the prior "
            f"{row['latent_mmd']:.3f}; acc on D_gen {row['acc']:.3f}; MI AP "
            f"{row['mi_ap']:.3f}; {row['wall_s']:.0f} s"
        )
        ax.scatter(codes[:, 0], codes[:, 1], c=COLOURS[labels], s=8)
        ax.scatter(means[:, 0], means[:, 1], c="black", marker="+", s=140, label="prior means")
        ax.set_title(
            f"{name}, ε = {row['epsilon']:.3g}\n{stats['at_corner']:.0%} of codes at a corner "
            f"({stats['corners']:.0f} taken), {NEIGHBOURS}-NN spiral accuracy "
            f"{stats['knn']:.2f}",
            fontsize=10,
        )
        ax.legend(loc="upper right", fontsize=8)
        ax.set_aspect("equal", adjustable="datalim")
    fig.suptitle("pinwheel: encoder means of D_train, coloured by spiral (cdp-termwise)")
    args.figure.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.figure, dpi=110)
    print(f"wrote {args.figure}")


if __name__ == "__main__":
    main()
