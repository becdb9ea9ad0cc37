"""``report`` names interrupted and planned-but-missing cells and exits 1 (issue 30, item 12);
a cell whose rows.json no longer matches its recorded digest is refused (issue 40)."""

from __future__ import annotations

from audit import results
from benchmark import main
from tests.audit.fakes import cell_config, write_cell


def test_report_lists_damaged_and_missing_cells_and_fails(tmp_path, capsys):
    out = tmp_path / "run"
    configs = [cell_config("none", None), cell_config("cdp", 1.0), cell_config("cdp", 2.0)]
    results.claim_run(out, configs)  # the sweep's manifest: three planned cells
    write_cell(out, configs[0], mi_ap=0.7)
    damaged = write_cell(out, configs[1], mi_ap=0.6, epsilon=3.0)
    (damaged / "rows.json").write_text("{torn")  # no longer its recorded digest: refused
    assert main(["report", str(out), "--no-images"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {damaged / 'rows.json'} does not match the SHA-256")
    assert not (out / "report").exists()
    (damaged / "rows.json").unlink()  # interrupted (as by a kill): missing, not refused
    # configs[2] was planned but never written
    assert main(["report", str(out), "--no-images"]) == 1
    text = (out / "report" / "report.md").read_text()
    missing = text.split("## Cells missing from this report")[1]
    assert f"cells/{damaged.name} (cdp noise_multiplier=1.0, seed 0): planned" in missing
    assert "damaged or interrupted" in missing and "never written" in missing
    assert f"cells/{results.cell_hash(configs[2])} (cdp noise_multiplier=2.0, seed 0)" in missing
    assert capsys.readouterr().out.count("missing: ") == 2
    write_cell(out, configs[1], mi_ap=0.6, epsilon=3.0)
    write_cell(out, configs[2], mi_ap=0.55, epsilon=1.0)
    assert main(["report", str(out), "--no-images"]) == 0
