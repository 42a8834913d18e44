"""The top of the report: the banners (accelerator, failed runs, damaged traces, notes) and the summary
table of every run, the part a reader sees first and the one that says which runs to distrust."""

from __future__ import annotations

from collections.abc import Callable

from lab.analysis.display import percent
from lab.events import MIGRATE_PAGES, NUMA_DECISIONS
from lab.report.html_parts import accel_badge, accel_name, anchor, box, e, get, num, status_badge, wrap_id


def banners(report: dict) -> str:
    runs = report.get("runs", [])
    out = []
    tcg = [r for r in runs if accel_name(r) == "TCG"]
    if tcg:
        reason = get(tcg[0], "accelerator", "reason", default="") or ""
        out.append(
            '<div class="banner tcg" id="accel-banner"><span class="tag">TCG</span><div>'
            f"<p><strong>{len(tcg)} of {len(runs)} run{'s' if len(runs) != 1 else ''} ran under TCG software "
            "emulation, not KVM.</strong> Guest CPUs are emulated: boot times and workload throughput are many "
            "times slower than on hardware and noisy. Read NUMA-balancing behaviour (events, migrations, "
            "locality), not absolute speed.</p>"
            + (f'<p class="muted">{e(reason)}</p>' if reason else "")
            + "</div></div>"
        )
    elif runs and all(accel_name(r) == "KVM" for r in runs):
        out.append(
            '<div class="banner kvm" id="accel-banner"><span class="tag">KVM</span><div><p>All runs used KVM '
            "hardware virtualization.</p></div></div>"
        )
    failed = [r for r in runs if r.get("status") != "ok"]
    if failed:
        counted = set(report.get("include_statuses") or ())  # (--include-status: in the comparisons, marked)
        items = "".join(
            f'<li><a href="#{anchor(r["run_id"])}">{e(r["run_id"])}</a>: {status_badge(r["status"])} '
            f"{e(r.get('reason', ''))}"
            + (" <strong>(counted in the comparison: --include-status; its rows are marked †)</strong>"
               if r["status"] in counted else "")
            + "</li>"
            for r in failed
        )  # fmt: skip
        left = "excluded from the comparison" + (" unless --include-status counts them" if counted else "")
        out.append(
            f'<div class="banner bad"><span class="tag">{len(failed)} FAILED</span><div>'
            f"<p><strong>{len(failed)} run{'s' if len(failed) != 1 else ''} did not finish normally</strong> "
            f"({left}):</p><ul>{items}</ul></div></div>"
        )
    damaged = [r for r in runs if get(r, "metrics", "trace_problems") and r.get("status") == "ok"]
    if damaged:
        items = "".join(
            f'<li><a href="#{anchor(r["run_id"])}">{e(r["run_id"])}</a>: '
            f"{e('; '.join(r['metrics']['trace_problems']))}</li>"
            for r in damaged
        )
        out.append(
            f'<div class="banner warn"><span class="tag">TRACE</span><div><p><strong>Trace problems in '
            f"{len(damaged)} run{'s' if len(damaged) != 1 else ''}</strong>: their event counts are incomplete."
            f"</p><ul>{items}</ul></div></div>"
        )
    for w in report.get("warnings", []):
        tag = '<span class="tag">SAME KERNEL</span>'
        out.append(f'<div class="banner bad">{tag}<div><p><strong>{e(w)}</strong></p></div></div>')
    for n in report.get("notes", []):
        out.append(box("info", "Note", [n]))
    return "\n".join(out)


Cell = Callable[[dict], str]
Column = tuple[str, str, Cell]  # header, the group header above it ("" for none), the cell of a run


def _run_cell(r: dict) -> str:
    """The run's id, linked to its section, and its label if it has one."""
    return f'<a href="#{anchor(r["run_id"])}">{wrap_id(r["run_id"])}</a>' + (
        f"<br><small>{e(r.get('label'))}</small>" if r.get("label") else ""
    )


def _status_cell(r: dict) -> str:
    """The run's status badge, and a warning badge when its trace is incomplete."""
    return status_badge(r.get("status", "?")) + (
        '<br><span class="badge warn" title="see the run">trace incomplete</span>'
        if get(r, "metrics", "trace_problems") and r.get("status") == "ok"
        else ""
    )


def _event_cell(key: str) -> Cell:
    """The cell of a trace event's count."""
    return lambda r: num((get(r, "metrics", "events", default={}) or {}).get(key))


def _lost_cell(r: dict) -> str:
    """The count of events the tracer dropped, as a warning badge when there are any."""
    v = get(r, "metrics", "lost_events")
    return num(v) if not v else f'<span class="badge bad">{num(v)}</span>'


def _vmstat_cell(key: str) -> Cell:
    """The cell of a /proc/vmstat counter over the run."""
    return lambda r: num((get(r, "metrics", "vmstat", default={}) or {}).get(key))


def _hint_local_cell(r: dict) -> str:
    """The share of NUMA hint faults that were local, or "no faults" when there were none."""
    v = get(r, "metrics", "vmstat", default={}) or {}
    if v and not v.get("numa_hint_faults"):
        return '<span class="muted" title="no NUMA hint faults: the percentage is vacuous">no faults</span>'
    return percent(v["hint_local_pct"], 2) if v.get("hint_local_pct") is not None else num(None)


def _run_columns(topos: set[str], loads: set[str]) -> list[Column]:
    """The columns naming a run: id, status, accelerator, kernel or group, and its topology and workload when the
    runs do not all share them."""
    cols: list[Column] = [("run", "", _run_cell), ("status", "", _status_cell), ("accel", "", accel_badge)]
    if len(topos) > 1:
        cols.append(("topology", "", lambda r: e(get(r, "topology", "name"))))
    cols.append(("kernel / group", "", lambda r: e(r.get("group") or get(r, "kernel", "name"))))
    if len(loads) > 1:
        cols.append(("workload", "", lambda r: e(get(r, "workload", "name"))))
    return cols


def _number_columns() -> list[Column]:
    """The columns of a run's figures: boot time, throughput, trace event counts and /proc/vmstat's NUMA counters."""
    return [
        ("boot (s)", "", lambda r: num(get(r, "timings", "boot_s"))),
        ("GB/s", "", lambda r: num(get(r, "workload", "result", "gbps"))),
        *((x.short, "trace events", _event_cell(x.name)) for x in (*NUMA_DECISIONS, MIGRATE_PAGES)),
        ("lost", "trace events", _lost_cell),
        ("pages migrated", "/proc/vmstat", _vmstat_cell("numa_pages_migrated")),
        ("hint local %", "/proc/vmstat", _hint_local_cell),
    ]


def _num_cls(k: int, first_num: int) -> str:
    """The class attribute of the k-th column's cells: numbers from column ``first_num`` on."""
    return ' class="num"' if k >= first_num else ""


def _header_rows(cols: list[Column], first_num: int) -> tuple[str, str]:
    """The table's two header rows: a group label over consecutive columns that share it (their own headers in
    the second row), the other columns' headers spanning both rows."""
    top, i = [], 0
    while i < len(cols):
        grp = cols[i][1]
        j = i
        while j < len(cols) and cols[j][1] == grp:
            j += 1
        if grp:
            top.append(f'<th colspan="{j - i}" class="grp">{e(grp)}</th>')
        else:
            top += [f'<th rowspan="2"{_num_cls(k, first_num)}>{e(cols[k][0])}</th>' for k in range(i, j)]
        i = j
    second = "".join(f'<th class="num">{e(c[0])}</th>' for c in cols if c[1])
    return "".join(top), second


def _summary_table(runs: list[dict], cols: list[Column], first_num: int) -> str:
    """The summary table: one row per run, one cell per column."""
    top, second = _header_rows(cols, first_num)
    body = []
    for r in runs:
        cells = "".join(f"<td{_num_cls(k, first_num)}>{fn(r)}</td>" for k, (_, _, fn) in enumerate(cols))
        body.append(f"<tr>{cells}</tr>")
    return (
        '<div class="scroll"><table class="summary"><thead>'
        f"<tr>{top}</tr><tr>{second}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _summary_intro(topos: set[str], loads: set[str], groups: list[dict]) -> list[str]:
    """The sentences above the table: the topology and workload when every run shares them, and the groups."""
    same = []
    if len(topos) == 1:
        same.append(f"topology <strong>{e(next(iter(topos)))}</strong>")
    if len(loads) == 1:
        same.append(f"workload <strong>{e(next(iter(loads)))}</strong>")
    intro = []
    if same:
        intro.append("All runs: " + ", ".join(same) + ".")
    if groups:
        intro.append(
            "Groups (by kernel and NUMA-balancing settings; each later group is compared with the first): "
            + "; ".join(
                f"<strong>{e(g['label'])}</strong> ({len(g['runs'])} run{'s' if len(g['runs']) != 1 else ''})"
                for g in groups
            )
            + "."
        )
    return intro


def _summary_legend() -> str:
    """What the short event columns count and where the /proc/vmstat columns come from."""
    return (
        f'<p class="muted">{" / ".join(x.short for x in (*NUMA_DECISIONS, MIGRATE_PAGES))}: '
        f"{', '.join(x.name for x in NUMA_DECISIONS)} and {MIGRATE_PAGES.name} "
        "events in the trace; lost: events the tracer dropped. Pages migrated and hint local % "
        "(numa_hint_faults_local / numa_hint_faults) from /proc/vmstat over the run.</p>"
    )


def summary(report: dict) -> str:
    """The summary table of every run, what the runs share said once above it, and the legend below."""
    runs = report.get("runs", [])
    if not runs:
        return '<p class="muted">No runs.</p>'
    topos = {str(get(r, "topology", "name")) for r in runs}
    loads = {str(get(r, "workload", "name")) for r in runs}
    # Columns that are the same for every run are said once above the table instead.
    cols = _run_columns(topos, loads)
    first_num = len(cols)
    cols += _number_columns()
    tbl = _summary_table(runs, cols, first_num)
    intro = _summary_intro(topos, loads, report.get("groups", []))
    return "".join(f"<p>{x}</p>" for x in intro) + tbl + _summary_legend()
