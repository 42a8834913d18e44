"""The A/B comparison section: each group against the first, as mmtests-style tables beside dot plots of
the key metrics per run (and of every metric a user's workload declares)."""

from __future__ import annotations

from lab.analysis import finding
from lab.analysis.compare import Comparison, Row
from lab.analysis.metrics import METRIC_KEYS, NEUTRAL, metric_values
from lab.events import MOVE_NUMA, SWAP_NUMA
from lab.report import svg
from lab.report.ab_table import to_html
from lab.report.colors import BASE_COLOR, NEW_COLOR
from lab.report.html_parts import e, figure
from lab.report.sections.views_section import ab_overlays

KEY_METRICS = (
    "workload.gbps",
    "workload.gbps_per_vcpu_s",  # its twin: the same work per vCPU CPU-second (less host noise under TCG)
    "workload.round_trips_per_s",
    "workload.round_trips_per_vcpu_s",
    "tasks.convergence_s",
    f"events.{MOVE_NUMA.name}",
    f"events.{SWAP_NUMA.name}",
    "vmstat.numa_pages_migrated",
    "vmstat.hint_local_pct",
)


def _values_by_run(report: dict) -> dict[str, dict[str, float]]:
    """Metric values per run id (Comparison.base_ids/new_ids), from the report's re-analysis. Not by folder
    name: two runs in two parents can share one (r1, r2, ...)."""
    out = {}
    for r in report.get("runs", []):
        pseudo = {
            "metrics": r.get("metrics") or {},
            "workload": r.get("workload") or {},
            "timings": r.get("timings") or {},
        }
        out[r["run_id"]] = metric_values(pseudo)
    return out


def _verdict_text(row: Row) -> str:
    """The verdict under a dot plot, with what it cannot mean in these runs' VM (lab.analysis.caveats) and, where a
    side ran a sched_ext scheduler, that a NUMA-balancing row is the fair class's (lab.analysis.scheduler_class)."""
    caveat = "".join(f' <small class="caveat">({e(c)})</small>' for c in (row.caveat, row.class_note) if c)
    return _verdict_words(row) + caveat


def _verdict_words(row: Row) -> str:
    """The row's verdict (lab.analysis.judgement) in the HTML's words: better, worse and changed coloured, "same
    within ±1%", "undecided (...)" and "not judged (...)" as its judgement says them."""
    if row.included:  # marked (--include-status)
        text = row.verdict_text().removesuffix(f"; {row.class_note}") if row.class_note else row.verdict_text()
        return e(text.removesuffix(f": {row.caveat}") if row.caveat else text)
    return {
        "better": '<span class="verdict-better">significantly better</span>',
        "worse": '<span class="verdict-worse">significantly worse</span>',
        "changed": '<span class="verdict-changed">changed significantly (a mechanism counter: not judged)</span>',
    }.get(row.verdict(), e(row.judgement.text))


def compare_plots(c: Comparison, values: dict[str, dict[str, float]]) -> str:
    figs = []
    declared = tuple(r.metric.key for r in c.rows if r.metric.key not in METRIC_KEYS)  # a user workload's own
    for key in (*KEY_METRICS, *declared):
        row = c.row(key)
        if row is None:
            continue
        metric = row.metric
        base = [values[r][key] for r in c.base_ids if key in values.get(r, {})]
        new = [values[r][key] for r in c.new_ids if key in values.get(r, {})]
        groups = [(c.base_label, base, BASE_COLOR), (c.new_label, new, NEW_COLOR)]
        title = f"{metric.label}" + (f" ({metric.unit})" if metric.unit else "")
        # The same mean as the table's mean row (Hmean for rates, Amean otherwise).
        note = "a mechanism counter: shown, not judged" if metric.better == NEUTRAL else f"{metric.better} is better"
        plot = svg.dot_plot(groups, title=title, note=note, width=380, harmonic=row.mean_name == "Hmean")
        figs.append(figure(plot, f'<span class="mono">{e(key)}</span>: {_verdict_text(row)}'))
    if not figs:
        return ""
    legend = (
        '<p class="legend-inline">'
        f'<span><i style="background:{BASE_COLOR}"></i>baseline: {e(c.base_label)}</span>'
        f'<span><i style="background:{NEW_COLOR}"></i>new: {e(c.new_label)}</span>'
        "<span>one dot per run; the bar is the mean of the table's mean row</span></p>"
    )
    return f"<h4>Key metrics per run</h4>{legend}{''.join(figs)}"


def compare_section(report: dict, comparisons: list[Comparison]) -> str:
    if not comparisons:
        groups = report.get("groups", [])
        why = (
            "all runs are in one group (same kernel and NUMA-balancing settings)"
            if len(groups) <= 1
            else "the groups could not be compared (see the notes above)"
        )
        return f'<p class="muted">No A/B comparison: {e(why)}. Give runs of two kernels or two settings.</p>'
    values = _values_by_run(report)
    out = [
        '<p class="muted">Each group is compared with the first (the baseline), in the style of mmtests '
        "compare-kernels. %diff is signed so that <strong>+ always means better</strong>; significant differences "
        "are coloured green (better) or red (worse). Mechanism counters (pages migrated, hint faults, AutoNUMA "
        "cost, the sched_*_numa decisions) have no better: their %diff is the plain change (+ is more), shown and "
        "not judged.</p>"
    ]
    by_id = {r["run_id"]: r for r in report.get("runs", [])}
    for c in comparisons:
        # to_html lists the excluded runs (status not ok, or an incomplete trace) under its notes.
        out.append(
            f'<div class="card ab-layout"><div class="ab-table">{to_html(c)}{finding.to_html(c)}</div>'
            f'<aside class="ab-plots">{compare_plots(c, values)}</aside></div>'
            f'<div class="card">{ab_overlays(c, by_id)}</div>'
        )
    return "\n".join(out)
