"""A run's NUMA-balancing analysis: what the trace and /proc/vmstat say the scheduler did.

Split by what a reader asks in turn: was there any activity at all, can the
trace be read, where did tasks move (node matrices), why did they stay, what
migrated pages, and how it went over time.
"""

from __future__ import annotations

import dataclasses

from lab.analysis.display import percent
from lab.events import MIGRATE_PAGES, MIGRATE_TASK, NUMA_DECISIONS, STICK_NUMA
from lab.report import svg
from lab.report.colors import EVENT_COLORS, HINT_LOCAL_COLOR
from lab.report.html_parts import box, e, figure, get, kv_table, num, table
from lab.report.sections.views_section import run_views

# The decisions by their short word, as the analyses key node moves, rates and per-task counts.
KINDS = tuple(ev.short for ev in NUMA_DECISIONS)
KIND_EVENT = {ev.short: ev.name for ev in NUMA_DECISIONS}
# lab.analysis.numa's key for the mm_migrate_pages analysis and for its series of rates.
MIGRATE_PAGES_KEY = "migrate_pages"
STICK_REASONS = {
    "no_cpu": "no CPU found (dst_cpu = -1)",
    "move_to_idle_failed": "move to idle CPU failed",
    "swap_failed": "swap failed",
}


def _fold_table(title: str, node_moves: dict, key: str, axis: str) -> str:
    vals = sorted({k for kind in KINDS for k in (get(node_moves, kind, key) or {})}, key=lambda s: int(s))
    if not vals:
        return ""
    rows = [[e(kind)] + [num((get(node_moves, kind, key) or {}).get(v, 0)) for v in vals] for kind in KINDS]
    return (
        f"<div><h4>{e(title)}</h4>"
        + table([e(axis)] + [e(v) for v in vals], rows, "small", tuple(range(1, len(vals) + 1)))
        + "</div>"
    )


def is_quiet(m: dict) -> bool:
    """No NUMA-balancing activity at all: no events, no hint faults, no migrations."""
    ev = m.get("events") or {}
    vm = m.get("vmstat") or {}
    return (
        bool(ev)
        and all(v == 0 for v in ev.values())  # (null counts: an unreadable trace, not a quiet one)
        and not vm.get("numa_hint_faults")
        and not vm.get("numa_pages_migrated")
        and not vm.get("numa_pte_updates")
    )


def ext_scheduler(r: dict) -> str | None:
    """The sched_ext scheduler a run's workload ran under (its report entry's ``scheduler``), None: the fair
    class."""
    s = r.get("scheduler")
    return str(s.get("name") or s.get("asked")) if isinstance(s, dict) and s.get("kind") == "sched_ext" else None


def fair_class_note(r: dict) -> str:
    """Where a sched_ext scheduler ran the workload: what NUMA balancing's figures below are ("" elsewhere)."""
    ext = ext_scheduler(r)
    if ext is None:
        return ""
    return (
        f"<p class=\"note\">{e(ext)} (sched_ext) placed this run's tasks. NUMA balancing is the fair class's: its "
        "scans start from the fair class's tick, so its hint faults, page migrations and task moves, swaps and "
        "sticks below are about fair-class tasks only, not a verdict on the BPF scheduler. Where the tasks ran and "
        "how they moved (the per-task residency) is read from the generic scheduler events, for any scheduler.</p>"
    )


def _quiet_box(r: dict) -> str:
    """The whole section when nothing happened: expected with balancing off, or where a sched_ext scheduler ran
    the tasks (balancing scans fair-class tasks only); a finding with it on under the fair class."""
    nb = get(r, "settings", "numa_balancing")
    ext = ext_scheduler(r)
    why = " (numa_balancing = 0: expected)" if nb == "0" else " (unexpected with NUMA balancing on)"
    if ext is not None and nb != "0":
        why = f" (expected: {ext} (sched_ext) ran the tasks, and balancing scans fair-class tasks only)"
    return box(
        "ok" if nb == "0" or ext is not None else "warn",
        "No NUMA-balancing activity" + why,
        [
            f"no {', '.join(ev.name for ev in NUMA_DECISIONS)} or {MIGRATE_PAGES.name} events in the trace",
            "no NUMA PTE updates, hint faults or page migrations in /proc/vmstat",
        ],
    )


def _trace_analysis(m: dict) -> tuple[dict, str]:
    """The trace analysis to draw and what to say first about it. A trace that could not be read at all
    gives no analysis (its zeros would look like a quiet run) and a box saying so."""
    if m.get("numa") and m.get("trace_problems") and not any((m.get("events") or {}).values()):
        return {}, box(
            "warn",
            "No trace data: the NUMA events of this run could not be read",
            [
                "the pictures of the trace (node matrices, stick reasons, event rates) are left out; "
                "/proc/vmstat below is unaffected"
            ],
        )
    numa = m.get("numa") or {}
    if not numa:
        return numa, '<p class="muted">No NUMA-balancing trace analysis for this run.</p>'
    if m.get("trace_problems"):
        return numa, '<p class="muted">The trace is incomplete (see above): the counts below are lower bounds.</p>'
    return numa, ""


def _node_moves(r: dict, numa: dict) -> str:
    """Where tasks went: a src_nid -> dst_nid heatmap per decision kind, with the counts folded by SLIT
    distance and by hops beside them."""
    nm = numa.get("node_moves")
    if not nm:
        return ""
    n = len(get(r, "topology", "distances", default=[]) or [])
    labels = [str(i) for i in range(n)]
    figs = []
    for kind in KINDS:
        mat = get(nm, kind, "matrix")
        if mat is None:
            continue
        extra = get(nm, kind, "without_destination") or 0
        cap = f"{KIND_EVENT[kind]}: src_nid → dst_nid"
        if extra:
            cap += f"; {num(extra)} without a destination node (not in the matrix)"
        figs.append(figure(svg.heatmap(mat, labels, title=kind, color=EVENT_COLORS[kind]), e(cap)))
    folds = _fold_table("by SLIT distance", nm, "by_distance", "distance") + _fold_table(
        "by hops", nm, "by_hops", "hops"
    )
    return f'<h4>Source → destination node</h4><div class="grid">{"".join(figs)}<div class="folds">{folds}</div></div>'


def _stick_reasons(numa: dict) -> str:
    sr = numa.get("stick_reasons")
    if sr is None:
        return ""
    items = [(STICK_REASONS.get(k, k), v, EVENT_COLORS[STICK_NUMA.short]) for k, v in sr.items()]
    return (
        "<div><h4>Stick reasons</h4>"
        + figure(svg.bar_chart(items, width=420), f"Why {STICK_NUMA.name} kept a task where it was.")
        + "</div>"
    )


def _swap_groups(numa: dict) -> str:
    sg = numa.get("swap_groups")
    if sg is None:
        return ""
    return (
        "<div><h4>Swaps and NUMA groups</h4>"
        + kv_table([("same group (ngid)", num(sg.get("same_group"))), ("across groups", num(sg.get("cross_group")))])
        + "</div>"
    )


def _migrate_pages(numa: dict) -> str:
    mp = numa.get(MIGRATE_PAGES_KEY)
    if mp is None:
        return ""
    rows = [
        [e(reason)]
        + [num(c.get(f, 0)) for f in ("calls", "succeeded", "failed", "thp_succeeded", "thp_failed", "thp_split")]
        for reason, c in mp.items()
    ]
    return (
        f"<div><h4>{MIGRATE_PAGES.name} by reason</h4>"
        + (
            table(
                ["reason", "calls", "pages ok", "failed", "THP ok", "THP failed", "THP split"],
                rows,
                "small",
                (1, 2, 3, 4, 5, 6),
            )
            if rows
            else '<p class="muted">no page migrations</p>'
        )
        + "</div>"
    )


def _load_balancer(numa: dict) -> str:
    lb = numa.get("cross_node_lb")
    if lb is None:
        return ""
    return (
        "<div><h4>Load-balancer migrations</h4>"
        + kv_table([(MIGRATE_TASK.name, num(lb.get("migrations"))), ("crossing nodes", num(lb.get("cross_node")))])
        + "</div>"
    )


def _side_tables(m: dict, numa: dict) -> str:
    """Why tasks stayed, swaps and groups, page migrations, vmstat and the load balancer, side by side."""
    side = [
        _stick_reasons(numa),
        _swap_groups(numa),
        _migrate_pages(numa),
        _vmstat_table(m),
        _load_balancer(numa),
    ]
    side = [x for x in side if x]
    return f'<div class="grid">{"".join(side)}</div>' if side else ""


def _over_time(r: dict, m: dict, numa: dict) -> str:
    """Event rates and vmstat samples over time, every chart on the same x axis (seconds since the
    workload started) with the workload's end marked."""
    charts = []
    series = get(numa, "rates", "series") or {}
    vs = m.get("vmstat_series") or {}
    bin_s = get(numa, "rates", "bin_s", default=1) or 1
    length = max((len(v) for v in series.values()), default=0)
    rx = [i * bin_s for i in range(length)]
    x_range = (0.0, max([*rx, *(vs.get("t") or []), 1]))
    duration = get(r, "workload", "duration_s")
    marks = [(float(duration), "workload end")] if isinstance(duration, (int, float)) else []
    axes = svg.Axes(x_label="s since workload start", x_range=x_range, marks=marks)
    if series:
        sched = {k: series[k] for k in KINDS if k in series}
        charts.append(
            figure(
                svg.line_chart(rx, sched, title="NUMA scheduler events per second", colors=EVENT_COLORS, axes=axes),
                " / ".join(ev.name for ev in NUMA_DECISIONS) + " per second.",
            )
        )
        if MIGRATE_PAGES_KEY in series:
            charts.append(
                figure(
                    svg.line_chart(
                        rx,
                        {"calls": series[MIGRATE_PAGES_KEY]},
                        title=f"{MIGRATE_PAGES.name} calls per second",
                        colors={"calls": EVENT_COLORS[MIGRATE_PAGES.short]},
                        axes=axes,
                    ),
                    "Page-migration calls (each moves one page or one THP).",
                )
            )
    if vs.get("t"):
        charts.append(
            figure(
                svg.line_chart(
                    vs["t"],
                    {"hint local %": vs.get("hint_local_pct", [])},
                    title="NUMA hint-local % per interval",
                    colors={"hint local %": HINT_LOCAL_COLOR},
                    axes=dataclasses.replace(axes, y_max=100),
                ),
                "numa_hint_faults_local / numa_hint_faults in each vmstat sample interval (gaps: no faults).",
            )
        )
        charts.append(
            figure(
                svg.line_chart(
                    vs["t"],
                    {"pages": vs.get("numa_pages_migrated", [])},
                    title="NUMA pages migrated (cumulative)",
                    colors={"pages": EVENT_COLORS[MIGRATE_PAGES.short]},
                    axes=axes,
                ),
                "numa_pages_migrated from /proc/vmstat, since the workload started.",
            )
        )
    return f'<h4>Over time</h4><div class="grid">{"".join(charts)}</div>' if charts else ""


def _per_task(numa: dict) -> str:
    pt = numa.get("per_task") or {}
    if not (pt.get("processes") or pt.get("tasks")):
        return ""

    def rows_of(items: list[dict]) -> list[list[str]]:
        return [[e(i.get("id")), e(i.get("comm"))] + [num(i.get(k, 0)) for k in KINDS] for i in items]

    return (
        "<details><summary>Per process and per task counts</summary>"
        '<div class="grid"><div><h4>processes (tgid)</h4>'
        + table(["tgid", "comm", *KINDS], rows_of(pt.get("processes", [])), "small", (2, 3, 4))
        + "</div><div><h4>tasks (pid)</h4>"
        + table(["pid", "comm", *KINDS], rows_of(pt.get("tasks", [])), "small", (2, 3, 4))
        + "</div></div></details>"
    )


def _skipped(numa: dict) -> str:
    skipped = numa.get("skipped") or {}
    if not skipped:
        return ""
    return '<p class="muted">Not analysed: ' + "; ".join(f"{e(k)} ({e(v)})" for k, v in skipped.items()) + ".</p>"


def numa_section(r: dict) -> str:
    """The run's NUMA-balancing analysis, or a box saying there was none to see."""
    m = r.get("metrics") or {}
    if not m:
        return ""
    if is_quiet(m):
        return _quiet_box(r) + run_views(r)  # (where the tasks ran and their memory sat: with balancing off too)
    numa, lead = _trace_analysis(m)
    return "".join(
        [
            fair_class_note(r),
            lead,
            _node_moves(r, numa),
            run_views(r),
            _side_tables(m, numa),
            _over_time(r, m, numa),
            _per_task(numa),
            _skipped(numa),
        ]
    )


def _vmstat_table(m: dict) -> str:
    rows = m.get("mmtests") or {}
    if not rows:
        return ""
    return (
        "<div><h4>vmstat (mmtests rows)</h4>"
        + table(
            ["", "value"],
            [[e(k), percent(v, 2) if k.endswith("percent") else num(v)] for k, v in rows.items()],
            "small",
            (1,),
        )
        + "</div>"
    )
