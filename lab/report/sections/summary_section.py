"""The top of the report: the banners (accelerator, failed runs, damaged traces, notes) and the summary
table of every run, the part a reader sees first and the one that says which runs to distrust."""

from __future__ import annotations

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
        items = "".join(
            f'<li><a href="#{anchor(r["run_id"])}">{e(r["run_id"])}</a>: {status_badge(r["status"])} '
            f"{e(r.get('reason', ''))}</li>"
            for r in failed
        )
        out.append(
            f'<div class="banner bad"><span class="tag">{len(failed)} FAILED</span><div>'
            f"<p><strong>{len(failed)} run{'s' if len(failed) != 1 else ''} did not finish normally</strong> "
            f"(excluded from the comparison):</p><ul>{items}</ul></div></div>"
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
    for n in report.get("notes", []):
        out.append(box("info", "Note", [n]))
    return "\n".join(out)


def summary(report: dict) -> str:  # noqa: C901
    runs = report.get("runs", [])
    if not runs:
        return '<p class="muted">No runs.</p>'
    topos = {str(get(r, "topology", "name")) for r in runs}
    loads = {str(get(r, "workload", "name")) for r in runs}
    # Columns that are the same for every run are said once above the table instead.
    cols: list[tuple[str, str, object]] = [
        (
            "run",
            "",
            lambda r: (
                f'<a href="#{anchor(r["run_id"])}">{wrap_id(r["run_id"])}</a>'
                + (f"<br><small>{e(r.get('label'))}</small>" if r.get("label") else "")
            ),
        ),
        (
            "status",
            "",
            lambda r: (
                status_badge(r.get("status", "?"))
                + (
                    '<br><span class="badge warn" title="see the run">trace incomplete</span>'
                    if get(r, "metrics", "trace_problems") and r.get("status") == "ok"
                    else ""
                )
            ),
        ),
        ("accel", "", accel_badge),
    ]
    if len(topos) > 1:
        cols.append(("topology", "", lambda r: e(get(r, "topology", "name"))))
    cols.append(("kernel / group", "", lambda r: e(r.get("group") or get(r, "kernel", "name"))))
    if len(loads) > 1:
        cols.append(("workload", "", lambda r: e(get(r, "workload", "name"))))

    def ev(key: str):
        return lambda r: num((get(r, "metrics", "events", default={}) or {}).get(key))

    def lost(r: dict) -> str:
        v = get(r, "metrics", "lost_events")
        return num(v) if not v else f'<span class="badge bad">{num(v)}</span>'

    def vm(key: str):
        return lambda r: num((get(r, "metrics", "vmstat", default={}) or {}).get(key))

    def hint_local(r: dict) -> str:
        v = get(r, "metrics", "vmstat", default={}) or {}
        if v and not v.get("numa_hint_faults"):
            return '<span class="muted" title="no NUMA hint faults: the percentage is vacuous">no faults</span>'
        return percent(v["hint_local_pct"], 2) if v.get("hint_local_pct") is not None else num(None)

    num_cols = [
        ("boot (s)", "", lambda r: num(get(r, "timings", "boot_s"))),
        ("GB/s", "", lambda r: num(get(r, "workload", "result", "gbps"))),
        *((x.short, "trace events", ev(x.name)) for x in (*NUMA_DECISIONS, MIGRATE_PAGES)),
        ("lost", "trace events", lost),
        ("pages migrated", "/proc/vmstat", vm("numa_pages_migrated")),
        ("hint local %", "/proc/vmstat", hint_local),
    ]
    first_num = len(cols)
    cols += num_cols

    def num_cls(k: int) -> str:
        return ' class="num"' if k >= first_num else ""

    # Two header rows: a group label over consecutive columns that share it.
    top, i = [], 0
    while i < len(cols):
        grp = cols[i][1]
        j = i
        while j < len(cols) and cols[j][1] == grp:
            j += 1
        if grp:
            top.append(f'<th colspan="{j - i}" class="grp">{e(grp)}</th>')
        else:
            top += [f'<th rowspan="2"{num_cls(k)}>{e(cols[k][0])}</th>' for k in range(i, j)]
        i = j
    second = "".join(f'<th class="num">{e(c[0])}</th>' for c in cols if c[1])
    body = []
    for r in runs:
        cells = "".join(f"<td{num_cls(k)}>{fn(r)}</td>" for k, (_, _, fn) in enumerate(cols))
        body.append(f"<tr>{cells}</tr>")
    tbl = (
        '<div class="scroll"><table class="summary"><thead>'
        f"<tr>{''.join(top)}</tr><tr>{second}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )
    same = []
    if len(topos) == 1:
        same.append(f"topology <strong>{e(next(iter(topos)))}</strong>")
    if len(loads) == 1:
        same.append(f"workload <strong>{e(next(iter(loads)))}</strong>")
    groups = report.get("groups", [])
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
    legend = (
        f'<p class="muted">{" / ".join(x.short for x in (*NUMA_DECISIONS, MIGRATE_PAGES))}: '
        f"{', '.join(x.name for x in NUMA_DECISIONS)} and {MIGRATE_PAGES.name} "
        "events in the trace; lost: events the tracer dropped. Pages migrated and hint local % "
        "(numa_hint_faults_local / numa_hint_faults) from /proc/vmstat over the run.</p>"
    )
    return "".join(f"<p>{x}</p>" for x in intro) + tbl + legend
