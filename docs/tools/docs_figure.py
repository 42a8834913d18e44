"""The README's picture: a run record's topology graph and SLIT, drawn by the report's own code.

    python docs/tools/docs_figure.py tests/data/runs/ring4-numa01-on-1 docs/img/ring-4-topology.svg

The graph is ``lab.report.sections.topology_section.topology_svg`` (the HTML report's figure); the SLIT is
shaded as the report's distance table is (``lab.topology.pictures.render.distance_grid`` and the report's
``DISTANCE_NEAR``/``DISTANCE_FAR`` colours), drawn as SVG so that the picture is one file.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from lab.analysis.record import RunRecord
from lab.report import svg
from lab.report.colors import DISTANCE_FAR, DISTANCE_NEAR
from lab.report.report_model import run_entry
from lab.report.sections.topology_section import topology_svg
from lab.topology.pictures import render

CELL = 34


def _size(doc: str) -> tuple[float, float]:
    m = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', doc)
    if not m:
        raise SystemExit("docs_figure: the topology SVG has no viewBox")
    return float(m.group(1)), float(m.group(2))


def slit_svg(d: list[list[int]], x0: float, y0: float) -> tuple[list[str], float, float]:
    """The SLIT as a shaded table at (x0, y0): its SVG elements, width and height."""
    n = len(d)
    body = [svg.text_at(x0, y0 + 14, "Distance matrix (SLIT)", size=13, font_weight="600")]
    top, left = y0 + 28, x0 + CELL
    for j in range(n):
        body.append(svg.text_at(left + j * CELL + CELL / 2, top + 14, j, "middle", font_weight="600"))
    for i, row in enumerate(render.distance_grid(d)):
        y = top + 20 + i * CELL
        body.append(svg.text_at(left - 8, y + CELL / 2 + 4, i, "end", font_weight="600"))
        for j, c in enumerate(row):
            fill = "#ffffff" if c.far is None else svg.mix(DISTANCE_NEAR, DISTANCE_FAR, 0.15 + 0.7 * c.far)
            x = left + j * CELL
            body.append(
                f'<rect x="{svg.coord(x)}" y="{svg.coord(y)}" width="{CELL}" height="{CELL}" fill="{fill}" '
                'stroke="#cbd2d9"/>'
            )
            body.append(svg.text_at(x + CELL / 2, y + CELL / 2 + 4, c.value, "middle"))
    return body, CELL * (n + 1), 20 + 28 + n * CELL


def figure(run_dir: Path) -> str:
    r = RunRecord.load(run_dir)
    t = run_entry(r, run_dir)["topology"]
    graph = topology_svg(t)
    gw, gh = _size(graph)
    body, sw, sh = slit_svg(t["distances"], gw + 24, 8)
    height = max(gh, sh + 8) + 22
    caption = f"{t['name']}: {t['total_cpus']} CPUs, {t['total_memory_mib']} MiB (run record {run_dir.name})"
    body.append(svg.text_at(8, height - 8, caption, fill=svg.MUTED))
    inner = graph.replace("<svg ", '<svg x="0" y="0" ', 1)
    return svg.svg_doc(gw + 24 + sw + 8, height, f"{t['name']} topology and SLIT", [inner, *body]) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: docs_figure.py RUN_DIR OUT.svg", file=sys.stderr)
        return 2
    out = Path(argv[1])
    out.write_text(figure(Path(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
