"""Charts drawn with matplotlib from the data they keep: bar (vertical or horizontal), grouped and stacked
bar, line, pie and scatter, in varied styles, fonts, legend places, axis scales and label rotations.

Every text matplotlib draws (title, axis labels, ticks, legend entries, value labels) is an OCR line with
the pixel box matplotlib drew it in, and every mark (bar, stacked segment, point, wedge) is kept with its
series, category, value, colour and pixel box. A draw whose texts overlap or leave the canvas is thrown
away and drawn again with the next choices from the same random stream, so a seed always gives the same
chart and no kept text is hidden.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

import matplotlib
import matplotlib.style
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullLocator
from matplotlib.transforms import Bbox
from PIL import Image

from ingest.textrich import page_data, px_box, row_of

WIDTH, HEIGHT, DPI = 640, 480, 100
CHARTS = ("bar", "grouped_bar", "stacked_bar", "line", "pie", "scatter")
STYLES = ("default", "ggplot", "bmh", "seaborn-v0_8-whitegrid", "seaborn-v0_8-pastel", "Solarize_Light2")
FONTS = ("DejaVu Sans", "DejaVu Serif", "DejaVu Sans Mono")
ROTATIONS = (0, 0, 30, 45, 90)  # of a vertical chart's category labels
LEGEND_PLACES = ("right", "above")  # never inside, where it would cover marks
ATTEMPTS = 30


@dataclass(frozen=True)
class Spec:
    """What one chart shows and how it looks: everything a draw needs, drawn from the random stream."""

    chart: str
    title: str
    axis: str
    categories: tuple[str, ...]
    series: tuple[tuple[str, tuple[int, ...]], ...]  # (name, one value per category)
    style: str
    font: str
    font_size: int
    rotation: int
    horizontal: bool
    log_scale: bool
    value_labels: bool
    legend: str


def _percentages(rng: random.Random, n: int) -> list[int]:
    """n distinct whole percentages of at least 6 that sum to 100."""
    while True:
        cuts = sorted(rng.sample(range(6, 100 - 6), n - 1))
        parts = [b - a for a, b in zip([0, *cuts], [*cuts, 100])]
        if min(parts) >= 6 and len(set(parts)) == n:
            return parts


def draw_spec(rng: random.Random) -> Spec:
    data = page_data()
    chart = rng.choice(CHARTS)
    theme = rng.choice(data["themes"])
    low, high = theme["values"]
    if chart == "line":
        period = rng.choice(data["periods"])
        start = rng.randint(0, len(period) - 5)
        categories = period[start:start + rng.randint(5, len(period) - start)]
    else:
        n = {"bar": rng.randint(4, 7), "pie": rng.randint(4, 6), "scatter": rng.randint(5, 7)}.get(chart, rng.randint(4, 5))
        categories = rng.sample(theme["categories"], n)
    n_series = {"grouped_bar": rng.randint(2, 3), "stacked_bar": rng.randint(2, 3), "line": rng.randint(1, 3),
                "scatter": 2}.get(chart, 1)
    names = rng.sample(list(theme["series"]), n_series)
    log_scale = chart in ("bar", "line") and rng.random() < 0.2
    if chart == "pie":
        series = ((theme["axis"], tuple(_percentages(rng, len(categories)))),)
    elif log_scale:  # spans two or three decades, so the scale matters
        values = sorted(rng.sample(range(2, 3000), 60))
        series = tuple((name, tuple(rng.sample(values, len(categories)))) for name in names)
    else:
        pool = rng.sample(range(low, high + 1), len(categories) * n_series)  # every value once: no ties to compare
        series = tuple((name, tuple(pool[i * len(categories):(i + 1) * len(categories)])) for i, name in enumerate(names))
    title = theme["title"] if chart != "scatter" else f"{names[0]} and {names[1]}"
    return Spec(chart=chart, title=title, axis=theme["axis"], categories=tuple(categories), series=series,
                style=rng.choice(STYLES), font=rng.choice(FONTS), font_size=rng.randint(11, 13),
                rotation=rng.choice(ROTATIONS), horizontal=chart in ("bar", "grouped_bar") and rng.random() < 0.3,
                log_scale=log_scale, value_labels=chart in ("bar", "grouped_bar", "stacked_bar", "line")
                and rng.random() < 0.6, legend=rng.choice(LEGEND_PLACES))


@lru_cache(maxsize=1)
def _canvas():
    """This process's one figure, cleared for every chart: its renderer, and the text sizes matplotlib
    caches per renderer, are reused."""
    fig = Figure(figsize=(WIDTH / DPI, HEIGHT / DPI), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _figure(spec: Spec):
    """The figure and axes laid out (not yet drawn), its marks [(role, series, category, value, patch or data point, colour)]
    and its texts [(role, matplotlib text)]."""
    fig = _canvas()
    for old in fig.axes:
        fig.delaxes(old)  # not clf(), which first clears the old axes: a tenth of a chart's time
    fig.set_facecolor(matplotlib.rcParams["figure.facecolor"])  # the style's, as a new figure would take it
    fig.set_edgecolor(matplotlib.rcParams["figure.edgecolor"])
    ax = fig.add_subplot()
    marks, texts = [], []
    cats, n = spec.categories, len(spec.categories)
    labels_at = np.arange(n)
    legend_needed = len(spec.series) > 1 and spec.chart != "scatter"
    if spec.chart == "pie":
        values = spec.series[0][1]
        wedges, outer, inner = ax.pie(values, labels=cats, autopct=lambda p: f"{round(p)}%", startangle=90,
                                      counterclock=False, textprops={"fontsize": spec.font_size})
        ax.set_aspect("equal")
        marks += [("wedge", spec.series[0][0], c, v, w, to_hex(w.get_facecolor())) for c, v, w in zip(cats, values, wedges)]
        texts += [("category", t) for t in outer] + [("value_label", t) for t in inner]
    elif spec.chart == "scatter":
        (xname, xs), (yname, ys) = spec.series
        dots = ax.scatter(xs, ys, s=60)
        for c, x, y in zip(cats, xs, ys):
            marks.append(("point", yname, c, y, (x, y), to_hex(dots.get_facecolor()[0])))
            texts.append(("point_label", ax.annotate(c, (x, y), textcoords="offset points", xytext=(0, 7),
                                                      ha="center", fontsize=spec.font_size - 1)))
        ax.set_xlabel(xname), ax.set_ylabel(yname)
        texts += [("x_axis", ax.xaxis.label), ("y_axis", ax.yaxis.label)]
        ax.margins(0.15)
    else:
        width = 0.8 / len(spec.series) if spec.chart == "grouped_bar" else 0.7
        bottom = np.zeros(n)
        for i, (name, values) in enumerate(spec.series):
            if spec.chart == "line":
                line, = ax.plot(labels_at, values, marker="o", label=name, linewidth=2)
                marks += [("point", name, c, v, (x, v), to_hex(line.get_color())) for x, c, v in zip(labels_at, cats, values)]
                if spec.value_labels and len(spec.series) == 1:
                    texts += [("value_label", ax.annotate(str(v), (x, v), textcoords="offset points", xytext=(0, 8),
                                                          ha="center", fontsize=spec.font_size - 1))
                              for x, v in zip(labels_at, values)]
                continue
            at = labels_at + (i - (len(spec.series) - 1) / 2) * width if spec.chart == "grouped_bar" else labels_at
            kwargs = {"left" if spec.horizontal else "bottom": bottom} if spec.chart == "stacked_bar" else {}
            bars = (ax.barh if spec.horizontal else ax.bar)(at, values, width, label=name, **kwargs)
            role = "segment" if spec.chart == "stacked_bar" else "bar"
            marks += [(role, name, c, v, b, to_hex(b.get_facecolor())) for c, v, b in zip(cats, values, bars)]
            if spec.value_labels:
                placed = ax.bar_label(bars, labels=[str(v) for v in values], padding=2, fontsize=spec.font_size - 1,
                                      label_type="center" if spec.chart == "stacked_bar" else "edge")
                texts += [("value_label", t) for t in placed]
            if spec.chart == "stacked_bar":
                bottom = bottom + np.array(values)
        category_axis, value_axis = (ax.yaxis, ax.xaxis) if spec.horizontal else (ax.xaxis, ax.yaxis)
        category_axis.set_ticks(labels_at, labels=cats)
        if not spec.horizontal:
            ax.tick_params(axis="x", labelrotation=spec.rotation)
        else:
            ax.invert_yaxis()  # the first category on top, as it is read
        top = max((bottom if spec.chart == "stacked_bar" else np.array([v for _n, vs in spec.series for v in vs])))
        if spec.log_scale:  # a tick at each power of ten up to the top value's (a log chart is never stacked)
            ticks = [10 ** k for k in range(len(str(top)) + 1)]
            (ax.set_xscale if spec.horizontal else ax.set_yscale)("log")
            (ax.set_xlim if spec.horizontal else ax.set_ylim)(1, ticks[-1] * 1.5)
        else:
            limit = top * 1.18
            ticks = [int(t) for t in MaxNLocator(5, integer=True).tick_values(0, limit) if 0 <= t <= limit]
            (ax.set_xlim if spec.horizontal else ax.set_ylim)(0, limit)
        value_axis.set_ticks(ticks, labels=[str(t) for t in ticks])
        value_axis.set_minor_locator(NullLocator())
        value_axis.set_label_text(spec.axis)
        texts += [("value_axis", value_axis.label)]
        texts += [("category", t) for t in category_axis.get_ticklabels()]
        texts += [("tick", t) for t in value_axis.get_ticklabels()]
    above = legend_needed and spec.legend == "above"
    # a title placed by hand (y) is not moved by matplotlib, which would set it over a legend above the axes
    # (at 1.0 otherwise, where matplotlib would put it after measuring every tick label)
    texts.append(("title", ax.set_title(spec.title, fontsize=spec.font_size + 3, pad=8, y=1.13 if above else 1.0)))
    if legend_needed:
        where = {"right": {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)},
                 "above": {"loc": "lower center", "bbox_to_anchor": (0.5, 1.0), "ncol": len(spec.series)}}[spec.legend]
        legend = ax.legend(fontsize=spec.font_size - 1, frameon=True, **where)
        texts += [("legend", t) for t in legend.get_texts()]
    fig.subplots_adjust(left=0.24 if spec.horizontal else 0.13, bottom=0.27 if spec.rotation else 0.14,
                        right=0.74 if legend_needed and spec.legend == "right" else 0.95,
                        top=0.78 if above else 0.88)
    ax.viewLim  # reading it settles the autoscaled limits: points are placed before the draw
    return fig, ax, marks, texts


def _overlap(a, b) -> bool:
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def _apart(boxes) -> bool:
    return not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def _mark_box(ax, target) -> list[float]:
    """A mark's pixel box: a bar's or wedge's own extent within the axes (a bar from 0 on a log axis
    reaches far below them); for a point (x, y in data), the marker's centre square, which its line or
    its neighbours' labels never cover."""
    if isinstance(target, tuple):
        x, y = ax.transData.transform(target)
        box = [x - 2, HEIGHT - y - 2, x + 2, HEIGHT - y + 2]
    else:
        box = px_box(Bbox.intersection(target.get_window_extent(), ax.get_window_extent()), HEIGHT)
    return [round(v, 1) for v in box]


def render(rng: random.Random) -> tuple[Image.Image, dict]:
    """A chart and its manifest row (captions, OCR lines with pixel boxes, truth)."""
    for _attempt in range(ATTEMPTS):
        spec = draw_spec(rng)
        with matplotlib.style.context(spec.style), matplotlib.rc_context({"font.family": spec.font,
                                                                           "font.size": spec.font_size}):
            fig, ax, marks, texts = _figure(spec)
            # points are placed before the draw: one marker on another is thrown away undrawn
            if not _apart([[x1 - 4, y1 - 4, x2 + 4, y2 + 4] for role, *_m, target, _c in marks if role == "point"
                           for x1, y1, x2, y2 in [_mark_box(ax, target)]]):
                continue
            fig.canvas.draw()
            drawn = [{"role": role, "text": t.get_text(), "box_px": px_box(t.get_window_extent(), HEIGHT)}
                     for role, t in texts if t.get_visible() and t.get_text().strip()]
            # every text inside the canvas and apart from the others
            if all(0 <= b[0] and 0 <= b[1] and b[2] <= WIDTH and b[3] <= HEIGHT for b in (t["box_px"] for t in drawn)) \
                    and _apart([t["box_px"] for t in drawn]):
                break
    else:
        raise RuntimeError("no chart laid out without overlapping text")  # never met with the shipped themes
    drawn_marks = [{"role": role, "series": series, "category": category, "value": value,
                    "box_px": _mark_box(ax, target), "colour": colour}
                   for role, series, category, value, target, colour in marks]
    image = Image.fromarray(np.asarray(fig.canvas.buffer_rgba())).convert("RGB")  # a copy, as the figure is reused
    truth = {"kind": "chart", "chart": spec.chart, "title": spec.title,
             "axis": spec.axis if spec.chart not in ("pie", "scatter") else "",
             "categories": list(spec.categories),
             "series": [{"name": name, "values": list(values)} for name, values in spec.series],
             "legend": [t["text"] for t in drawn if t["role"] == "legend"],
             "scale": "log" if spec.log_scale else "linear", "value_labels": any(t["role"] == "value_label" for t in drawn),
             "orientation": "horizontal" if spec.horizontal else "vertical",
             "style": spec.style, "font": spec.font, "rotation": spec.rotation if not spec.horizontal else 0,
             "marks": drawn_marks}
    kind_words = "scatter plot" if spec.chart == "scatter" else spec.chart.replace("_", " ") + " chart"
    # what it measures, for what and over what: a chart over years names few things otherwise (the years
    # are no nouns), and the richness filter would exclude it
    measured = f" of {truth['axis']}" if truth["axis"] else ""
    named = f" for {' and '.join(name for name, _values in spec.series)}" if spec.chart not in ("pie", "scatter") else ""
    over = (f"one point per year over the years {', '.join(spec.categories)}"
            if all(c.isdigit() for c in spec.categories) else ', '.join(spec.categories))
    caption = f"A {kind_words} titled \"{spec.title}\"{measured}{named}, over {over}."
    return image, row_of(caption, drawn, truth)
