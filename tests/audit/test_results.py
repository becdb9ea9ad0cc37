"""The results module: manifest, damaged cells, locks, orphans; and the report and the gate on
runs whose runs.csv is torn, whose cells are damaged or whose configurations are mixed."""

from __future__ import annotations

import json
import logging
import math
import os
import time

import pandas as pd
import pytest

from audit import io, results
from audit.cell.membership import AttackIndex
from audit.config import CACHE_SCHEMA, SweepConfig
from audit.mechanisms import build_options
from audit.profiles import PROFILES, ProfileName
from audit.report import write_report
from audit.report.summaries import load_runs
from audit.sweep.plan import build_cells
from benchmark import main
from tests.audit.fakes import cell_config, write_cell

# ---- item 1: one configuration per directory ------------------------------------------------


def _configs(tmp_path, mechs=("cdp",), options=(), epochs=40):
    profile = PROFILES[ProfileName.QUICK]
    config = SweepConfig(
        dataset="digits",
        mechs=tuple(m for m in mechs),
        profile_name=ProfileName.QUICK,
        profile=profile.__class__(**{**vars(profile), "epochs": epochs}),
        seeds=(0,),
        out=tmp_path,
        grid=(1.0,),
        mech_options=build_options([m for m in mechs], dict(options)),
    )
    return [cell.canonical() for cell, _ in build_cells(config, data_sha256="a" * 64)]


def test_a_later_sweep_with_another_run_configuration_is_refused_naming_each_difference(tmp_path):
    results.claim_run(tmp_path, _configs(tmp_path))
    with pytest.raises(ValueError) as err:
        results.claim_run(tmp_path, _configs(tmp_path, epochs=5))
    assert "epochs: 40 vs 5" in str(err.value) and "another --out" in str(err.value)
    with pytest.raises(ValueError, match=r"cdp clip_norm: \(unset\) vs 2\.0"):
        results.claim_run(tmp_path, _configs(tmp_path, options=(("clip_norm", "2"),)))
    # a mechanism the directory does not hold yet brings its own options; same run config: fine
    termwise = _configs(tmp_path, mechs=("cdp-termwise",), options=(("clip_norm", "2"),))
    results.claim_run(tmp_path, termwise)
    results.claim_run(tmp_path, _configs(tmp_path))
    manifest = results.read_manifest(tmp_path)
    assert set(manifest["mechs"]) == {"none", "cdp", "cdp-termwise"}
    assert len(manifest["cells"]) == 3


def test_report_never_averages_rows_of_two_configurations(tmp_path, caplog):
    """An older directory holding cdp z=1 at 40 and at 5 epochs (eps 19.1 and 5.03) reports
    each in its own section; before, one row showed their mean, eps 12.1."""
    for epochs, eps in ((40, 19.1), (5, 5.03)):
        write_cell(tmp_path, cell_config("none", epochs=epochs))
        write_cell(tmp_path, cell_config("cdp", 1.0, epochs=epochs), epsilon=eps, mi_ap=0.55)
    results.write_csv(tmp_path)
    with caplog.at_level(logging.WARNING):
        report = write_report(tmp_path, formats=("png",), images=False)
    text = report.markdown.read_text()
    assert "| 19.1 |" in text and "| 5.03 |" in text and "12.1" not in text
    assert text.count("\n## digits, profile quick, configuration ") == 2  # a section each
    assert "epochs: 40 vs 5" in text or "epochs: 5 vs 40" in text  # the first by run hash
    assert "run configurations" in caplog.text


def test_settings_that_differ_in_mechanism_options_are_shown_apart(tmp_path):
    write_cell(tmp_path, cell_config("none"))
    write_cell(tmp_path, cell_config("cdp", options={"clip_norm": 1.0}), epsilon=3.0)
    write_cell(tmp_path, cell_config("cdp", options={"clip_norm": 2.0}), epsilon=3.0)
    labels = set(load_runs(tmp_path)["param_label"])
    assert labels == {"none", "z=1 [clip_norm=1.0]", "z=1 [clip_norm=2.0]"}


# ---- item 3: damaged results ------------------------------------------------------------------


def _run_with_two_cdp_cells(tmp_path):
    configs = [cell_config("none"), cell_config("cdp", 1.0), cell_config("cdp", 2.0)]
    cells = [write_cell(tmp_path, c, epsilon=3.0) for c in configs]
    results.claim_run(tmp_path, configs)
    results.write_csv(tmp_path)
    return cells


def test_report_reads_the_cells_not_a_torn_runs_csv(tmp_path):
    _run_with_two_cdp_cells(tmp_path)
    csv = tmp_path / results.RUNS_CSV
    csv.write_text(csv.read_text()[:-150])  # cut mid-line, as a full disk would
    frame = load_runs(tmp_path)
    assert len(frame) == 6 and frame["config_hash"].notna().all()
    write_report(tmp_path, formats=("png",), images=False)


def test_a_torn_cell_is_refused_by_readers_and_left_out_of_runs_csv(tmp_path, caplog):
    """A torn or foreign rows.json no longer matches its recorded digest: the report's reading
    refuses the run in one line naming the first such file; runs.csv, rebuilt by a sweep, leaves
    both cells out, each named in a warning."""
    cells = _run_with_two_cdp_cells(tmp_path)
    (cells[2] / "rows.json").write_text('{"schema_version": 1, "rows": [')
    (cells[1] / "rows.json").write_text(json.dumps({"schema_version": 99, "rows": []}))
    with pytest.raises(ValueError) as err:
        load_runs(tmp_path)
    first = min(str(cells[1] / "rows.json"), str(cells[2] / "rows.json"))
    assert str(err.value).startswith(first) and "(and 1 more)" in str(err.value)
    assert "\n" not in str(err.value)
    with caplog.at_level(logging.WARNING):
        _, frame = results.write_csv(tmp_path)
    assert set(frame["mech"]) == {"none"}
    assert str(cells[2] / "rows.json") in caplog.text and str(cells[1] / "rows.json") in caplog.text
    assert not results.is_finished(cells[1]) and results.is_finished(cells[0])


def _thresholds(tmp_path, values):
    entries = [
        {
            "dataset": "digits",
            "profile": "quick",
            "mech": "cdp",
            "param_value": v,
            "distance": "any",
            "max_mi_ap": 0.9,
            "tolerance": 0.02,
            "margin_source": "test",
        }
        for v in values
    ]
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps({"schema_version": 1, "entries": entries}))
    return path


def test_check_refuses_a_damaged_cell_and_fails_on_an_unfinished_one(tmp_path, capsys):
    run = tmp_path / "run"
    cells = _run_with_two_cdp_cells(run)
    thresholds = _thresholds(tmp_path, [1.0, 2.0])
    assert main(["check", "--thresholds", str(thresholds), str(run)]) == 0
    (cells[2] / "rows.json").write_text("{")  # damaged: refused, naming the file
    capsys.readouterr()
    assert main(["check", "--thresholds", str(thresholds), str(run)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {cells[2] / 'rows.json'} does not match the SHA-256")
    (cells[2] / "rows.json").unlink()  # unfinished (as after a kill): missing
    assert main(["check", "--thresholds", str(thresholds), str(run)]) == 1
    out = capsys.readouterr().out
    missing = [line for line in out.splitlines() if line.startswith("MISSING")]
    assert len(missing) == 1 and "cdp param 2" in missing[0] and "FAILED" in out


def test_check_holds_a_run_only_to_the_cells_it_planned(tmp_path, capsys):
    """As the CI's series cells: a sweep of cdp z=1 alone passes a file with every z."""
    run = tmp_path / "run"
    configs = [cell_config("none"), cell_config("cdp", 1.0)]
    for c in configs:
        write_cell(run, c, epsilon=3.0)
    results.claim_run(run, configs)
    thresholds = _thresholds(tmp_path, [0.5, 1.0, 2.0])
    assert main(["check", "--thresholds", str(thresholds), str(run)]) == 0
    assert "MISSING" not in capsys.readouterr().out


def test_check_without_a_manifest_expects_every_entry_of_a_mechanism_it_has(tmp_path, capsys):
    run = tmp_path / "run"
    for c in (cell_config("none"), cell_config("cdp", 1.0)):
        write_cell(run, c, epsilon=3.0)
    assert main(["check", "--thresholds", str(_thresholds(tmp_path, [1.0, 2.0])), str(run)]) == 1
    assert "MISSING: threshold entry 1" in capsys.readouterr().out


# ---- item 6: locks and orphans ------------------------------------------------------------------


def test_orphan_temp_files_are_cleaned_only_when_no_sweep_runs(tmp_path):
    cell = tmp_path / "cells" / "abc"
    cell.mkdir(parents=True)
    orphans = [tmp_path / ".runs.csv.k2j_x9a1.tmp", cell / ".model.pt.abcdefgh.tmp"]
    keep = [tmp_path / ".notes.tmp", cell / "model.pt", tmp_path / "report" / ".a.abcdefgh.tmp"]
    for path in orphans + keep:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
        os.utime(path, (time.time() - 60, time.time() - 60))
    another_sweep = results.locked(tmp_path / ".sweep.lock", shared=True)
    with another_sweep, results.sweep_session(tmp_path):  # this one leaves the files alone
        assert all(p.exists() for p in orphans)
    with results.sweep_session(tmp_path):
        assert not any(p.exists() for p in orphans) and all(p.exists() for p in keep)


def test_restored_floats_round_trip_non_finite_numbers(tmp_path):
    write_cell(tmp_path, cell_config("none"), epsilon=math.inf)
    frame = results.collect_rows(tmp_path)
    assert frame["epsilon"].dtype.kind == "f" and math.isinf(frame["epsilon"].iloc[0])


# ---- attack_index.npz: the attacked records' rows in the dataset ------------------------------


def test_attack_set_round_trips_and_refuses_damaged_files(tmp_path):
    import numpy as np

    records = AttackIndex(
        index=np.array([7, 3, 9, 1]),
        is_member=np.array([True, True, False, False]),
        train_index=np.array([2, 3, 5, 7]),
    )
    assert results.read_attack_index(tmp_path) is None  # a cell from before: no file
    results.write_attack_index(tmp_path, records)
    back = results.read_attack_index(tmp_path)
    for name in ("index", "is_member", "train_index"):
        np.testing.assert_array_equal(getattr(back, name), getattr(records, name))
    assert back.index.dtype == np.int64 and back.is_member.dtype == np.bool_
    assert not list(tmp_path.glob(".*.tmp"))

    path = tmp_path / results.ATTACK_INDEX_FILE
    np.savez(path, schema_version=2, index=records.index)
    with pytest.raises(ValueError, match="schema_version 2"):
        results.read_attack_index(tmp_path)
    np.savez(path, schema_version=1, index=records.index)
    with pytest.raises(ValueError, match=r"lacks \['is_member', 'train_index'\]"):
        results.read_attack_index(tmp_path)
    bad = {"index": np.array([-1, 2]), "is_member": np.array([True, False])}
    np.savez(path, schema_version=1, train_index=np.arange(3), **bad)
    with pytest.raises(ValueError, match="index must be a 1-d array of non-negative integers"):
        results.read_attack_index(tmp_path)
    path.write_bytes(b"torn")
    with pytest.raises(ValueError, match="unreadable"):
        results.read_attack_index(tmp_path)


# ---- rows keyed by attack --------------------------------------------------------------------


def _older_schema_run(tmp_path):
    """A finished run as code before the cache schema wrote it: no ``cache_schema`` in the
    cells' configs or the manifest (and no attack list)."""
    configs = [cell_config("none"), cell_config("cdp", 1.0)]
    for config in configs:
        del config["cache_schema"]
        write_cell(tmp_path, config)
    manifest = {"settings": {"dataset": "digits", "profile_name": "quick"}, "mechs": {}}
    io.write_json(tmp_path / "run.json", {**manifest, "cells": {}})
    return tmp_path


@pytest.mark.parametrize("command", ["report", "check", "sweep"])
def test_a_run_of_an_older_cache_schema_is_refused_in_one_line(tmp_path, capsys, command):
    out = _older_schema_run(tmp_path / "old")
    thresholds = _thresholds(tmp_path, [1.0])
    argv = {
        "report": ["report", str(out)],
        "check": ["check", "--thresholds", str(thresholds), str(out)],
        "sweep": ["--dataset", "digits", "--profile", "quick", "--out", str(out), "--no-progress"],
    }[command]
    before = sorted(p.name for p in (out / "cells").iterdir())
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ")
    assert f"cache schema 1 and this code reads {CACHE_SCHEMA}" in line
    assert "rerun its sweep into a fresh --out" in line
    assert sorted(p.name for p in (out / "cells").iterdir()) == before  # nothing lost
    assert not (out / "report").exists()


def test_rows_name_their_attack_and_variant_first(tmp_path):
    for mech, value, mi_ap in (("none", None, 0.7), ("cdp", 1.0, 0.6)):
        cell = write_cell(tmp_path, cell_config(mech, value), mi_ap=mi_ap, acc=0.8)
        # utility measurable, the baseline's attack beyond its chance band: phi means something
        rows = [{**r, "n_test": 100, "beyond_chance": True} for r in results.cell_rows(cell)]
        results.finish_cell(tmp_path, cell, {"rows": rows})
    frame = results.collect_rows(tmp_path)
    assert set(frame["attack"]) == {"reconstruction"} and set(frame["variant"]) == {"mean"}
    assert list(frame.columns[:8]) == [
        "dataset",
        "mech",
        "param_name",
        "param_value",
        "seed",
        "attack",
        "distance",
        "variant",
    ]
    cdp = frame[frame.mech == "cdp"]
    assert len(cdp) == 2 and cdp["phi"].notna().all()


def test_phi_compares_each_attack_with_the_same_attack_on_the_baseline(tmp_path):
    for mech, value, mi_ap in (("none", None, 0.9), ("cdp", 1.0, 0.6)):
        cell = write_cell(tmp_path, cell_config(mech, value), mi_ap=mi_ap, acc=0.8)
        rows = [{**r, "n_test": 100, "beyond_chance": True} for r in results.cell_rows(cell)]
        other = [{**r, "attack": "monte-carlo", "variant": "share", "mi_ap": 0.6} for r in rows]
        results.finish_cell(tmp_path, cell, {"rows": [*rows, *other]})
    frame = results.collect_rows(tmp_path)
    cdp = frame[frame.mech == "cdp"].set_index(["attack", "distance"])
    assert len(frame) == 8
    # reconstruction: 0.9 -> 0.6 at no accuracy cost, phi at its cap; monte-carlo: 0.6 -> 0.6
    assert (cdp.loc["reconstruction", "phi"] == 2.0).all()
    assert (cdp.loc["monte-carlo", "phi"] == 0.0).all()


def _phi_run(tmp_path, *, base_mi_ap, base_beyond, acc, mi_ap=0.55, majority=0.3):
    """A baseline (accuracy 0.8) and one cdp cell, 100 test records, majority rate ``majority``
    over 10 classes; rows as the cells write them, collected."""
    for mech, value, ap, a, beyond in (
        ("none", None, base_mi_ap, 0.8, base_beyond),
        ("cdp", 1.0, mi_ap, acc, False),
    ):
        cell = write_cell(tmp_path, cell_config(mech, value), mi_ap=ap, acc=a)
        rows = [
            {**r, "n_test": 100, "acc_majority": majority, "acc_base": 0.1, "beyond_chance": beyond}
            for r in results.cell_rows(cell)
        ]
        results.finish_cell(tmp_path, cell, {"rows": rows})
    return results.collect_rows(tmp_path).query("mech == 'cdp'").iloc[0]


def test_phi_of_a_setting_at_chance_accuracy_is_at_most_one(tmp_path):
    # accuracy 0.098 below the majority rate 0.3: clipped to chance, phi = (0.9-0.55)/(0.9-0.5)
    row = _phi_run(tmp_path, base_mi_ap=0.9, base_beyond=True, acc=0.098)
    assert row["phi"] == pytest.approx((0.9 - 0.55) / (0.9 - 0.5))
    assert row["phi"] <= 1
    # the paper's raw formula (ACC_base = 0.1, no clips) rewards it: (0.35*0.7)/(0.702*0.4)
    assert row["phi_paper"] == pytest.approx((0.35 * 0.7) / (0.702 * 0.4))
    assert row["phi_paper"] > 0.85 and row["phi_note"] == ""


def test_an_attack_below_chance_counts_as_chance(tmp_path):
    # MI AP 0.4 is clipped to 0.5: phi = (0.9-0.5)(0.8-0.3) / ((0.8-0.5)(0.9-0.5)) = 1.667,
    # as at MI AP 0.5; unclipped it would be (0.5*0.5)/(0.3*0.4) = 2.08
    row = _phi_run(tmp_path, base_mi_ap=0.9, base_beyond=True, acc=0.5, mi_ap=0.4)
    assert row["phi"] == pytest.approx((0.4 * 0.5) / (0.3 * 0.4))
    at_chance = _phi_run(tmp_path / "b", base_mi_ap=0.9, base_beyond=True, acc=0.5, mi_ap=0.5)
    assert row["phi"] == pytest.approx(at_chance["phi"])


def test_phi_is_empty_where_the_baseline_attack_is_at_chance(tmp_path):
    row = _phi_run(tmp_path, base_mi_ap=0.52, base_beyond=False, acc=0.7, mi_ap=0.5)
    assert math.isnan(row["phi"])
    assert "not beyond its chance band" in row["phi_note"]
    assert math.isfinite(row["phi_paper"])  # the raw formula is kept, labelled


def test_score_keys_name_the_attack_and_variant():
    assert results.scores_key("reconstruction", "mse") == "scores_reconstruction_mse"
    key = results.scores_key("monte-carlo", "pixel-l2", "share")
    assert key == "scores_monte-carlo_pixel-l2_share"
    assert results.parse_scores_key(key) == ("monte-carlo", "pixel-l2", "share")
    assert results.parse_scores_key("scores_reconstruction_ssim") == (
        "reconstruction",
        "ssim",
        "mean",
    )
    with pytest.raises(ValueError, match="is not a scores key"):
        results.parse_scores_key("scores_mse")  # no attack named
    with pytest.raises(ValueError, match="names without '_'"):
        results.scores_key("re_con", "mse")


def _utility_frame(**base) -> pd.DataFrame:
    """A reconstruction-only baseline cell B and a dp2vae cell whose rows are decoder-only
    attacks the baseline did not run."""
    common = {"baseline_hash": "B", "n_test": 60, "acc_base": 0.5, "acc_majority": 0.5}
    rows = [
        {
            **common,
            "config_hash": "B",
            "mech": "none",
            "attack": "reconstruction",
            "distance": "mse",
            "variant": "mean",
            "acc": 0.8,
            **base,
        },
        {
            **common,
            "config_hash": "D",
            "mech": "dp2vae",
            "attack": "latent-search",
            "distance": "mse",
            "variant": "raw",
            "acc": 0.5,
        },
    ]
    return pd.DataFrame(rows)


def test_utility_is_judged_by_the_baseline_cell_whatever_attacks_it_ran():
    from audit.rows.derived import _utility_valid

    frame = _utility_frame()
    dp2 = next(frame[frame.mech == "dp2vae"].itertuples(index=False))
    assert _utility_valid(frame, dp2)  # 0.8 of 60 against chance 0.5
    weak = _utility_frame(acc=0.55)
    assert not _utility_valid(weak, next(weak[weak.mech == "dp2vae"].itertuples(index=False)))


def test_the_majority_class_rate_is_the_chance_a_baseline_must_beat():
    from audit.rows.derived import _utility_valid

    # 0.8 of 60 beats 1/2 but not a D_test whose majority class holds 80 % of it
    frame = _utility_frame(acc_majority=0.8)
    assert not _utility_valid(frame, next(frame[frame.mech == "dp2vae"].itertuples(index=False)))
