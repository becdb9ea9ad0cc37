#!/usr/bin/env python
"""Our LFW20 trade-off curves beside the trade-off paper's stated values (issue 39, part 3).

Reads a sweep's collected rows (``runs.csv``, gzipped or not; default the main command's
``results/lfw20-quick-main-runs.csv.gz``) and, per mechanism, z and seed, takes the cell's
accuracy on D_gen (with its Wilson 95 % interval over D_test) and its held-out worst-case MI AP
(with the row's 95 % bootstrap interval, ``worst_mi_ap_low`` / ``worst_mi_ap_high``). Prints the
per-cell table and the per-z summary (mean and range over seeds) that ``docs/paper-comparison.md``
quotes, and draws them beside the paper's numbers as its Section 5.2 text states them (the paper's
figure itself is not read here). With ``--ablation`` (the CSV of
``benchmarks/study_recipe_ablation.py``) it draws that study's accuracies per setting too.

    .venv/bin/python benchmarks/paper_comparison_figure.py \\
        --ablation benchmarks/results/recipe_ablation_lfw20.csv \\
        --figure docs/figures/paper-comparison-lfw20.png
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy import stats

#: What the trade-off paper's Section 5.2 states for LFW20 under DP-Adam (its z, the accuracy of
#: the classifier trained on generated faces, the MI AP limit that z meets). "none" is the
#: unperturbed VAE: MI AP 1 ("a perfect MI AP of 1"); its accuracy on generated faces is only in
#: the figure, which is not read here.
PAPER_POINTS = (
    {"z": 0.01, "acc": 0.52, "mi_ap_at_most": 0.75},
    {"z": 0.1, "acc": 0.31, "mi_ap_at_most": 0.6},
)
PAPER_REAL_ACC = 0.78  # "baseline test accuracies of 0.78 and 0.66 for LFW20 and LFW50"
PAPER_NONE_MI_AP = 1.0
PAPER_MAJORITY_Z = 0.5  # "the target classifier resorts to majority vote" (posterior collapse)
NONE_X = 1e-4  # where the non-private cells are drawn on the z axis


def wilson(acc: float, n: int) -> tuple[float, float]:
    """The Wilson 95 % interval of an accuracy ``acc`` over ``n`` test records."""
    k = int(round(acc * n))
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def cells(runs: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """One row per (mech, z, seed): the cell's accuracy and held-out worst case, with intervals."""
    runs = runs[runs["dataset"] == dataset]
    keys = ["mech", "param_value", "seed"]
    cols = [
        "acc",
        "n_test",
        "acc_majority",
        "acc_real",
        "epsilon",
        "worst_mi_ap",
        "worst_mi_ap_low",
        "worst_mi_ap_high",
        "worst_mi_ap_null_q95",
    ]
    out = runs.groupby(keys, dropna=False)[cols].first().reset_index()
    bounds = [wilson(a, int(n)) for a, n in zip(out["acc"], out["n_test"], strict=True)]
    out["acc_low"], out["acc_high"] = zip(*bounds, strict=True) if bounds else ((), ())
    return out.sort_values(["mech", "param_value", "seed"], na_position="first")


def print_tables(table: pd.DataFrame) -> None:
    print("| mech | z | seed | ε | acc on D_gen [Wilson 95 %] | held-out worst-case MI AP [95 %] |")
    print("|---|---|---|---|---|---|")
    for r in table.itertuples():
        z = "none" if math.isnan(r.param_value) else f"{r.param_value:g}"
        print(
            f"| {r.mech} | {z} | {r.seed} | {r.epsilon:.3g} | {r.acc:.3f} "
            f"[{r.acc_low:.3f}, {r.acc_high:.3f}] | {r.worst_mi_ap:.3f} "
            f"[{r.worst_mi_ap_low:.3f}, {r.worst_mi_ap_high:.3f}] |"
        )
    print()
    print(
        "| mech | z | ε | acc, mean (range over seeds) | worst-case MI AP, mean (range) | seeds |"
    )
    print("|---|---|---|---|---|---|")
    for (mech, z), g in table.groupby(["mech", "param_value"], dropna=False, sort=False):
        label = "none" if math.isnan(z) else f"{z:g}"
        print(
            f"| {mech} | {label} | {g['epsilon'].iloc[0]:.3g} | {mean_range(g, 'acc')} "
            f"| {mean_range(g, 'worst_mi_ap')} | {len(g)} |"
        )
    print(
        f"\nmajority rate {table['acc_majority'].iloc[0]:.3f}; classifier on real D_train "
        f"{table['acc_real'].min():.3f}-{table['acc_real'].max():.3f}; blind attacker's 95 % "
        f"quantile {table['worst_mi_ap_null_q95'].iloc[0]:.3f}"
    )


def print_before_after(before: pd.DataFrame, after: pd.DataFrame) -> None:
    """Per z: accuracy and held-out worst case, mean (range over seeds) before and after, and
    whether the ranges of the two sets of seeds overlap."""
    print("\n| z | acc before: mean (range) | acc after: mean (range) | worst-case MI AP before "
          "| worst-case MI AP after | seeds before / after |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for z, g in after[after["mech"] != "none"].groupby("param_value", sort=True):
        b = before[(before["mech"] != "none") & (before["param_value"] == z)]
        _before_after_row(f"{z:g}", b, g)
    _before_after_row("none", before[before["mech"] == "none"], after[after["mech"] == "none"])


def mean_range(t: pd.DataFrame, col: str) -> str:
    """``col``'s mean over the rows of ``t`` and its range, as the tables print them."""
    if t.empty:
        return "-"
    return f"{t[col].mean():.3f} ({t[col].min():.3f}-{t[col].max():.3f})"


def _before_after_row(label: str, b: pd.DataFrame, a: pd.DataFrame) -> None:
    print(
        f"| {label} | {mean_range(b, 'acc')} | {mean_range(a, 'acc')} "
        f"| {mean_range(b, 'worst_mi_ap')} | {mean_range(a, 'worst_mi_ap')} | {len(b)} / {len(a)} |"
    )


def draw_before(ax_acc, ax_mi, before: pd.DataFrame, label: str) -> None:  # noqa: ANN001
    """The earlier rows' mean over seeds per z, as a dashed grey line (their range as a band)."""
    for ax, col in ((ax_acc, "acc"), (ax_mi, "worst_mi_ap")):
        stats_ = before.groupby("param_value", dropna=False)[col].agg(["mean", "min", "max"])
        xs = np.where(stats_.index.isna(), NONE_X, stats_.index).astype(float)
        order = np.argsort(xs)
        ax.fill_between(xs[order], stats_["min"].to_numpy()[order],
                        stats_["max"].to_numpy()[order], color="0.6", alpha=0.2, lw=0)  # fmt: skip
        ax.plot(xs[order], stats_["mean"].to_numpy()[order], "--", color="0.45", lw=1.2,
                label=f"{label}: mean, range shaded")  # fmt: skip


def _x(table: pd.DataFrame) -> np.ndarray:
    return np.where(table["param_value"].isna(), NONE_X, table["param_value"]).astype(float)


def draw_curves(ax_acc, ax_mi, table: pd.DataFrame) -> None:  # noqa: ANN001
    seeds = sorted(table["seed"].unique())
    markers = "osD^v"
    for mech, mt in table.groupby("mech"):
        if mech == "none":
            continue
        mt = pd.concat([table[table["mech"] == "none"], mt])
        for k, seed in enumerate(seeds):
            st = mt[mt["seed"] == seed]
            x = _x(st) * 10 ** (0.04 * (k - (len(seeds) - 1) / 2))
            for ax, y, lo, hi in (
                (ax_acc, "acc", "acc_low", "acc_high"),
                (ax_mi, "worst_mi_ap", "worst_mi_ap_low", "worst_mi_ap_high"),
            ):
                err = np.clip(np.stack([st[y] - st[lo], st[hi] - st[y]]), 0, None)
                ax.errorbar(
                    x,
                    st[y],
                    yerr=err,
                    fmt=markers[k % len(markers)],
                    ms=4,
                    color=f"C{k}",
                    alpha=0.8,
                    capsize=2,
                    label=f"ours, {mech}, seed {seed} (95 %)",
                )
        mean = mt.groupby("param_value", dropna=False)[["acc", "worst_mi_ap"]].mean()
        xs = np.where(mean.index.isna(), NONE_X, mean.index).astype(float)
        order = np.argsort(xs)
        ax_acc.plot(xs[order], mean["acc"].to_numpy()[order], "-", color="0.3", lw=1)
        ax_mi.plot(xs[order], mean["worst_mi_ap"].to_numpy()[order], "-", color="0.3", lw=1)
    paper = pd.DataFrame(PAPER_POINTS)
    ax_acc.plot(
        paper["z"],
        paper["acc"],
        "*",
        ms=13,
        color="crimson",
        label="the trade-off paper (Sec. 5.2 text)",
    )
    ax_acc.plot([PAPER_MAJORITY_Z], [table["acc_majority"].iloc[0]], "*", ms=13, mfc="none",
                color="crimson", label="paper: 'resorts to majority vote' (z = 0.5)")  # fmt: skip
    ax_acc.axhline(PAPER_REAL_ACC, color="crimson", ls=":", lw=1,
                   label="paper: classifier on real faces 0.78")  # fmt: skip
    real = table["acc_real"].mean()
    ax_acc.axhline(real, color="0.3", ls=":", lw=1,
                   label=f"ours: classifier on real D_train {real:.2f}")  # fmt: skip
    ax_acc.axhline(table["acc_majority"].iloc[0], color="0.5", ls="--", lw=1,
                   label=f"majority rate {table['acc_majority'].iloc[0]:.3f}")  # fmt: skip
    ax_mi.plot(paper["z"], paper["mi_ap_at_most"], "v", ms=10, color="crimson",
               label="paper: MI AP at most (Sec. 5.2 text)")  # fmt: skip
    ax_mi.plot([NONE_X], [PAPER_NONE_MI_AP], "*", ms=13, color="crimson",
               label="paper: 'perfect MI AP of 1' (no DP)")  # fmt: skip
    ax_mi.axhline(table["worst_mi_ap_null_q95"].iloc[0], color="0.5", ls="--", lw=1,
                  label="blind attacker's 95 % quantile")  # fmt: skip
    ticks = [NONE_X, 1e-3, 1e-2, 1e-1, 0.5, 1, 2, 4]
    for ax, label in ((ax_acc, "accuracy on real D_test, trained on D_gen"),
                      (ax_mi, "held-out worst-case MI AP")):  # fmt: skip
        ax.set_xscale("log")
        ax.set_xticks(ticks, ["none", "0.001", "0.01", "0.1", "0.5", "1", "2", "4"])
        ax.set_xlabel("DP-Adam noise multiplier z")
        ax.set_ylabel(label)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    ax_acc.set_title("LFW20, cdp: utility")
    ax_mi.set_title("LFW20, cdp: attack")
    handles, labels = ax_acc.get_legend_handles_labels()
    keep = {lab: h for h, lab in zip(handles, labels, strict=True)}
    ax_acc.legend(keep.values(), keep.keys(), fontsize=6, loc="center right")
    handles, labels = ax_mi.get_legend_handles_labels()
    keep = {lab: h for h, lab in zip(handles, labels, strict=True) if not lab.startswith("ours")}
    ax_mi.legend(keep.values(), keep.keys(), fontsize=6, loc="lower left")


def draw_ablation(ax, ablation: pd.DataFrame, majority: float) -> None:  # noqa: ANN001
    order = ["baseline", "baseline-cpu", "batch64", "lr-paper", "clip-median", "clip-0.03",
             "microbatch4", "paper-recipe"]  # fmt: skip
    settings = sorted(
        dict.fromkeys(ablation["setting"]),
        key=lambda s: order.index(s) if s in order else len(order),
    )
    names = {"baseline": "quick (sweep rows)", "baseline-cpu": "quick (this CPU)",
             "paper-recipe": "all paper knobs"}  # fmt: skip
    zs = sorted(ablation["z"].unique())
    width = 0.8 / len(zs)
    for j, z in enumerate(zs):
        at = ablation[ablation["z"] == z]
        for i, s in enumerate(settings):
            acc = at.loc[at["setting"] == s, "acc"].to_numpy()
            x = i + (j - (len(zs) - 1) / 2) * width
            if len(acc):
                ax.bar(x, acc.mean(), width * 0.9, color=f"C{j}", alpha=0.5,
                       label=f"z = {z:g}, mean" if i == 0 else None)  # fmt: skip
                ax.plot(np.full(len(acc), x), acc, "k.", ms=5,
                        label="one seed" if i == 0 and j == 0 else None)  # fmt: skip
    ax.axhline(majority, color="0.5", ls="--", lw=1, label=f"majority rate {majority:.3f}")
    ax.set_xticks(
        range(len(settings)), [names.get(s, s) for s in settings], rotation=20, fontsize=7
    )
    ax.set_ylabel("accuracy on real D_test, trained on D_gen")
    epochs = ", ".join(str(e) for e in sorted(ablation["epochs"].unique()))
    ax.set_title(f"ablation: one knob, or all, at a time ({epochs} epochs)")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=6)
    ax.grid(alpha=0.3, axis="y")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=Path, default=Path("results/lfw20-quick-main-runs.csv.gz"))
    p.add_argument("--dataset", default="lfw20")
    p.add_argument("--ablation", type=Path, default=None)
    p.add_argument(
        "--before",
        type=Path,
        default=None,
        help="earlier rows of the same sweep (runs.csv), drawn as a dashed mean with its range "
        "and set against --runs per z",
    )
    p.add_argument("--before-label", default="before", help="their legend label")
    p.add_argument("--figure", type=Path, default=Path("docs/figures/paper-comparison-lfw20.png"))
    args = p.parse_args()
    table = cells(pd.read_csv(args.runs), args.dataset)
    if table.empty:
        p.error(f"--runs {args.runs}: no rows of dataset {args.dataset!r}")
    print_tables(table)
    before = None
    if args.before is not None:
        before = cells(pd.read_csv(args.before), args.dataset)
        if before.empty:
            p.error(f"--before {args.before}: no rows of dataset {args.dataset!r}")
        print_before_after(before, table)
    panels = 3 if args.ablation is not None else 2
    fig = Figure(figsize=(5.2 * panels, 4.6))
    axes = fig.subplots(1, panels)
    if before is not None:
        draw_before(axes[0], axes[1], before, args.before_label)
    draw_curves(axes[0], axes[1], table)
    if args.ablation is not None:
        draw_ablation(axes[2], pd.read_csv(args.ablation), float(table["acc_majority"].iloc[0]))
    fig.tight_layout()
    args.figure.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.figure, dpi=110)
    print(f"wrote {args.figure}")


if __name__ == "__main__":
    main()
