"""Small SVG charts for the HTML report: heatmap, line chart, dot plot and bars (the topology graph is in
``lab.report.svg_topology``).

Every helper returns one ``<svg>`` element as a string: viewBox-based (it
scales with its container), with its own fonts and colours as attributes (so
it also renders on its own), a ``<title>`` for accessibility, every text
escaped, and the same output for the same input (coordinates are rounded).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif"
INK = "#1f2933"
MUTED = "#61707f"
GRID = "#e3e8ee"
PALETTE = ("#2563eb", "#d97706", "#059669", "#7c3aed", "#dc2626", "#0891b2", "#65a30d", "#db2777")


def coord(v: float) -> str:
    """A coordinate: at most 1 decimal, no trailing zeros."""
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


def fmt_num(v: float | int | None) -> str:
    """A compact label for a value (1234567 -> 1.23M)."""
    if v is None:
        return "–"
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:.3g}G"
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e4:
        return f"{v / 1e3:.3g}k"
    if float(v).is_integer():
        return str(int(v))
    return f"{v:.3g}" if a < 100 else f"{v:.0f}"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About n round tick values covering [lo, hi]."""
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        hi = lo + (abs(lo) or 1)
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = [round(start, 10)]
    while ticks[-1] < hi - step * 1e-9:
        ticks.append(round(start + len(ticks) * step, 10))
    return ticks


def svg_doc(width: float, height: float, title: str, body: list[str], cls: str = "") -> str:
    c = f' class="{escape(cls)}"' if cls else ""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg"{c} viewBox="0 0 {coord(width)} {coord(height)}" '
        f'width="{coord(width)}" height="{coord(height)}" role="img" aria-label="{escape(title)}" '
        f'font-family="{FONT}" font-size="11" fill="{INK}">'
        f"<title>{escape(title)}</title>" + "".join(body) + "</svg>"
    )


def text_at(x: float, y: float, s: object, anchor: str = "start", size: float | None = None, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{escape(str(v))}"' for k, v in attrs.items())
    sz = f' font-size="{coord(size)}"' if size else ""
    return f'<text x="{coord(x)}" y="{coord(y)}" text-anchor="{anchor}"{sz}{extra}>{escape(str(s))}</text>'


def mix(c1: str, c2: str, t: float) -> str:
    """Linear blend of two #rrggbb colours (t=0: c1, t=1: c2)."""
    t = min(1.0, max(0.0, t))
    a = [int(c1[i : i + 2], 16) for i in (1, 3, 5)]
    b = [int(c2[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def heatmap(
    matrix: Sequence[Sequence[float]],
    labels: Sequence[str],
    title: str = "",
    color: str = "#1d4ed8",
    row_axis: str = "from (src_nid)",
    col_axis: str = "to (dst_nid)",
    cell: int = 40,
) -> str:
    """A src→dst matrix: rows are sources, columns destinations, with row and column totals."""
    n = len(matrix)
    left, top = 46, 54 if title else 34
    total_w = 48
    width = left + n * cell + total_w + 8
    height = top + n * cell + 28 + 18
    vmax = max((v for row in matrix for v in row), default=0)
    body = []
    if title:
        body.append(text_at(left, 16, title, size=13, font_weight="600"))
    body.append(text_at(left + n * cell / 2, top - 22, col_axis, "middle", fill=MUTED))
    body.append(
        f'<text transform="translate(14 {coord(top + n * cell / 2)}) rotate(-90)" text-anchor="middle" '
        f'fill="{MUTED}">{escape(row_axis)}</text>'
    )
    for j, lab in enumerate(labels):
        body.append(text_at(left + j * cell + cell / 2, top - 4, lab, "middle", font_weight="600"))
    for i, row in enumerate(matrix):
        y = top + i * cell
        body.append(text_at(left - 6, y + cell / 2 + 4, labels[i], "end", font_weight="600"))
        for j, v in enumerate(row):
            x = left + j * cell
            t = (v / vmax) if vmax else 0
            fill = "#f5f7fa" if v == 0 else mix("#eef3fd", color, 0.15 + 0.85 * t)
            stroke = ' stroke="#9aa5b1" stroke-dasharray="3 2"' if i == j else ' stroke="#ffffff"'
            body.append(
                f'<rect x="{coord(x)}" y="{coord(y)}" width="{cell}" height="{cell}" fill="{fill}"{stroke}>'
                f"<title>{escape(f'{labels[i]} → {labels[j]}: {v:g}')}</title></rect>"
            )
            ink = "#ffffff" if t > 0.55 else (MUTED if v == 0 else INK)
            body.append(text_at(x + cell / 2, y + cell / 2 + 4, fmt_num(v), "middle", fill=ink))
        body.append(text_at(left + n * cell + 8, y + cell / 2 + 4, fmt_num(sum(row)), fill=MUTED))
    body.append(text_at(left + n * cell + 8, top - 4, "Σ", fill=MUTED))
    yt = top + n * cell + 16
    body.append(text_at(left - 6, yt, "Σ", "end", fill=MUTED))
    for j in range(n):
        body.append(text_at(left + j * cell + cell / 2, yt, fmt_num(sum(r[j] for r in matrix)), "middle", fill=MUTED))
    body.append(text_at(left + n * cell + 8, yt, fmt_num(sum(sum(r) for r in matrix)), fill=INK, font_weight="600"))
    return svg_doc(width, height, title or "heatmap", body, "chart heatmap")


@dataclass(frozen=True)
class _PlotArea:
    """A line chart's plot area in pixels (from ``left``, ``top``) and the values it spans: x0..x1 across, 0..y1 up."""

    left: int
    top: int
    width: int
    height: int
    x0: float
    x1: float
    y1: float

    def px(self, v: float) -> float:
        """The pixel column of x value ``v``."""
        return self.left + (v - self.x0) / (self.x1 - self.x0) * self.width

    def py(self, v: float) -> float:
        """The pixel row of y value ``v`` (the bottom edge when y1 is 0)."""
        return self.top + self.height - (v / self.y1) * self.height if self.y1 else self.top + self.height


def _x_extent(xs: Sequence[float], x_range: tuple[float, float] | None) -> tuple[float, float]:
    """The x axis' ends: the values' (0..1 without any), widened to ``x_range``, and never the same."""
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x_range is not None:
        x0, x1 = min(x_range[0], x0), max(x_range[1], x1)
    if x1 == x0:
        x1 = x0 + 1
    return x0, x1


def _line_axes(area: _PlotArea, y_ticks: Sequence[float], x_ticks: Sequence[float]) -> list[str]:
    """The horizontal grid lines with the y ticks' labels, the x ticks with theirs, and the x axis line."""
    left, top, pw, ph = area.left, area.top, area.width, area.height
    body = []
    for v in y_ticks:
        y = coord(area.py(v))
        body.append(f'<line x1="{left}" x2="{left + pw}" y1="{y}" y2="{y}" stroke="{GRID}"/>')
        body.append(text_at(left - 5, area.py(v) + 4, fmt_num(v), "end", fill=MUTED))
    for v in x_ticks:
        x = coord(area.px(v))
        body.append(f'<line x1="{x}" x2="{x}" y1="{top + ph}" y2="{top + ph + 4}" stroke="{MUTED}"/>')
        body.append(text_at(area.px(v), top + ph + 15, fmt_num(v), "middle", fill=MUTED))
    body.append(f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}" stroke="{MUTED}"/>')
    return body


def _mark_lines(area: _PlotArea, marks: Sequence[tuple[float, str]]) -> list[str]:
    """A dashed vertical line, labelled, for each mark inside the x axis."""
    body = []
    for mx, label in marks:
        if area.x0 <= mx <= area.x1:
            x = coord(area.px(mx))
            body.append(
                f'<line x1="{x}" x2="{x}" y1="{area.top}" y2="{area.top + area.height}" stroke="{MUTED}" '
                f'stroke-dasharray="4 3"/>'
            )
            body.append(text_at(area.px(mx) - 3, area.top + 10, label, "end", size=10, fill=MUTED))
    return body


def _series_color(name: str, k: int, colors: dict[str, str]) -> str:
    """The colour of the k-th series: its own in ``colors``, else the palette's k-th."""
    return colors.get(name, PALETTE[k % len(PALETTE)])


def _legend(names: Sequence[str], colors: dict[str, str], right_edge: float) -> list[str]:
    """A swatch and the name of each series, in a row that ends at ``right_edge`` (drawn last one first)."""
    body = []
    lx = right_edge
    for k, name in reversed(list(enumerate(names))):
        w = 9 + 6.2 * len(name)
        lx -= w + 14
        ly = 15
        c = _series_color(name, k, colors)
        body.append(f'<rect x="{coord(lx)}" y="{ly - 8}" width="10" height="10" rx="2" fill="{c}"/>')
        body.append(text_at(lx + 14, ly + 1, name, fill=INK))
    return body


def _pixel_runs(area: _PlotArea, xs: Sequence[float], vals: Sequence[float | None]) -> list[list[tuple[float, float]]]:
    """A series' points in pixels, split into runs at each None."""
    runs: list[list[tuple[float, float]]] = [[]]
    for xv, yv in zip(xs, vals):
        if yv is None:
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((area.px(xv), area.py(yv)))
    return runs


def _series_path(runs: Sequence[Sequence[tuple[float, float]]], color: str, dots: bool) -> list[str]:
    """A polyline per run of two points or more, and a dot per point of a lone point or, if ``dots``, of every run."""
    body = []
    for pts in runs:
        if len(pts) > 1:
            d = " ".join(f"{coord(a)},{coord(b)}" for a, b in pts)
            body.append(
                f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="1.8" stroke-linejoin="round"/>'
            )
        if len(pts) == 1 or dots:
            for a, b in pts:
                body.append(f'<circle cx="{coord(a)}" cy="{coord(b)}" r="2.2" fill="{color}"/>')
    return body


@dataclass(frozen=True)
class Axes:
    """A line chart's axes: their labels, the y axis's top (None: the data's), the x axis's span (None: the
    data's; fixed, it lines up several charts) and labelled vertical lines across the plot (x, label)."""

    x_label: str = ""
    y_label: str = ""
    y_max: float | None = None
    x_range: tuple[float, float] | None = None
    marks: Sequence[tuple[float, str]] = ()


def line_chart(
    x: Sequence[float],
    series: dict[str, Sequence[float | None]],
    title: str = "",
    colors: dict[str, str] | None = None,
    axes: Axes = Axes(),
    width: int = 520,
    height: int = 210,
) -> str:
    """Lines over a shared x axis; None leaves a gap. The legend names each series; ``axes`` labels, bounds
    and marks the axes."""
    colors = colors or {}
    x_label, y_label, y_max, x_range, marks = axes.x_label, axes.y_label, axes.y_max, axes.x_range, axes.marks
    left, right, top, bottom = 52, 12, 30 if title else 22, 34
    xs = list(x)
    ys = [v for s in series.values() for v in s if v is not None]
    x0, x1 = _x_extent(xs, x_range)
    ytop = y_max if y_max is not None else max(ys, default=0)
    yt = nice_ticks(0, ytop or 1, 4)
    xt = [v for v in nice_ticks(x0, x1, 6) if x0 <= v <= x1]
    area = _PlotArea(left, top, width - left - right, height - top - bottom, x0, x1, yt[-1])
    pw, ph = area.width, area.height
    body = [text_at(left, 15, title, size=13, font_weight="600")] if title else []
    body += _line_axes(area, yt, xt)
    body += _mark_lines(area, marks)
    if x_label:
        body.append(text_at(left + pw, height - 3, x_label, "end", fill=MUTED))
    if y_label:
        body.append(text_at(4, top - 8 if not title else top - 6, y_label, fill=MUTED))
    body += _legend(list(series), colors, left + pw)
    if not ys or not any(ys):
        body.append(text_at(left + pw / 2, top + ph / 2, "no data" if not ys else "all zero", "middle", fill=MUTED))
    for k, (name, vals) in enumerate(series.items()):
        body += _series_path(_pixel_runs(area, xs, vals), _series_color(name, k, colors), dots=len(xs) <= 40)
    return svg_doc(width, height, title or "line chart", body, "chart line")


def dot_plot(
    groups: Sequence[tuple[str, Sequence[float], str]],
    title: str = "",
    unit: str = "",
    note: str = "",
    width: int = 360,
    harmonic: bool = False,
) -> str:
    """One row per group: a dot per run and a bar at the mean (labelled). groups: (label, values, colour).

    ``harmonic`` uses the harmonic mean (as mmtests' Hmean for higher-is-better metrics) when every value is > 0.
    """
    label_w = min(190, 16 + 6.2 * max((len(lab) for lab, _, _ in groups), default=4))
    right, top, row_h = 16, 34 if title else 14, 30
    height = top + row_h * len(groups) + 30 + (14 if note else 0)
    pw = width - label_w - right
    vals = [v for _, vs, _ in groups for v in vs]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
    if hi == lo:
        pad = abs(hi) * 0.1 or 1
        lo, hi = lo - pad, hi + pad
    ticks = nice_ticks(lo, hi, 4)
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])

    def px(v: float) -> float:
        return label_w + (v - lo) / (hi - lo) * pw

    body = []
    if title:
        body.append(text_at(8, 15, title, size=12.5, font_weight="600"))
    axis_y = top + row_h * len(groups) + 4
    for t in ticks:
        body.append(f'<line x1="{coord(px(t))}" x2="{coord(px(t))}" y1="{top - 4}" y2="{axis_y}" stroke="{GRID}"/>')
        body.append(text_at(px(t), axis_y + 13, fmt_num(t), "middle", fill=MUTED))
    if unit:
        body.append(text_at(width - right, axis_y + 26, unit, "end", fill=MUTED))
    for i, (label, vs, color) in enumerate(groups):
        cy = top + row_h * i + row_h / 2
        body.append(text_at(label_w - 8, cy + 4, label[:28], "end"))
        for v in vs:
            body.append(
                f'<circle cx="{coord(px(v))}" cy="{coord(cy)}" r="4.5" fill="{color}" fill-opacity="0.55" '
                f'stroke="{color}"><title>{escape(f"{label}: {v:g}")}</title></circle>'
            )
        if vs:
            hm = harmonic and all(v > 0 for v in vs)
            m = statistics.harmonic_mean(vs) if hm else statistics.fmean(vs)
            body.append(
                f'<line x1="{coord(px(m))}" x2="{coord(px(m))}" y1="{coord(cy - 10)}" y2="{coord(cy + 10)}" '
                f'stroke="{INK}" stroke-width="2"/>'
            )
            mx = min(max(px(m), label_w + 24), width - right - 24)
            mean = f"{'Hmean' if hm else 'mean'} {fmt_num(m)}"
            body.append(text_at(mx, cy - 12, mean, "middle", size=9.5, fill=MUTED))
        else:
            body.append(text_at(label_w + 4, cy + 4, "no value", fill=MUTED))
    if note:
        body.append(text_at(8, height - 4, note, size=10, fill=MUTED))
    return svg_doc(width, height, title or "dot plot", body, "chart dots")


def bar_chart(items: Sequence[tuple[str, float, str]], title: str = "", width: int = 360) -> str:
    """Horizontal bars with their values. items: (label, value, colour)."""
    label_w = min(280, 16 + 6.2 * max((len(lab) for lab, _, _ in items), default=4))
    right, top, row_h = 56, 26 if title else 6, 22
    height = top + row_h * len(items) + 6
    pw = width - label_w - right
    vmax = max((v for _, v, _ in items), default=0) or 1
    body = []
    if title:
        body.append(text_at(8, 15, title, size=12.5, font_weight="600"))
    for i, (label, v, color) in enumerate(items):
        y = top + i * row_h
        body.append(text_at(label_w - 8, y + row_h / 2 + 4, label, "end"))
        w = max(1.0, v / vmax * pw) if v else 0
        body.append(
            f'<rect x="{coord(label_w)}" y="{coord(y + 4)}" width="{coord(w)}" height="{row_h - 8}" rx="2" '
            f'fill="{color}"/>'
        )
        body.append(text_at(label_w + w + 5, y + row_h / 2 + 4, fmt_num(v), fill=INK))
    return svg_doc(width, height, title or "bar chart", body, "chart bars")
