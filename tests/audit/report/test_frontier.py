"""The privacy-utility frontier: one point per setting with both intervals, the recommended
setting per limit ringed, and readable from 1 to 20 settings and every mechanism."""

from __future__ import annotations

import math

import pytest
from matplotlib.collections import PathCollection
from matplotlib.text import Annotation

from audit.report.evidence import Evidence
from audit.report.frontier import frontier_figure
from audit.report.sweet_spots import recommendation, sweet_spots
from tests.audit.report.layout_check import assert_readable

MECHS = ("cdp", "cdp-termwise", "ldp", "vae-ldp", "dp2vae")


def _settings(n: int, mechs: tuple[str, ...]) -> list[Evidence]:
    """The baseline and ``n`` private settings spread over ``mechs``, accuracy and MI AP
    falling together as the noise grows."""
    out = [_point("none", "none", math.inf, 0.85, 0.8)]
    for i in range(n):
        mech = mechs[i % len(mechs)]
        k = i // len(mechs)
        noise = 0.1 * 2**k
        out.append(
            _point(
                mech,
                f"z={noise:g}",
                1000 / (1 + 10 * k),
                0.8 - 0.03 * k - 0.01 * i,
                0.78 - 0.04 * k,
            )
        )
    return out


def _point(mech: str, label: str, eps: float, mi: float, acc: float) -> Evidence:
    return Evidence(
        setting_hash=f"{mech}-{label}", mech=mech, param_label=label, param_value=1.0,
        epsilon=eps, delta=1e-5, seeds=1, worst_mi_ap=mi, worst_mi_ap_low=mi - 0.04,
        worst_mi_ap_high=mi + 0.04, floor=0.53, attacked=2000,
        strongest_attack="mse", strongest_mi_ap=mi,
        strongest_mi_ap_low=mi - 0.04, acc=acc, acc_low=acc - 0.02, acc_high=acc + 0.02,
        chance=0.3, acc_above_chance=acc > 0.33,
    )  # fmt: skip


@pytest.mark.parametrize(("n", "mechs"), [(1, MECHS[:1]), (3, MECHS[:1]), (8, MECHS), (20, MECHS)])
def test_the_frontier_is_readable_at_any_sweep_size(n, mechs):
    evidence = _settings(n, mechs)
    spots = sweet_spots(evidence, [0.55, 0.6, 0.75])
    fig = frontier_figure(evidence, spots, title="lfw20, profile quick: privacy-utility frontier")
    assert fig is not None
    assert_readable(fig, max_legend_entries=8)
    ax = fig.axes[0]
    marked = [line for line in ax.get_lines() if line.get_marker() not in ("None", "", " ", None)]
    points = sum(len(line.get_xdata()) for line in marked)
    assert points >= n + 1  # every setting and the baseline
    # the labels are placed where they overlap no other label (room enough up to 8 settings)
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts if isinstance(t, Annotation)]
    assert len(boxes) == n + 1
    overlaps = sum(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert overlaps == 0 or n > 8, overlaps
    rings = [c for c in ax.collections if isinstance(c, PathCollection)]
    ringed = [c for c in rings if c.get_sizes().size and c.get_sizes()[0] > 200]
    chosen = {(s.mech, s.setting) for _, s in recommendation(spots) if s is not None}
    assert len(ringed) == len(chosen) and (chosen or n < 8)


def test_no_frontier_without_utility():
    e = _point("cdp", "z=1", 5.0, 0.6, math.nan)
    assert frontier_figure([e], [], title="t") is None
