"""The report's figure style: labels, colours per mechanism and attack family, variant line styles,
the size of panels and legends, and saving a figure deterministically."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from attacks.registry import sweep_attacks
from audit import io
from audit.mechanisms import BASELINE, find_mechanism, private_mechanisms
from audit.report.summaries import WORST_CASE
from audit.rows.row import PAPER_ATTACK


def point_label(mech: str) -> str | None:
    """What the point labels of ``mech``'s line are (its parameter's label: z is the DP noise
    multiplier, not a latent), None for the baseline or a mechanism not registered."""
    mechanism = find_mechanism(mech)
    return (mechanism.param_label or None) if mechanism is not None else None


#: Figure formats a report writes by default (a sweep's and a release's).
FORMATS = ("png", "pdf")

EPSILON_LABEL = "privacy budget ε (log scale)"


ACC_LABEL = "accuracy on the real test set\n(classifier trained on generated data)"


MI_AP_LABEL = "attack MI AP (average precision;\nmembers positive, 0.5 = chance)"


PHI_LABEL = "φ (privacy-utility trade-off, 0..2)"


BASELINE_COLOR = "black"


#: The blind attacker's band: an MI AP at or below its 95 % quantile is at chance.
CHANCE_COLOR = "#e8d9b0"


WORST_CASE_LABEL = "held-out worst case (measured on the other half of D_atk)"


#: Dark2's teal, orange, purple, pink, brown, green and yellow: apart from each other and from
#: black. The k-th attack of the sweep's list takes the k-th (:func:`family_color`).
_FAMILY_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#a6761d", "#66a61e", "#e6ab02")


#: (line style, marker) of a family's k-th variant, the same in every figure.
VARIANT_STYLES = (
    ("-", "o"),
    ("--", "s"),
    (":", "^"),
    ("-.", "v"),
    ((0, (6, 2, 1, 2, 1, 2)), "D"),
    ((0, (1, 1)), "P"),
    ((0, (8, 3)), "X"),
    ((0, (3, 1, 3, 4)), "*"),
)


MAX_LEGEND_ENTRIES = 8


#: Panels per row: two keep every panel wider than a third of the figure.
MAX_PANEL_COLUMNS = 2


#: Point labels per line at most (spread evenly, the first and last always labelled).
MAX_POINT_LABELS = 6


#: Settings per mechanism named in an attack-curve legend (the rest drawn in between shades).
MAX_NAMED_SETTINGS = 5


PANEL_WIDTH, PANEL_HEIGHT = 5.2, 3.6


SINGLE_WIDTH = 7.5


def mech_color(mech: str) -> tuple[float, float, float] | str:
    """A fixed colour per mechanism (the same in every figure): the colourblind palette in the
    registry's order of the private mechanisms; black for the baseline, grey for a name not
    registered."""
    if mech == BASELINE:
        return BASELINE_COLOR
    private = private_mechanisms()
    if mech not in private:
        return (0.5, 0.5, 0.5)
    palette = sns.color_palette("colorblind")
    return palette[private.index(mech) % len(palette)]


def attack_family(measure: str) -> str:
    """The attack of a measure label (``attack:distance[:variant]``, or the paper's attack's
    bare distance: the reconstruction attack's results carry their distance alone, mse, ssim);
    the worst case is its own family."""
    if measure == WORST_CASE:
        return WORST_CASE
    return measure.split(":")[0] if ":" in measure else PAPER_ATTACK


def variant_name(measure: str) -> str:
    """What tells a measure apart within its family: ``pca-l2:nearest``, ``mse``."""
    return measure.split(":", 1)[1] if ":" in measure else measure


def measure_label(measure: str) -> str:
    """A measure as a legend names it: the worst case spelled out, the reconstruction attack's
    bare distance with its attack (``reconstruction:mse``)."""
    if measure == WORST_CASE:
        return WORST_CASE_LABEL
    return measure if ":" in measure else f"{PAPER_ATTACK}:{measure}"


def family_color(family: str) -> tuple[float, float, float] | str:
    """A fixed colour per attack (the same in every figure): the k-th of the sweep's attack list
    (:func:`~attacks.registry.sweep_attacks`) takes the k-th of :data:`_FAMILY_COLOURS`; black
    for the worst case, grey for an attack outside the list."""
    if family == WORST_CASE:
        return BASELINE_COLOR
    families = sweep_attacks()
    if family not in families:
        return (0.45, 0.45, 0.45)
    return _FAMILY_COLOURS[families.index(family) % len(_FAMILY_COLOURS)]


def family_order(measures: Sequence[str]) -> list[str]:
    """The families of ``measures``: the worst case, then the sweep's attack list in its order
    (:func:`~attacks.registry.sweep_attacks`), then others."""
    found = {attack_family(m) for m in measures}
    known = [f for f in (WORST_CASE, *sweep_attacks()) if f in found]
    return known + sorted(found - set(known))


def variant_styles(measures: Sequence[str]) -> dict[str, tuple[object, str]]:
    """(line style, marker) per measure: a family's variants in sorted order take
    :data:`VARIANT_STYLES` in turn, so one variant has the same style in every figure."""
    styles = {}
    for family in family_order(measures):
        mine = sorted(m for m in set(measures) if attack_family(m) == family)
        for k, measure in enumerate(mine):
            styles[measure] = VARIANT_STYLES[k % len(VARIANT_STYLES)]
    return styles


@contextmanager
def report_style() -> Iterator[None]:
    with sns.axes_style("whitegrid"), sns.plotting_context("paper", font_scale=1.1):
        yield


def wrap(text: str, width_in: float, fontsize: float) -> str:
    """``text`` broken into lines that fit ``width_in`` inches at ``fontsize`` points (an
    average glyph is taken as 0.55 of the font size wide)."""
    chars = max(12, int(width_in * 72 / (0.55 * fontsize)))
    return "\n".join(
        textwrap.fill(line, chars, break_on_hyphens=False, break_long_words=False)
        for line in text.splitlines()
    )


def short_number(value: float) -> str:
    """``value`` to two significant digits, as :func:`plain_number` writes it: 19, 0.5, 8.2e8, ∞."""
    return plain_number(float(f"{value:.2g}")) if math.isfinite(value) else plain_number(value)


def _show(ax: Axes, image: np.ndarray) -> None:
    if image.shape[0] == 1:
        ax.imshow(image[0], cmap="gray", vmin=0, vmax=1)
    else:
        ax.imshow(np.clip(image.transpose(1, 2, 0), 0, 1))


def save_figure(fig: Figure, out_dir: Path, stem: str, formats: Sequence[str]) -> list[Path]:
    """Write ``fig`` as ``out_dir/stem.<format>`` for each format, atomically, with no creation
    date in the file (a rewritten report's figures are the same bytes); returns the paths."""
    paths = []
    for fmt in formats:
        path = Path(out_dir) / f"{stem}.{fmt}"
        metadata = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}.get(fmt, {})
        io.write_with(
            path,
            lambda tmp, fmt=fmt, metadata=metadata: fig.savefig(
                tmp, format=fmt, dpi=150, metadata=metadata
            ),
        )
        paths.append(path)
    return paths


def plain_number(value: float, _pos: object = None) -> str:
    """A tick or label number as one writes it: 0.05, 20, 500, 2e6."""
    if not math.isfinite(value):
        return "∞" if value > 0 else "n/a"
    if value == 0:
        return "0"
    if 1e-3 <= abs(value) < 1e5:
        return f"{value:g}"
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"
