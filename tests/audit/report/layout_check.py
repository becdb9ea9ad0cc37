"""Is a rendered figure readable? A reusable check for the report's figures (and any new one).

``assert_readable(fig)`` lays ``fig`` out on an Agg canvas exactly as drawing it does (without
rasterising: the extents are the same, in a third less time) and fails, naming every offender, when

- a drawn text (titles, labels, tick labels, legend entries, annotations) reaches outside the
  figure, or is clipped by the box it is drawn in;
- a legend holds more than ``max_legend_entries`` entries (group them: families, styles);
- a visible axes is narrower than ``min_axes_width`` of the figure (colorbars excepted);
- the drawn tick labels of one axis overlap each other, or titles, axis labels and legend
  texts overlap (labels beside data points may touch);
- a log-scaled axis shows fewer than ``min_log_ticks`` labelled ticks, or an axis labelled
  "log scale" is not.

Only what is drawn counts: artists in hidden axes, empty texts and tick labels outside the view
are left out. ``problems(fig)`` returns the same findings as strings.

    from tests.audit.report.layout_check import assert_readable
    assert_readable(fig, max_legend_entries=8)
"""

from __future__ import annotations

from collections.abc import Iterator

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

MAX_LEGEND_ENTRIES = 8
MIN_AXES_WIDTH = 1 / 3
#: Pixels a text may pass the figure's edge by (antialiasing, rounding).
TOLERANCE_PX = 2.0
MIN_LOG_TICKS = 2
#: Dots per inch of the check's layout: small; the layout is in inches and points, so the same.
CHECK_DPI = 40


def _drawn(artist: Artist) -> Iterator[Artist]:
    """``artist`` and its descendants that are drawn: visible all the way up; of an axis, only
    its label, offset text and the ticks inside the view."""
    if not artist.get_visible():
        return
    yield artist
    if isinstance(artist, Axis):
        yield from (t for t in (artist.label, artist.offsetText) if t.get_visible())
        for tick in artist._update_ticks():  # the ticks the axis draws (inside the view)
            if tick.get_visible():
                yield from (t for t in (tick.label1, tick.label2) if t.get_visible())
        return
    for child in artist.get_children():
        yield from _drawn(child)


def _shown(text: Text, renderer) -> bool:
    if not text.get_text().strip():
        return False
    return not (isinstance(text, Annotation) and not text._check_xy(renderer))


def _name(text: Text) -> str:
    words = " ".join(text.get_text().split())
    return repr(words if len(words) <= 60 else words[:57] + "...")


def _outside(box: Bbox, frame: Bbox, tol: float) -> bool:
    return (
        box.x0 < frame.x0 - tol
        or box.y0 < frame.y0 - tol
        or box.x1 > frame.x1 + tol
        or box.y1 > frame.y1 + tol
    )


def _tick_labels(axis: Axis, renderer) -> list[tuple[Text, Bbox]]:
    labels = []
    for tick in axis._update_ticks():
        for text in (tick.label1, tick.label2):
            if tick.get_visible() and text.get_visible() and _shown(text, renderer):
                labels.append((text, text.get_window_extent(renderer)))
    return labels


def _axis_problems(ax: Axes, renderer, min_log_ticks: int) -> list[str]:
    found = []
    title = ax.get_title() or ax.get_label() or "an axes"
    for axis, which in ((ax.xaxis, "x"), (ax.yaxis, "y")):
        labels = _tick_labels(axis, renderer)
        boxes = sorted((b for _, b in labels), key=lambda b: (b.x0, b.y0))
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                overlap_w = min(a.x1, b.x1) - max(a.x0, b.x0)
                overlap_h = min(a.y1, b.y1) - max(a.y0, b.y0)
                if overlap_w > 1 and overlap_h > 1:
                    found.append(f"{which} tick labels overlap in {title!r}")
                    break
            else:
                continue
            break
        if "log scale" in axis.label.get_text() and axis.get_scale() != "log":
            found.append(f"{which} axis of {title!r} says 'log scale' but is {axis.get_scale()}")
        if axis.get_scale() == "log" and len(labels) < min_log_ticks:
            shown = [t.get_text() for t, _ in labels]
            found.append(
                f"log {which} axis of {title!r} shows {len(labels)} labelled tick(s) {shown}, "
                f"fewer than {min_log_ticks}"
            )
    return found


def problems(
    fig: Figure,
    *,
    max_legend_entries: int = MAX_LEGEND_ENTRIES,
    min_axes_width: float = MIN_AXES_WIDTH,
    min_log_ticks: int = MIN_LOG_TICKS,
    tolerance_px: float = TOLERANCE_PX,
    dpi: float | None = CHECK_DPI,
) -> list[str]:
    """What makes ``fig`` unreadable (see the module's docstring); empty when nothing does.
    Lays the figure out (at ``dpi`` where given) as drawing it would."""
    if dpi is not None:
        fig.set_dpi(dpi)
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    renderer = canvas.get_renderer()
    frame = fig.bbox
    found: list[str] = []
    labels: list[tuple[Text, Bbox]] = []  # titles, axis and legend texts: not data labels
    ticks = {  # tick labels: checked per axis, not against every other text
        id(label)
        for ax in fig.get_axes()
        for axis in (ax.xaxis, ax.yaxis)
        for tick in (*axis.majorTicks, *axis.minorTicks)
        for label in (tick.label1, tick.label2)
    }
    for artist in _drawn(fig):
        if isinstance(artist, Text) and _shown(artist, renderer):
            box = artist.get_window_extent(renderer)
            if not isinstance(artist, Annotation) and id(artist) not in ticks:
                labels.append((artist, box))
            if _outside(box, frame, tolerance_px):
                found.append(
                    f"text {_name(artist)} leaves the figure: extent "
                    f"({box.x0:.0f}, {box.y0:.0f})-({box.x1:.0f}, {box.y1:.0f}) px, figure "
                    f"{frame.width:.0f} x {frame.height:.0f} px"
                )
            clip = artist.get_clip_box() if artist.get_clip_on() else None
            if clip is not None and _outside(box, clip, tolerance_px):
                found.append(f"text {_name(artist)} is clipped by its box")
        elif isinstance(artist, Legend):
            entries = len([t for t in artist.get_texts() if t.get_text().strip()])
            if entries > max_legend_entries:
                found.append(
                    f"a legend has {entries} entries, more than {max_legend_entries}: "
                    f"{[t.get_text() for t in artist.get_texts()][:4]} ..."
                )
        elif isinstance(artist, Axes) and artist.get_label() != "<colorbar>":
            width = artist.get_window_extent(renderer).width / frame.width
            if width < min_axes_width:
                found.append(
                    f"axes {artist.get_title() or artist.get_label()!r} is {width:.2f} of the "
                    f"figure's width, less than {min_axes_width:.2f}"
                )
            found += _axis_problems(artist, renderer, min_log_ticks)
    found += _overlaps(labels)
    return found


def _overlaps(labels: list[tuple[Text, Bbox]]) -> list[str]:
    """Titles, axis labels and legend texts printed over each other (tick labels are checked
    per axis; data labels beside points may touch)."""
    found = []
    for i, (a, box_a) in enumerate(labels):
        for b, box_b in labels[i + 1 :]:
            overlap_w = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            overlap_h = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if overlap_w > 1 and overlap_h > 1:
                found.append(f"texts {_name(a)} and {_name(b)} overlap")
    return found


def assert_readable(fig: Figure, **limits) -> None:
    """Fail with every finding of :func:`problems` (same keyword arguments) at once."""
    found = problems(fig, **limits)
    assert not found, "figure is not readable:\n- " + "\n- ".join(found)
