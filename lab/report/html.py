"""The HTML report: one self-contained file (inline CSS and SVG, no scripts, no network).

``render_html(report, comparisons)`` renders the report.json model (see
``lab.report.report_model``) into ``reports/report.html`` with ``reports/report.css``
inlined. Sections have stable ids: ``#summary``, ``#topology``, ``#compare``,
``#runs`` (and ``#run-<run id>`` per run). Every text from the model is
escaped; a missing piece (a run that panicked, an analysis that was skipped, a
damaged trace) is said in words, never a crash.

This module only assembles the page: each section is its own module in
``lab.report.sections`` (summary, topology, run, numa, compare), made of the
shared pieces of ``lab.report.html_parts``.
"""

from __future__ import annotations

from pathlib import Path
from string import Template

from lab.analysis.compare import Comparison
from lab.report.html_parts import e, get
from lab.report.sections.ab_section import compare_section
from lab.report.sections.run_section import runs_section
from lab.report.sections.summary_section import banners, summary
from lab.report.sections.topology_section import topology_section

TEMPLATES = Path(__file__).resolve().parents[2] / "reports"


def render_html(report: dict, comparisons: list[Comparison]) -> str:
    runs = report.get("runs", [])
    topos = sorted({str(get(r, "topology", "name")) for r in runs})
    loads = sorted({str(get(r, "workload", "name")) for r in runs})
    title = "numalab report" + (f": {', '.join(topos)} / {', '.join(loads)}" if runs else "")
    groups = report.get("groups", [])
    subtitle = (
        f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
        + (
            f" in {len(groups)} group{'s' if len(groups) != 1 else ''}: " + " vs ".join(g["label"] for g in groups)
            if groups
            else ""
        )
        + f" · generated {report.get('generated', '')}"
    )
    css = (TEMPLATES / "report.css").read_text()
    page = Template((TEMPLATES / "report.html").read_text())
    return page.substitute(
        title=e(title),
        subtitle=e(subtitle),
        css=css,
        numalab=e(report.get("numalab", "")),
        generated=e(report.get("generated", "")),
        banners=banners(report),
        summary=summary(report),
        topology=topology_section(report),
        runs=runs_section(report),
        compare=compare_section(report, comparisons),
    )
