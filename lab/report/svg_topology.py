"""The topology graph of the HTML report as SVG: nodes on a grid or a circle, edges labelled.

Apart from the charts of ``lab.report.svg`` (whose drawing primitives it
uses) because placing nodes is a problem of its own: a grid when the links are
those of a row-major grid, else a circle.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from lab.report.svg import INK, MUTED, coord, svg_doc, text_at


def circle_layout(n: int, cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    """Node 0 at the top, then clockwise."""
    if n == 1:
        return [(cx, cy)]
    return [(cx + r * math.sin(2 * math.pi * i / n), cy - r * math.cos(2 * math.pi * i / n)) for i in range(n)]


def grid_shape(n: int, links: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
    """(rows, cols) when every link joins row-major grid neighbours (node = row * cols + col), else None."""
    for rows in range(2, int(math.isqrt(n)) + 1):
        if n % rows:
            continue
        cols = n // rows
        if links and all(
            (a // cols == b // cols and abs(a - b) == 1) or (a % cols == b % cols and abs(a - b) == cols)
            for a, b in links
        ):
            return rows, cols
    return None


def _graph_layout(
    n: int, node_r: int, top: int, links: Sequence[tuple[int, int]] | None
) -> tuple[list[tuple[float, float]], float, float, bool]:
    """The nodes' centres, the drawing's width and height, and whether the nodes sit on a grid (when ``links``,
    None for never, are those of a row-major grid) rather than on a circle."""
    shape = grid_shape(n, links) if links is not None else None
    if shape:
        rows, cols = shape
        gap = node_r * 2 + 64
        pos = [(gap / 2 + (i % cols) * gap, top + gap / 2 + (i // cols) * gap) for i in range(n)]
        return pos, cols * gap, rows * gap, True
    ring = 0 if n == 1 else max(95.0, (node_r * 2.6) * n / (2 * math.pi))
    width = height = 2 * (ring + node_r) + 24
    return circle_layout(n, width / 2, top + height / 2, ring), width, height, False


def _shared_label_in_caption(
    edges: Sequence[tuple[int, int, str]], caption: str
) -> tuple[Sequence[tuple[int, int, str]], str]:
    """The edges without their labels and the caption saying the label once, when every edge has the same
    label; else both as they were."""
    labels = {label for _, _, label in edges}
    if len(labels) != 1:
        return edges, caption
    caption = (f"every link: {labels.pop()}" + (f"; {caption}" if caption else "")).strip()
    return [(a, b, "") for a, b, _ in edges], caption


def _edge_line(p1: tuple[float, float], p2: tuple[float, float], light: bool) -> str:
    """An edge's line: dashed and light for a faint edge, else solid."""
    (x1, y1), (x2, y2) = p1, p2
    style = (
        'stroke="#b6c2cf" stroke-width="1.5" stroke-dasharray="6 4"' if light else 'stroke="#8795a1" stroke-width="2"'
    )
    return f'<line x1="{coord(x1)}" y1="{coord(y1)}" x2="{coord(x2)}" y2="{coord(y2)}" {style}/>'


def _edge_label_box(
    p1: tuple[float, float], p2: tuple[float, float], label: str, light: bool, centre: tuple[float, float]
) -> list[str]:
    """An edge's label in a rounded box on the edge (shifted along a chord through the ``centre``)."""
    (x1, y1), (x2, y2) = p1, p2
    cx, cy = centre
    # Chords through the centre would collide: shift their labels along the edge.
    t = 0.5 if abs((x1 + x2) / 2 - cx) + abs((y1 + y2) / 2 - cy) > 4 else 0.3
    mx, my = x1 + (x2 - x1) * t, y1 + (y2 - y1) * t
    w = 8 + 7 * len(label)
    stroke = "#b6c2cf" if light else "#8795a1"
    return [
        f'<rect x="{coord(mx - w / 2)}" y="{coord(my - 9)}" width="{coord(w)}" height="18" rx="9" fill="#ffffff" '
        f'stroke="{stroke}"/>',
        text_at(mx, my + 4, label, "middle", font_weight="600", fill=MUTED if light else "#334e68"),
    ]


def _node_disc(x: float, y: float, lines: Sequence[str], node_r: int, dashed: bool) -> list[str]:
    """A node's circle (dashed outline if ``dashed``) and its text lines, the first bold."""
    dash = ' stroke-dasharray="5 3"' if dashed else ""
    out = [
        f'<circle cx="{coord(x)}" cy="{coord(y)}" r="{node_r}" fill="#e8f0fe" stroke="#1d4ed8" stroke-width="2"{dash}/>'
    ]
    y0 = y - (len(lines) - 1) * 7 + 4
    for k, line in enumerate(lines):
        out.append(
            text_at(
                x,
                y0 + k * 14,
                line,
                "middle",
                size=12.5 if k == 0 else 10.5,
                font_weight="700" if k == 0 else "400",
                fill=INK if k == 0 else "#334e68",
            )
        )
    return out


def topology_graph(
    nodes: Sequence[Sequence[str]],
    edges: Sequence[tuple[int, int, str]],
    title: str = "",
    dashed: Sequence[bool] = (),
    faint: Sequence[tuple[int, int, str]] = (),
    caption: str = "",
) -> str:
    """Nodes as circles (first line bold, then details); edges labelled (e.g. with distances).

    Nodes sit on a grid when the edges are those of a row-major grid, else on a circle. ``dashed[i]``
    draws node i with a dashed outline (a node without CPUs); ``faint`` edges are drawn dashed and light
    (e.g. the farther pairs of a SLIT). When every edge has the same label and they would crowd the
    picture, the label is said once under it instead.
    """
    n = len(nodes)
    node_r = 42 if n <= 8 else 30
    top = 24 if title else 0
    pos, width, height, on_grid = _graph_layout(n, node_r, top, None if faint else [(a, b) for a, b, _ in edges])
    centre = (width / 2, top + height / 2)
    if not on_grid and len(edges) > n:  # crowded
        edges, caption = _shared_label_in_caption(edges, caption)
    bottom = 20 if caption else 0
    body = [text_at(8, 16, title, size=13, font_weight="600")] if title else []
    body += [_edge_line(pos[a], pos[b], light=True) for a, b, _ in faint]
    body += [_edge_line(pos[a], pos[b], light=False) for a, b, _ in edges]
    for (a, b, label), light in [*((x, True) for x in faint), *((x, False) for x in edges)]:
        if label:
            body += _edge_label_box(pos[a], pos[b], label, light, centre)
    for i, lines in enumerate(nodes):
        body += _node_disc(*pos[i], lines, node_r, i < len(dashed) and dashed[i])
    if caption:
        body.append(text_at(width / 2, top + height + 12, caption, "middle", fill=MUTED))
    return svg_doc(width, height + top + bottom, title or "topology", body, "chart topology")
