"""One --out holding cells with different --attack lists (issue 30, item 11): the report labels
each setting by its attack list, not as '[default options]' twice."""

from __future__ import annotations

import logging

from audit.report.summaries import load_runs
from tests.audit.fakes import cell_config, write_cell


def test_settings_that_differ_in_attack_lists_are_labelled_by_them(tmp_path, caplog):
    out = tmp_path / "run"
    write_cell(out, cell_config("none", None), mi_ap=0.7)
    plain = cell_config("cdp", 1.0)
    wide = {**plain, "attacks": ["reconstruction", "monte-carlo"]}
    write_cell(out, plain, mi_ap=0.6, epsilon=3.0)
    write_cell(out, wide, mi_ap=0.62, epsilon=3.0)
    with caplog.at_level(logging.WARNING):
        frame = load_runs(out)
    labels = set(frame.loc[frame.mech == "cdp", "param_label"])
    assert labels == {
        "z=1 [attacks: reconstruction]",
        "z=1 [attacks: reconstruction, monte-carlo]",
    }
    assert "differ in their attack lists" in caplog.text
    assert "mechanism options" not in caplog.text
