"""The MI AP figures with many attacks: panels wrap, the worst case leads, and the per-mechanism
figure draws one line per measure with the worst case in black."""

import numpy as np
import pandas as pd
from matplotlib.colors import to_rgba

from audit.report.epsilon_figures import summary_figures
from audit.report.figure_style import MAX_PANEL_COLUMNS
from audit.report.plots import measure_order, mi_ap_by_attack, mi_ap_vs_epsilon
from audit.report.summaries import WORST_CASE

ATTACKS = ("mse", "ssim", "likelihood:iwae-bernoulli:raw", "monte-carlo:pca-l2:nearest")


def _points(measures, mechs=("cdp", "vae-ldp")) -> pd.DataFrame:
    rows = []
    for mech in mechs:
        for i, eps in enumerate((1.0, 10.0)):
            for j, measure in enumerate(measures):
                rows.append(
                    dict(
                        mech=mech,
                        distance=measure,
                        param_label=f"p{i}",
                        epsilon=eps,
                        epsilon_hw=np.nan,
                        mi_ap=0.5 + 0.05 * j + 0.01 * i,
                        mi_ap_hw=np.nan,
                        phi=np.nan,
                    )
                )
    return pd.DataFrame(rows)


def _settings(points: pd.DataFrame) -> pd.DataFrame:
    first = points.drop_duplicates(["mech", "param_label"]).copy()
    return first.assign(acc=0.8, acc_hw=np.nan, acc_real=0.9, acc_base=0.5)


def test_measures_are_ordered_with_the_worst_case_first():
    assert measure_order(["ssim", WORST_CASE, "mse"], WORST_CASE) == [WORST_CASE, "mse", "ssim"]
    assert measure_order(["ssim", "mse"], WORST_CASE) == ["mse", "ssim"]


def test_many_measures_get_one_panel_per_family_in_rows_and_the_worst_case_leads():
    measures = [*ATTACKS, WORST_CASE, *(f"latent-search:mse:v{k}" for k in range(4))]
    fig = mi_ap_vs_epsilon(_points(measures), {}, title="t", first=WORST_CASE)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    # worst case, reconstruction (mse, ssim), monte-carlo, latent-search (4), likelihood
    assert len(shown) == 5
    cols = {round(ax.get_position().x0, 3) for ax in shown}
    assert len(cols) == MAX_PANEL_COLUMNS == 2  # 5 panels in rows of 2, not one row of 5
    assert shown[0].get_title().startswith("held-out worst case")
    assert shown[1].get_title() == "reconstruction (2 variants)"


def test_the_per_mechanism_figure_draws_each_measure_and_the_worst_case_in_black():
    measures = [*ATTACKS, WORST_CASE]
    fig = mi_ap_by_attack(_points(measures), title="t", worst=WORST_CASE)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["cdp", "vae-ldp"]
    for ax in panels:
        lines = {line.get_label(): line for line in ax.get_lines() if line.get_label()[0] != "_"}
        assert set(lines) == set(measures)
        worst = lines[WORST_CASE]
        assert to_rgba(worst.get_color()) == to_rgba("black")
        assert worst.get_linewidth() > max(
            line.get_linewidth() for name, line in lines.items() if name != WORST_CASE
        )
        assert np.allclose(worst.get_ydata(), [0.5 + 0.05 * 4, 0.5 + 0.05 * 4 + 0.01])


def test_the_per_mechanism_figure_only_when_attacks_beyond_reconstruction_ran():
    def stems(measures):
        points = _points(measures)
        figures = summary_figures(_settings(points), points, name="x", skipped=[])
        return [stem for stem, _ in figures]

    assert "mi_ap_by_attack" not in stems(["mse", "ssim", WORST_CASE])
    assert "mi_ap_by_attack" in stems([*ATTACKS, WORST_CASE])
