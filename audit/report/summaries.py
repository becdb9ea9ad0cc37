"""A run's rows as the report reads them, and what it computes from them: sections per dataset,
profile and run configuration, per-setting summaries over seeds, sweet spots, the utility check.

A *setting* is a cell's config but its seed (:data:`SETTING`); every number is the mean over its
seeds with the half-width of the 95 % Student-t interval (:mod:`audit.report.stats`).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd

from audit import results
from audit.attack_plan import CELL_DEFAULT_ATTACKS
from audit.check import param_label
from audit.mechanisms import BASELINE, available_mechanisms
from audit.report.stats import summarise, t_interval
from audit.rows import derived
from audit.rows.row import PAPER_ATTACK, PLAIN_VARIANT
from audit.rows.tradeoff import chance_accuracy

log = logging.getLogger(__name__)

MI_AP_LIMITS = (0.55, 0.6, 0.75)
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
    frame["distance"] = measure_labels(frame)
    frame = with_worst_case(frame)
    repeated = frame.duplicated([*SETTING, "seed", "distance"]).sum()
    if repeated:
        raise ValueError(
            f"{run_dir}: {repeated} row(s) repeat a (setting, seed, distance) and there are no "
            "cell configs to tell their configurations apart; report the cells' directory "
            "instead of a bare runs.csv"
        )
    return _label_options(frame, run_dir)


#: The measure label of a cell's held-out worst case over its attacks.
WORST_CASE = "worst case"


def with_worst_case(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` plus one row per cell with a held-out worst case
    (:func:`audit.rows.derived.worst_case_rows`), measure :data:`WORST_CASE`: the report's tables
    and MI AP figures show it as one more line, and :func:`per_seed` reads it as the setting's
    attack power."""
    worst = derived.worst_case_rows(frame)
    if worst.empty:
        return frame
    return pd.concat([frame, worst.assign(distance=WORST_CASE)], ignore_index=True)


def measure_labels(frame: pd.DataFrame) -> pd.Series:
    """What the report calls a row's measure, one line or column per value: the reconstruction
    attack's distance as it always was (``mse``, ``ssim``); any other attack's result as
    ``attack:distance`` (``:variant`` unless the variant is ``mean``), so that MI AP against
    epsilon gets one line per attack and no two results of a cell collapse into one."""
    attack = frame["attack"].astype(str)
    variant = frame["variant"].astype(str)
    labels = attack + ":" + frame["distance"].astype(str)
    labels = labels.where(variant == PLAIN_VARIANT, labels + ":" + variant)
    return frame["distance"].where(attack == PAPER_ATTACK, labels)


def _label_options(frame: pd.DataFrame, run_dir: Path) -> pd.DataFrame:
    """Where one run configuration holds several settings of one (mech, parameter), append to
    each one's ``param_label`` what tells them apart: their attack lists (cells run with
    different ``--attack`` lists, each with its own worst case) and/or their mechanism
    options."""
    keys = ["dataset", "profile", "run_hash", "mech", "param_label"]
    clashes = frame.groupby(keys, dropna=False)["setting_hash"].transform("nunique") > 1
    if not clashes.any():
        return frame
    configs = results.cell_configs(run_dir)
    by_setting = {results.setting_hash(c): setting_label_parts(c) for c in configs.values()}
    frame = frame.copy()
    kinds = set()
    lists = frame.groupby(keys, dropna=False)["setting_hash"].transform(
        lambda hashes: len({by_setting.get(h, ("", ""))[0] for h in hashes})
    )
    labels = frame["param_label"].copy()
    for i in frame.index[clashes]:
        attacks, options = by_setting.get(frame.at[i, "setting_hash"], ("", ""))
        parts = [f"attacks: {attacks}"] if lists[i] > 1 else []
        kinds.add("attack lists" if parts else "mechanism options")
        if not parts or options != "default options":
            parts.append(options)
        labels[i] = f"{labels[i]} [{'; '.join(parts)}]"
    frame["param_label"] = labels
    log.warning(
        "%s holds settings that differ in their %s; they are shown apart, each with its own "
        "worst case",
        run_dir,
        " and ".join(sorted(kinds)),
    )
    return frame


def setting_label_parts(config: dict) -> tuple[str, str]:
    """(the cell's attack list, its mechanism options) as label text."""
    attacks = ", ".join(config.get("attacks", CELL_DEFAULT_ATTACKS))
    options = results.mech_settings(config)
    text = ", ".join(f"{k}={v}" for k, v in sorted(options.items())) or "default options"
    return attacks, text


def run_sections(frame: pd.DataFrame, run_dir: Path) -> list[tuple[str, str, pd.DataFrame]]:
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


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """Baseline first, then mechanisms in their registration order, each from least to most
    noise."""
    ranks = {m: i for i, m in enumerate(available_mechanisms())}
    rank = frame["mech"].map(ranks).fillna(len(ranks))
    key = frame.assign(_rank=rank, _eps=-frame["epsilon"].astype(float))
    return frame.loc[key.sort_values(["_rank", "mech", "_eps", "param_value"]).index]


def per_seed(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, seed): acc, acc_real, acc_base, epsilon, and ``attack_power``: the
    cell's held-out worst case over its attacks (the :data:`WORST_CASE` measure) where the cell
    has one, else (D_atk too small to split, or a bare runs.csv without the column) the largest
    MI AP over the measures (NaN if any measure's MI AP is NaN)."""
    grouped = frame.groupby([*SETTING, "seed"], dropna=False, sort=False)
    columns = ["acc", "acc_real", "acc_base", "epsilon"]
    out = grouped[[*columns, *(["acc_majority"] if "acc_majority" in frame else [])]].mean()
    out["attack_power"] = grouped[["distance", "mi_ap"]].apply(_attack_power)
    return out.reset_index()


def _attack_power(rows: pd.DataFrame) -> float:
    worst = rows.loc[rows["distance"] == WORST_CASE, "mi_ap"]
    if not worst.empty:
        return float(worst.iloc[0])
    return float(rows["mi_ap"].max(skipna=False))


def setting_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per setting: mean and 95 % half-width over seeds of acc, epsilon, attack power."""
    metrics = ("acc", "acc_real", "acc_base", "epsilon", "attack_power")
    seeds = per_seed(frame)
    metrics += ("acc_majority",) if "acc_majority" in seeds else ()
    return ordered(summarise(seeds, SETTING, metrics)).reset_index(drop=True)


def distance_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, distance): mean and 95 % half-width over seeds of MI AP, phi, eps;
    and how sure each MI AP is: ``mi_ap_low`` / ``mi_ap_high``, its 95 % interval (one seed: the
    row's bootstrap interval; several: the mean ± the t half-width, cut to [0, 1]), and
    ``mi_ap_null_q95``, the blind attacker's 95 % quantile at the rows' counts (mean over seeds;
    NaN where the rows do not carry it)."""
    keys = [*SETTING, "distance"]
    out = summarise(frame, keys, ("mi_ap", "phi", "epsilon"))
    sure = [_mi_ap_sureness(group) for _, group in frame.groupby(keys, dropna=False, sort=True)]
    out[["mi_ap_low", "mi_ap_high", "mi_ap_null_q95"]] = (
        np.array(sure, dtype=np.float64).reshape(-1, 3) if sure else np.empty((0, 3))
    )
    return ordered(out).reset_index(drop=True)


def _mi_ap_sureness(rows: pd.DataFrame) -> tuple[float, float, float]:
    """(low, high, blind 95 % quantile) of one (setting, distance)'s MI AP over its seeds."""
    values = rows["mi_ap"].astype(float)
    finite = values.dropna()
    q95 = rows["mi_ap_null_q95"].astype(float) if "mi_ap_null_q95" in rows else values * np.nan
    null = float(q95.mean()) if q95.notna().any() else math.nan
    if len(finite) == 1:
        row = rows.loc[finite.index[0]]
        low, high = float(row.get("mi_ap_low", math.nan)), float(row.get("mi_ap_high", math.nan))
        return low, high, null
    ci = t_interval(finite.to_numpy())
    if not math.isfinite(ci.half_width):
        return math.nan, math.nan, null
    return max(0.0, ci.mean - ci.half_width), min(1.0, ci.mean + ci.half_width), null


def utility_note(frame: pd.DataFrame) -> str | None:
    """Why the accuracy axis of one dataset and profile measures nothing, or None where it does:
    some row's non-private baseline is not above chance (``utility_valid``, a one-sided exact
    binomial test at 1 % on the test-set size; :func:`audit.rows.tradeoff.above_chance`)."""
    if "utility_valid" not in frame or frame["utility_valid"].astype(bool).all():
        return None  # valid, or a runs.csv from before the flag: nothing to judge by
    if "acc" in frame and frame["acc"].isna().all():
        return (
            "no utility was measured (an attacked release's rows carry no accuracy: that needs "
            "a labelled test set and the classifier), so φ and the sweet spots do not apply"
        )
    base = frame[frame["mech"] == BASELINE]
    n_test = base["n_test"].iloc[0] if "n_test" in base and not base.empty else math.nan
    acc = base["acc"].mean() if not base.empty else math.nan
    majority = base["acc_majority"].max() if "acc_majority" in base else math.nan
    chance = chance_accuracy(frame["acc_base"].mean(), majority)
    return (
        f"the non-private baseline's accuracy ({acc:.3f}) is not above chance "
        f"({chance:.3f}: the larger of 1/#classes and D_test's majority-class share) by a "
        f"one-sided exact binomial test at 1 % on "
        f"{n_test:g} test records (or the baseline or its n_test is missing), so the accuracy "
        "axis measures nothing here: φ and the sweet spots are not computed. Raise "
        "--gen-records or --epochs"
    )
