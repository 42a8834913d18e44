"""The SVG charts of "who, where, when" (issue 37): a task x time strip coloured by node with the NUMA decisions
marked on it, and a line chart of medians with the runs' spread as a band (A and B on one chart).

Same conventions as :mod:`lab.report.svg`: one ``<svg>`` string, viewBox-based, every text escaped, coordinates
rounded (the same input gives the same output).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from lab.report.svg import (
    INK,
    MUTED,
    _line_axes,
    _mark_lines,
    _pixel_runs,
    _PlotArea,
    _series_path,
    _x_extent,
    coord,
    nice_ticks,
    svg_doc,
    text_at,
)

MARK_SHAPES = {"move": "triangle", "swap": "diamond", "stick": "cross"}


def _mark(x: float, y: float, kind: str, color: str, tip: str) -> str:
    t = f"<title>{tip}</title>"  # (already escaped by the caller)
    if kind == "move":
        pts = f"{coord(x)},{coord(y - 4)} {coord(x - 3.5)},{coord(y + 3)} {coord(x + 3.5)},{coord(y + 3)}"
        return f'<polygon class="mark-move" points="{pts}" fill="{color}" stroke="#fff" stroke-width=".6">{t}</polygon>'
    if kind == "swap":
        pts = f"{coord(x)},{coord(y - 4)} {coord(x + 4)},{coord(y)} {coord(x)},{coord(y + 4)} {coord(x - 4)},{coord(y)}"
        return f'<polygon class="mark-swap" points="{pts}" fill="{color}" stroke="#fff" stroke-width=".6">{t}</polygon>'
    a, b, c, d = coord(x - 3), coord(x + 3), coord(y - 3), coord(y + 3)
    d = f"M{a},{c}L{b},{d}M{a},{d}L{b},{c}"
    return f'<path class="mark-stick" d="{d}" stroke="{color}" stroke-width="1.6">{t}</path>'


def task_strip(
    tasks: Sequence[dict],
    n_nodes: int,
    x_max: float,
    node_colors: Sequence[str],
    mark_colors: dict[str, str],
    title: str = "",
    width: int = 760,
    marks: Sequence[tuple[float, str]] = (),
) -> str:
    """One row per task (``label``, ``segments`` [[t0, t1, node], ...], ``marks`` [[t, kind, src, dst], ...]):
    where it was, coloured by node, with each NUMA decision about it marked (move, swap, stick)."""
    row_h, label_w, right = 14, 120, 12
    top = 40 if title else 26
    height = top + row_h * max(1, len(tasks)) + 34
    x1 = max(x_max, 1.0)
    area = _PlotArea(label_w, top, width - label_w - right, row_h * max(1, len(tasks)), 0.0, x1, 1.0)
    body = [text_at(4, 15, title, size=13, font_weight="600")] if title else []
    for v in [t for t in nice_ticks(0, x1, 8) if t <= x1]:
        x = coord(area.px(v))
        body.append(f'<line x1="{x}" x2="{x}" y1="{top}" y2="{top + area.height + 4}" stroke="#e3e8ee"/>')
        body.append(text_at(area.px(v), top + area.height + 15, f"{v:g}", "middle", fill=MUTED))
    body.append(text_at(width - right, height - 4, "s since workload start", "end", fill=MUTED))
    body += _mark_lines(area, marks)
    for i, task in enumerate(tasks):
        y = top + i * row_h
        body.append(text_at(label_w - 6, y + row_h - 3, task.get("label", ""), "end", size=10, fill=INK))
        for a, b, node in task.get("segments") or []:
            if not (isinstance(node, int) and 0 <= node < n_nodes) or b <= a:
                continue
            xa, xb = area.px(max(0.0, a)), area.px(min(b, x1))
            body.append(
                f'<rect class="res" x="{coord(xa)}" y="{coord(y + 1)}" width="{coord(max(xb - xa, 0.4))}" '
                f'height="{row_h - 2}" fill="{node_colors[node % len(node_colors)]}"><title>node {node}: '
                f"{a:.2f}..{b:.2f} s</title></rect>"
            )
        for t, kind, src, dst in task.get("marks") or []:
            if kind in MARK_SHAPES and 0 <= t <= x1:
                tip = escape(f"{kind} {src} -> {dst} at {t:.2f} s")
                body.append(_mark(area.px(t), y + row_h / 2, kind, mark_colors.get(kind, INK), tip))
    # Legend: the nodes, then the marks.
    lx = label_w
    for n in range(n_nodes):
        body.append(f'<rect x="{coord(lx)}" y="{top - 16}" width="10" height="10" rx="2" '
                    f'fill="{node_colors[n % len(node_colors)]}"/>')  # fmt: skip
        body.append(text_at(lx + 13, top - 7, f"node {n}", size=10, fill=INK))
        lx += 58
    for kind in MARK_SHAPES:
        body.append(_mark(lx + 4, top - 11, kind, mark_colors.get(kind, INK), kind))
        body.append(text_at(lx + 11, top - 7, kind, size=10, fill=INK))
        lx += 50
    return svg_doc(width, height, title or "task residency", body, "chart strip")


def band_chart(
    x: Sequence[float],
    series: dict[str, tuple[Sequence[float | None], Sequence[float | None], Sequence[float | None]]],
    colors: dict[str, str],
    title: str = "",
    x_label: str = "s since workload start",
    y_max: float | None = None,
    width: int = 520,
    height: int = 220,
) -> str:
    """Per series (median, low, high) over a shared x: the median as a line, low..high as a band."""
    left, right, top, bottom = 52, 12, 48 if title else 30, 34
    xs = list(x)
    ys = [v for med, lo, hi in series.values() for s in (med, lo, hi) for v in s if v is not None]
    x0, x1 = _x_extent(xs, None)
    yt = nice_ticks(0, (y_max if y_max is not None else max(ys, default=0)) or 1, 4)
    area = _PlotArea(left, top, width - left - right, height - top - bottom, x0, x1, yt[-1])
    body = [text_at(left, 15, title, size=13, font_weight="600")] if title else []
    body += _line_axes(area, yt, [v for v in nice_ticks(x0, x1, 6) if x0 <= v <= x1])
    body.append(text_at(left + area.width, height - 3, x_label, "end", fill=MUTED))
    lx = left  # the legend on its own row under the title: group labels are long
    for name in series:
        body.append(f'<rect x="{coord(lx)}" y="{top - 22}" width="10" height="10" rx="2" '
                    f'fill="{colors.get(name, "#2563eb")}"/>')  # fmt: skip
        body.append(text_at(lx + 14, top - 13, name, fill=INK))
        lx += 30 + 6.2 * len(name)
    if not ys:
        body.append(text_at(left + area.width / 2, top + area.height / 2, "no data", "middle", fill=MUTED))
    for k, (name, (med, lo, hi)) in enumerate(series.items()):
        color = colors.get(name, "#2563eb")
        pts = [(xv, a, b) for xv, a, b in zip(xs, lo, hi, strict=False) if a is not None and b is not None]
        if len(pts) > 1:
            upper = " ".join(f"{coord(area.px(xv))},{coord(area.py(b))}" for xv, _a, b in pts)
            lower = " ".join(f"{coord(area.px(xv))},{coord(area.py(a))}" for xv, a, _b in reversed(pts))
            body.append(f'<polygon class="band band-{k}" points="{upper} {lower}" fill="{color}" fill-opacity=".18" '
                        'stroke="none"/>')  # fmt: skip
        body += _series_path(_pixel_runs(area, xs, med), color, dots=len(xs) <= 40)
    return svg_doc(width, height, title or "A/B over time", body, "chart band")
