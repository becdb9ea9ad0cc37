"""A sweep's report: tables, sweet spots and figures of a run (paper 003, Section 5).

Numbers come from the rows of the run's cells (:func:`audit.results.load_rows`; ``runs.csv``
only where a directory holds nothing else), never averaged across configurations: rows are
grouped by setting (the cell's config but its seed), and a directory whose cells hold several run
configurations (written by code older than the run manifest) gets one section per configuration,
named by the settings that differ. The attack curves read ``cells/<hash>/scores.npz`` and the
reconstruction and sample grids (:mod:`audit.report_grids`: images as image grids, sensor series
as line plots) ``cells/<hash>/{config.json, model.pt}``; a figure whose inputs are missing or do
not fit is skipped with a logged warning and listed in ``report.md``.

Every number is the mean over seeds with the half-width of its 95 % Student-t interval
(:mod:`audit.stats`); one seed shows the value alone.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attacks import precision_recall_curve, roc_curve
from audit import io, results
from audit.config import MechanismName
from audit.gate import param_label
from audit.plots import (
    CurveBand,
    RefLine,
    SettingCurves,
    accuracy_vs_epsilon,
    attack_curves,
    mi_ap_vs_epsilon,
    phi_bars,
    save_figure,
)
from audit.report_grids import grid_figures
from audit.results import CELLS_DIR
from audit.stats import MeanInterval, column_intervals, format_epsilon, summarise

log = logging.getLogger(__name__)

REPORT_DIR = "report"
REPORT_MD = "report.md"
FORMATS = ("png", "pdf")
MI_AP_LIMITS = (0.55, 0.6, 0.75)
ATTACK_CHANCE = 0.5
REQUIRED_COLUMNS = (
    "dataset",
    "mech",
    "param_name",
    "param_value",
    "seed",
    "distance",
    "mi_ap",
    "acc",
    "acc_base",
    "acc_real",
    "epsilon",
    "phi",
    "config_hash",
)
SETTING = (
    "dataset",
    "profile",
    "run_hash",
    "mech",
    "param_name",
    "param_value",
    "param_label",
    "setting_hash",
)
CURVE_GRID = np.linspace(0.0, 1.0, 201)
_MECH_RANK = {m.value: i for i, m in enumerate(MechanismName)}
NONE = MechanismName.NONE.value


@dataclass
class Report:
    """What ``write_report`` produced: the Markdown file, the figure files, and what it skipped."""

    out_dir: Path
    markdown: Path
    figures: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def load_runs(run_dir: Path) -> pd.DataFrame:
    """A run's rows with the columns the report needs, plus ``param_label``; a missing profile
    reads as ``'unspecified'``. Rows without a ``setting_hash`` (a bare runs.csv) get their
    setting from the columns, and are refused where a setting repeats a (seed, distance): rows of
    different configurations that nothing here can tell apart."""
    frame = results.load_rows(run_dir, REQUIRED_COLUMNS)
    if "profile" not in frame.columns:
        frame["profile"] = np.nan
    profile = frame["profile"].astype(object)
    frame["profile"] = profile.where(profile.notna(), "unspecified").astype(str)
    labels = zip(frame.mech, frame.param_name, frame.param_value, strict=True)
    frame["param_label"] = [param_label(*x) for x in labels]
    for column in ("run_hash", "setting_hash"):
        if column not in frame.columns:
            frame[column] = ""
        frame[column] = frame[column].fillna("").astype(str)
    repeated = frame.duplicated([*SETTING, "seed", "distance"]).sum()
    if repeated:
        raise ValueError(
            f"{run_dir}: {repeated} row(s) repeat a (setting, seed, distance) and there are no "
            "cell configs to tell their configurations apart; report the cells' directory "
            "instead of a bare runs.csv"
        )
    return _label_options(frame, run_dir)


def _label_options(frame: pd.DataFrame, run_dir: Path) -> pd.DataFrame:
    """Where one run configuration holds several settings of one (mech, parameter) (cells with
    other mechanism options), append each one's options to its ``param_label``."""
    keys = ["dataset", "profile", "run_hash", "mech", "param_label"]
    clashes = frame.groupby(keys, dropna=False)["setting_hash"].transform("nunique") > 1
    if not clashes.any():
        return frame
    configs = results.cell_configs(run_dir)
    by_setting = {results.setting_hash(c): results.mech_settings(c) for c in configs.values()}
    log.warning(
        "%s holds settings that differ only in mechanism options; they are shown apart", run_dir
    )
    frame = frame.copy()
    for i in frame.index[clashes]:
        options = by_setting.get(frame.at[i, "setting_hash"], {})
        text = ", ".join(f"{k}={v}" for k, v in sorted(options.items())) or "default options"
        frame.at[i, "param_label"] = f"{frame.at[i, 'param_label']} [{text}]"
    return frame


def _sections(frame: pd.DataFrame, run_dir: Path) -> list[tuple[str, str, pd.DataFrame]]:
    """(title, file-name stem, rows) per dataset, profile and run configuration."""
    sections = []
    for (dataset, profile), group in frame.groupby(["dataset", "profile"], sort=True):
        runs = sorted(group["run_hash"].unique())
        if len(runs) == 1:
            sections.append((f"{dataset}, profile {profile}", f"{dataset}-{profile}", group))
            continue
        log.warning(
            "%s: %s profile %s holds %d run configurations; each gets its own section",
            run_dir,
            dataset,
            profile,
            len(runs),
        )
        settings = {
            results.run_hash(c): results.run_settings(c)
            for c in results.cell_configs(run_dir).values()
        }
        first = settings.get(runs[0], {})
        for run in runs:
            mine = settings.get(run, {})
            diff = results.differences(first, mine) if run != runs[0] else []
            what = "; ".join(diff) if diff else "the first"
            title = f"{dataset}, profile {profile}, configuration {run[:8]} ({what})"
            sections.append((title, f"{dataset}-{profile}-{run[:8]}", group[group.run_hash == run]))
    return sections


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """Baseline first, then mechanisms in their declared order, each from least to most noise."""
    rank = frame["mech"].map(_MECH_RANK).fillna(len(_MECH_RANK))
    key = frame.assign(_rank=rank, _eps=-frame["epsilon"].astype(float))
    return frame.loc[key.sort_values(["_rank", "mech", "_eps", "param_value"]).index]


def per_seed(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, seed): acc, acc_real, acc_base, epsilon, and ``attack_power``, the
    largest MI AP over the distances (NaN if any distance's MI AP is NaN)."""
    grouped = frame.groupby([*SETTING, "seed"], dropna=False, sort=False)
    out = grouped[["acc", "acc_real", "acc_base", "epsilon"]].mean()
    out["attack_power"] = grouped["mi_ap"].agg(lambda s: s.max(skipna=False))
    return out.reset_index()


def setting_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per setting: mean and 95 % half-width over seeds of acc, epsilon, attack power."""
    metrics = ("acc", "acc_real", "acc_base", "epsilon", "attack_power")
    return _ordered(summarise(per_seed(frame), SETTING, metrics)).reset_index(drop=True)


def distance_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, distance): mean and 95 % half-width over seeds of MI AP, phi, eps."""
    out = summarise(frame, [*SETTING, "distance"], ("mi_ap", "phi", "epsilon"))
    return _ordered(out).reset_index(drop=True)


def sweet_spots(settings: pd.DataFrame, limits: Sequence[float] = MI_AP_LIMITS) -> pd.DataFrame:
    """For each MI AP limit and mechanism, the setting with the best mean accuracy whose mean
    attack power (max MI AP over distances) is at most the limit (paper 003, Section 5.2).

    ``settings``: :func:`setting_summary` of one dataset and profile. Ties in accuracy go to the
    weaker attack. A mechanism with no qualifying setting gets a row with ``qualifies`` False and
    its weakest attack (``attack_power``) for context.
    """
    rows = []
    for limit in limits:
        for _, group in settings.groupby("mech", sort=False):
            ok = group[(group["attack_power"] <= limit) & group["acc"].notna()]
            if ok.empty:
                best = group.sort_values("attack_power").iloc[0]
                rows.append({**best.to_dict(), "limit": limit, "qualifies": False})
            else:
                best = ok.sort_values(["acc", "attack_power"], ascending=[False, True]).iloc[0]
                rows.append({**best.to_dict(), "limit": limit, "qualifies": True})
    return pd.DataFrame(rows)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def _interval(row: pd.Series | dict, metric: str) -> MeanInterval:
    return MeanInterval(float(row[metric]), float(row[f"{metric}_hw"]), int(row[f"{metric}_n"]))


# ---- figures from runs.csv ------------------------------------------------------------------


def _acc_refs(settings: pd.DataFrame) -> list[RefLine]:
    base = settings[settings["mech"] == NONE]
    refs = []
    if not base.empty:
        b = base.iloc[0]
        refs.append(RefLine(b["acc"], "non-private (none)", half_width=b["acc_hw"]))
    refs.append(
        RefLine(settings["acc_real"].mean(), "classifier trained on real data", "-.", "dimgray")
    )
    refs.append(
        RefLine(settings["acc_base"].mean(), "chance (1 / #classes)", ":", "grey", show_value=False)
    )
    return refs


def _mi_refs(distances: pd.DataFrame) -> dict[str, list[RefLine]]:
    refs: dict[str, list[RefLine]] = {}
    for distance, group in distances.groupby("distance"):
        base = group[group["mech"] == NONE]
        lines = []
        if not base.empty:
            b = base.iloc[0]
            lines.append(RefLine(b["mi_ap"], "non-private (none)", half_width=b["mi_ap_hw"]))
        lines.append(RefLine(ATTACK_CHANCE, "chance (0.5)", ":", "grey", show_value=False))
        refs[str(distance)] = lines
    return refs


def _plottable(points: pd.DataFrame, what: str, skipped: list[str]) -> pd.DataFrame:
    private = points[points["mech"] != NONE]
    finite = private[np.isfinite(private["epsilon"].astype(float))]
    if len(finite) < len(private):
        _skip(
            skipped,
            f"{what}: {len(private) - len(finite)} private setting(s) without a finite "
            "epsilon are left out",
        )
    return finite


def _skip(skipped: list[str], message: str) -> None:
    log.warning("%s", message)
    skipped.append(message)


def utility_note(frame: pd.DataFrame) -> str | None:
    """Why the accuracy axis of one dataset and profile measures nothing, or None where it does:
    some row's non-private baseline is not above chance (``utility_valid``, a one-sided exact
    binomial test at 1 % on the test-set size; :func:`audit.metrics.above_chance`)."""
    if "utility_valid" not in frame or frame["utility_valid"].astype(bool).all():
        return None  # valid, or a runs.csv from before the flag: nothing to judge by
    base = frame[frame["mech"] == NONE]
    n_test = base["n_test"].iloc[0] if "n_test" in base and not base.empty else math.nan
    acc = base["acc"].mean() if not base.empty else math.nan
    return (
        f"the non-private baseline's accuracy ({acc:.3f}) is not above chance "
        f"({frame['acc_base'].mean():.3f}) by a one-sided exact binomial test at 1 % on "
        f"{n_test:g} test records (or the baseline or its n_test is missing), so the accuracy "
        "axis measures nothing here: φ and the sweet spots are not computed. Raise "
        "--gen-records or --epochs"
    )


def summary_figures(
    settings: pd.DataFrame,
    distances: pd.DataFrame,
    *,
    name: str,
    skipped: list[str],
    no_utility: str | None = None,
) -> list[tuple[str, Figure]]:
    """Accuracy vs epsilon, MI AP vs epsilon and phi of one dataset and profile; ``no_utility``
    (:func:`utility_note`) says why there is no phi figure."""
    figures: list[tuple[str, Figure]] = []
    acc_points = _plottable(settings, "accuracy vs epsilon", skipped)
    mi_points = _plottable(distances, "MI AP vs epsilon", skipped)
    if acc_points.empty:
        _skip(
            skipped,
            f"{name}: no private run with a finite epsilon; the epsilon and phi "
            "figures are skipped",
        )
        return figures
    figures.append(
        (
            "accuracy_vs_epsilon",
            accuracy_vs_epsilon(
                acc_points, _acc_refs(settings), title=f"{name}: classifier accuracy vs ε"
            ),
        )
    )
    figures.append(
        (
            "mi_ap_vs_epsilon",
            mi_ap_vs_epsilon(
                mi_points, _mi_refs(distances), title=f"{name}: reconstruction attack MI AP vs ε"
            ),
        )
    )
    phi_points = distances[(distances["mech"] != NONE) & distances["phi"].notna()]
    if no_utility is not None:
        _skip(skipped, f"{name}: phi figure skipped: {no_utility}")
    elif phi_points.empty:
        _skip(
            skipped,
            f"{name}: phi is undefined for every private run (no baseline?); phi figure skipped",
        )
    else:
        figures.append(("phi", phi_bars(phi_points, title=f"{name}: privacy-accuracy trade-off φ")))
    return figures


# ---- attack curves from cells/<hash>/scores.npz ----------------------------------------------


def load_scores(path: Path) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(is_member (n,) bool, {distance: scores (n,)}) from a cell's ``scores.npz``.

    The file holds ``is_member`` and one ``scores_<attack>_<distance>`` array per attack result
    (``scores_<distance>`` in cells written before: the reconstruction attack's; higher =
    member), and optionally ``schema_version``; anything else raises a ValueError. The curves
    are the reconstruction attack's, the one attack a sweep runs so far.
    """
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    version = arrays.pop("schema_version", io.SCHEMA_VERSION)
    if int(version) != io.SCHEMA_VERSION:
        raise ValueError(
            f"{path}: schema_version {int(version)}, this code reads {io.SCHEMA_VERSION}"
        )
    if "is_member" not in arrays:
        raise ValueError(f"{path}: no is_member array (found {sorted(arrays)})")
    is_member = arrays.pop("is_member")
    keyed = {results.parse_scores_key(k): v for k, v in arrays.items() if k.startswith("scores_")}
    scores = {d: v for (a, d, var), v in keyed.items() if (a, var) == ("reconstruction", "mean")}
    bad = [k for k, v in scores.items() if v.shape != is_member.shape]
    if is_member.dtype != np.bool_ or bad or not scores:
        shapes = {k: v.shape for k, v in arrays.items()}
        raise ValueError(
            f"{path}: expected a bool is_member and scores_<distance> arrays of the same "
            f"length, got is_member {is_member.dtype} {is_member.shape} and {shapes}"
        )
    return is_member, scores


def roc_on_grid(scores: np.ndarray, is_member: np.ndarray) -> np.ndarray:
    """TPR at each FPR of :data:`CURVE_GRID` (linear interpolation of the ROC curve)."""
    roc = roc_curve(scores, is_member)
    return np.interp(CURVE_GRID, roc.fpr, roc.tpr)


def pr_on_grid(scores: np.ndarray, is_member: np.ndarray) -> np.ndarray:
    """Interpolated precision (the best precision at recall >= r) at each recall r of the grid."""
    pr = precision_recall_curve(scores, is_member)
    recall, precision = pr.recall[::-1], pr.precision[::-1]  # recall ascending
    envelope = np.maximum.accumulate(precision[::-1])[::-1]
    idx = np.minimum(np.searchsorted(recall, CURVE_GRID, side="left"), len(recall) - 1)
    return envelope[idx]


def _band(curves: list[np.ndarray]) -> CurveBand:
    mean, half_width = column_intervals(np.stack(curves))
    return CurveBand(CURVE_GRID, mean, half_width, len(curves))


def _cell_scores(run_dir: Path, hashes: Sequence[str], skipped: list[str], name: str) -> dict:
    found = {}
    for h in hashes:
        path = Path(run_dir) / CELLS_DIR / h / "scores.npz"
        if not path.is_file():
            continue
        try:
            found[h] = load_scores(path)
        except (ValueError, OSError) as exc:
            _skip(skipped, f"{name}: unreadable scores in cell {h}: {exc}")
    missing = len(set(hashes)) - len(found)
    if found and missing:
        _skip(
            skipped,
            f"{name}: {missing} of {len(set(hashes))} cell(s) have no readable "
            "scores.npz; their attack curves are left out",
        )
    return found


def curve_figures(
    run_dir: Path, frame: pd.DataFrame, *, name: str, skipped: list[str]
) -> list[tuple[str, Figure]]:
    """Precision-recall and ROC curves per distance, averaged over the seeds' cells."""
    found = _cell_scores(run_dir, list(frame["config_hash"].unique()), skipped, name)
    if not found:
        _skip(skipped, f"{name}: no cell holds scores.npz; attack curves skipped")
        return []
    figures = []
    for distance in sorted(frame["distance"].unique()):
        rows: dict[str, list[SettingCurves]] = {}
        baseline = None
        settings = _ordered(frame[frame["distance"] == distance])
        for _, group in settings.groupby(list(SETTING), dropna=False, sort=False):
            pairs = [found[h] for h in group["config_hash"] if h in found]
            pairs = [(m, s[distance]) for m, s in pairs if distance in s]
            if not pairs:
                continue
            mech, label = group["mech"].iloc[0], group["param_label"].iloc[0]
            curves = SettingCurves(
                label=f"{mech} {label}" if mech != NONE else "non-private (none)",
                mech=mech,
                pr=_band([pr_on_grid(s, m) for m, s in pairs]),
                roc=_band([roc_on_grid(s, m) for m, s in pairs]),
            )
            if mech == NONE:
                baseline = curves
            else:
                rows.setdefault(mech, []).append(curves)
        if rows or baseline is not None:
            title = (
                f"{name}: attack curves, distance {distance.upper()} (mean over seeds, 95 % band)"
            )
            figures.append(
                (f"attack_curves_{distance}", attack_curves(rows, baseline, title=title))
            )
    return figures


# ---- report.md --------------------------------------------------------------------------------


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def cell(value: object) -> str:
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, headers)) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


def _eps(row: pd.Series | dict) -> str:
    """Epsilon (:func:`format_epsilon`), with its interval only where it varies across seeds."""
    eps = _interval(row, "epsilon")
    text = format_epsilon(eps.mean)
    return f"{text} ± {eps.half_width:.3g}" if eps.half_width > 0 else text


def _key(row: pd.Series) -> tuple:
    """A setting's identity without the NaN parameter of the baseline (NaN != NaN in dicts)."""
    return tuple(row[k] for k in SETTING if k != "param_value")


def main_table(settings: pd.DataFrame, distances: pd.DataFrame) -> str:
    """The main table: dataset, mech, param, epsilon, MI AP and phi per distance, acc, seeds."""
    names = sorted(distances["distance"].unique())
    by_key = {(_key(r), r["distance"]): r for _, r in distances.iterrows()}
    headers = [
        "dataset",
        "mech",
        "param",
        "ε",
        *[f"MI AP ({d})" for d in names],
        "acc",
        *[f"φ ({d})" for d in names],
        "seeds",
    ]
    rows = []
    for _, s in settings.iterrows():
        per = [by_key.get((_key(s), d)) for d in names]
        rows.append(
            [
                s["dataset"],
                s["mech"],
                s["param_label"],
                _eps(s),
                *[_interval(p, "mi_ap").format() if p is not None else "n/a" for p in per],
                _interval(s, "acc").format(),
                *[
                    "–" if p is None or s["mech"] == NONE else _interval(p, "phi").format()
                    for p in per
                ],
                int(s["acc_n"]),
            ]
        )
    return _md_table(headers, rows)


def sweet_spot_table(spots: pd.DataFrame) -> str:
    headers = ["MI AP limit", "mech", "best setting", "ε", "attack power (max MI AP)", "acc"]
    rows = []
    for _, r in spots.iterrows():
        power = _interval(r, "attack_power").format()
        if r["qualifies"]:
            rows.append(
                [
                    f"{r['limit']:g}",
                    r["mech"],
                    r["param_label"],
                    _eps(r),
                    power,
                    _interval(r, "acc").format(),
                ]
            )
        else:
            rows.append(
                [
                    f"{r['limit']:g}",
                    r["mech"],
                    "no setting qualifies",
                    "–",
                    f"weakest: {power} at {r['param_label']}",
                    "–",
                ]
            )
    return _md_table(headers, rows)


def epsilon_methods(frame: pd.DataFrame) -> str:
    cols = [c for c in ("mech", "epsilon_method", "accountant", "delta") if c in frame.columns]
    rows = frame[cols].drop_duplicates().astype(str).values.tolist()
    return _md_table(cols, rows)


def render_markdown(
    frame: pd.DataFrame,
    sections: Sequence[tuple[str, str, str, list[Path]]],
    *,
    source: Path,
    skipped: Sequence[str],
    limits: Sequence[float],
) -> str:
    """report.md: header, then per dataset/profile its tables and figures, then what was skipped."""
    seeds = sorted(frame["seed"].unique().tolist())
    versions = sorted(frame["code_version"].astype(str).unique()) if "code_version" in frame else []
    parts = [
        "# Privacy audit report",
        f"Source: `{source}`: {len(frame)} rows, seed(s) {seeds}"
        + (f", code version(s) {', '.join(versions)}." if versions else "."),
        "Values are the mean over seeds ± the half-width of the 95 % Student-t interval, "
        "t(0.975, n-1)·s/√n over n seeds (plots cut it at the metric's range); a value from a "
        "single seed is shown alone. Two seeds give t = 12.7, so use three or more (t = 4.30) "
        "for intervals that say something. ε of the non-private run is ∞.",
    ]
    for name, table, spots, figures in sections:
        parts += [
            f"## {name}",
            "### Results",
            table,
            "`utility_valid` (runs.csv): the row's non-private baseline classifies above chance "
            "by a one-sided exact binomial test at 1 % on the test-set size; φ is left empty "
            "where it does not.",
            "### Sweet spots",
            "For each MI AP limit, the setting of each mechanism with the best accuracy whose "
            "attack power (the largest MI AP over the distances, mean over seeds) is at most "
            f"the limit (paper 003, Section 5.2); limits {', '.join(f'{x:g}' for x in limits)}."
            " The baseline (none) is listed too: where it qualifies, no mechanism is needed.",
            spots,
            "### Figures",
        ]
        parts += [f"![{p.stem}]({p.name})" for p in figures if p.suffix == ".png"] or ["(none)"]
    parts += ["## How ε was computed", epsilon_methods(frame)]
    if skipped:
        parts += ["## Skipped", "\n".join(f"- {s}" for s in skipped)]
    return "\n\n".join(parts) + "\n"


# ---- orchestration ------------------------------------------------------------------------------


def write_report(
    run_dir: Path,
    out_dir: Path | None = None,
    *,
    formats: Sequence[str] = FORMATS,
    limits: Sequence[float] = MI_AP_LIMITS,
    data_home: Path | None = None,
    images: bool = True,
) -> Report:
    """Write figures (each in every format) and ``report.md`` for the run in ``run_dir``.

    ``out_dir`` defaults to ``run_dir/report``; ``data_home`` is where downloadable datasets live
    (for the reconstruction and sample grids, which need the data); ``images=False`` skips the
    grids.
    """
    if not formats:
        raise ValueError("at least one figure format is needed, e.g. png")
    bad = [x for x in limits if not 0 < x <= 1]
    if bad or not limits:
        raise ValueError(f"MI AP limits must lie in (0, 1], got {list(limits)}")
    frame = load_runs(run_dir)
    out = io.check_writable_dir(
        Path(out_dir) if out_dir is not None else Path(run_dir) / REPORT_DIR
    )
    report = Report(out_dir=out, markdown=out / REPORT_MD)
    sections = []
    for name, stem_prefix, group in _sections(frame, Path(run_dir)):
        settings, distances = setting_summary(group), distance_summary(group)
        no_utility = utility_note(group)
        figures = summary_figures(
            settings, distances, name=name, skipped=report.skipped, no_utility=no_utility
        )
        figures += curve_figures(run_dir, group, name=name, skipped=report.skipped)
        if images:
            figures += grid_figures(
                run_dir, _ordered(group), name=name, data_home=data_home, skipped=report.skipped
            )
        paths = []
        for stem, fig in figures:
            paths += save_figure(fig, out, f"{_slug(stem_prefix)}-{stem}", formats)
        report.figures += paths
        sections.append(
            (
                name,
                main_table(settings, distances),
                f"**Not computed:** {no_utility}."
                if no_utility
                else sweet_spot_table(sweet_spots(settings, limits)),
                paths,
            )
        )
    text = render_markdown(
        frame, sections, source=Path(run_dir), skipped=report.skipped, limits=limits
    )
    io.write_text(report.markdown, text)
    log.info("report written to %s (%d figure files)", report.markdown, len(report.figures))
    return report
