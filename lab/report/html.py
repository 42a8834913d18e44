"""The HTML report: one self-contained file (inline CSS and SVG, no scripts, no network).

``render_html(report, comparisons)`` renders the report.json model (see
``lab.report.build``) into ``reports/report.html`` with ``reports/report.css``
inlined. Sections have stable ids: ``#summary``, ``#topology``, ``#compare``,
``#runs`` (and ``#run-<run id>`` per run). Every text from the model is
escaped; a missing piece (a run that panicked, an analysis that was skipped, a
damaged trace) is said in words, never a crash.
"""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path
from string import Template

from lab.analysis.compare import Comparison, Row, to_html
from lab.analysis.display import percent
from lab.analysis.lost import describe as describe_lost
from lab.analysis.metrics import METRIC_KEYS, metric_values
from lab.cpulist import format_cpulist
from lab.guest.kernel_complaints import summary as complaint_line
from lab.report import svg
from lab.report.access import access_section

TEMPLATES = Path(__file__).resolve().parents[2] / "reports"
KEY_METRICS = (
    "workload.gbps",
    "events.sched_move_numa",
    "events.sched_swap_numa",
    "vmstat.numa_pages_migrated",
    "vmstat.hint_local_pct",
)
KINDS = ("move", "swap", "stick")
KIND_EVENT = {"move": "sched_move_numa", "swap": "sched_swap_numa", "stick": "sched_stick_numa"}
KIND_COLOR = {"move": "#1d4ed8", "swap": "#b45309", "stick": "#6d28d9"}
STICK_REASONS = {
    "no_cpu": "no CPU found (dst_cpu = -1)",
    "move_to_idle_failed": "move to idle CPU failed",
    "swap_failed": "swap failed",
}
BASE_COLOR, NEW_COLOR = "#64748b", "#2563eb"


def e(v: object) -> str:
    return escape("" if v is None else str(v))


def anchor(run_id: str) -> str:
    return "run-" + re.sub(r"[^A-Za-z0-9_-]", "-", run_id)


def num(v: object, digits: int = 2) -> str:
    """A table number: integers with thousands separators, floats rounded, None as a dash."""
    if v is None or v == "":
        return "–"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.0f}" if v.is_integer() and abs(v) >= 1000 else f"{v:,.{digits}f}"
    return e(v)


def _get(d: dict | None, *path: str, default: object = None) -> object:
    node: object = d
    for p in path:
        if not isinstance(node, dict) or p not in node:
            return default
        node = node[p]
    return node


def _accel(run: dict) -> str:
    return str(_get(run, "accelerator", "name", default="?")).upper()


def accel_badge(run: dict) -> str:
    a = _accel(run)
    cls = "tcg" if a == "TCG" else "kvm" if a == "KVM" else "plain"
    return f'<span class="badge {cls}" title="{e(_get(run, "accelerator", "reason", default=""))}">{e(a)}</span>'


def _wrap_id(run_id: str) -> str:
    """A run id that may break after its date and time (20261121-042335-ring-4-...)."""
    m = re.match(r"^(\d{8}-\d{6})-(.+)$", run_id)
    return f"{e(m.group(1))}-<wbr>{e(m.group(2))}" if m else e(run_id)


def status_badge(status: str) -> str:
    cls = "ok" if status == "ok" else "warn" if status == "topology-mismatch" else "bad"
    return f'<span class="badge {cls}">{e(status)}</span>'


def table(head: list[str], rows: list[list[str]], cls: str = "", num_cols: tuple[int, ...] = ()) -> str:
    """Cells are already HTML; num_cols are right-aligned."""

    def cell(tag: str, i: int, v: str) -> str:
        c = ' class="num"' if i in num_cols else ""
        return f"<{tag}{c}>{v}</{tag}>"

    th = "".join(cell("th", i, h) for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>" for r in rows)
    c = f' class="{cls}"' if cls else ""
    return f'<div class="scroll"><table{c}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def kv_table(pairs: list[tuple[str, str]]) -> str:
    rows = "".join(f"<tr><th>{e(k)}</th><td>{v}</td></tr>" for k, v in pairs if v not in (None, ""))
    return f'<table class="kv">{rows}</table>'


def box(kind: str, title: str, items: list[str] | None = None, body: str = "") -> str:
    lis = "<ul>" + "".join(f"<li>{e(i)}</li>" for i in items) + "</ul>" if items else ""
    return f'<div class="box {kind}"><h4>{e(title)}</h4>{lis}{body}</div>'


def figure(svg_text: str, caption: str = "") -> str:
    cap = f"<figcaption>{caption}</figcaption>" if caption else ""
    return f"<figure>{svg_text}{cap}</figure>"


# --- banners and summary -------------------------------------------------------


def banners(report: dict) -> str:
    runs = report.get("runs", [])
    out = []
    tcg = [r for r in runs if _accel(r) == "TCG"]
    if tcg:
        reason = _get(tcg[0], "accelerator", "reason", default="") or ""
        out.append(
            '<div class="banner tcg" id="accel-banner"><span class="tag">TCG</span><div>'
            f"<p><strong>{len(tcg)} of {len(runs)} run{'s' if len(runs) != 1 else ''} ran under TCG software "
            "emulation, not KVM.</strong> Guest CPUs are emulated: boot times and workload throughput are many "
            "times slower than on hardware and noisy. Read NUMA-balancing behaviour (events, migrations, "
            "locality), not absolute speed.</p>"
            + (f'<p class="muted">{e(reason)}</p>' if reason else "")
            + "</div></div>"
        )
    elif runs and all(_accel(r) == "KVM" for r in runs):
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
    damaged = [r for r in runs if _get(r, "metrics", "trace_problems") and r.get("status") == "ok"]
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


def summary(report: dict) -> str:
    runs = report.get("runs", [])
    if not runs:
        return '<p class="muted">No runs.</p>'
    topos = {str(_get(r, "topology", "name")) for r in runs}
    loads = {str(_get(r, "workload", "name")) for r in runs}
    # Columns that are the same for every run are said once above the table instead.
    cols: list[tuple[str, str, object]] = [
        (
            "run",
            "",
            lambda r: (
                f'<a href="#{anchor(r["run_id"])}">{_wrap_id(r["run_id"])}</a>'
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
                    if _get(r, "metrics", "trace_problems") and r.get("status") == "ok"
                    else ""
                )
            ),
        ),
        ("accel", "", accel_badge),
    ]
    if len(topos) > 1:
        cols.append(("topology", "", lambda r: e(_get(r, "topology", "name"))))
    cols.append(("kernel / group", "", lambda r: e(r.get("group") or _get(r, "kernel", "name"))))
    if len(loads) > 1:
        cols.append(("workload", "", lambda r: e(_get(r, "workload", "name"))))

    def ev(key: str):
        return lambda r: num((_get(r, "metrics", "events", default={}) or {}).get(key))

    def lost(r: dict) -> str:
        v = _get(r, "metrics", "lost_events")
        return num(v) if not v else f'<span class="badge bad">{num(v)}</span>'

    def vm(key: str):
        return lambda r: num((_get(r, "metrics", "vmstat", default={}) or {}).get(key))

    def hint_local(r: dict) -> str:
        v = _get(r, "metrics", "vmstat", default={}) or {}
        if v and not v.get("numa_hint_faults"):
            return '<span class="muted" title="no NUMA hint faults: the percentage is vacuous">no faults</span>'
        return percent(v["hint_local_pct"], 2) if v.get("hint_local_pct") is not None else num(None)

    num_cols = [
        ("boot (s)", "", lambda r: num(_get(r, "timings", "boot_s"))),
        ("GB/s", "", lambda r: num(_get(r, "workload", "result", "gbps"))),
        ("move", "trace events", ev("sched_move_numa")),
        ("swap", "trace events", ev("sched_swap_numa")),
        ("stick", "trace events", ev("sched_stick_numa")),
        ("migrate", "trace events", ev("mm_migrate_pages")),
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
        '<p class="muted">move / swap / stick / migrate: sched_move_numa, sched_swap_numa, sched_stick_numa and '
        "mm_migrate_pages events in the trace; lost: events the tracer dropped. Pages migrated and hint local % "
        "(numa_hint_faults_local / numa_hint_faults) from /proc/vmstat over the run.</p>"
    )
    return "".join(f"<p>{x}</p>" for x in intro) + tbl + legend


# --- topology ---------------------------------------------------------------------------


def _topo_key(t: dict) -> str:
    return json.dumps([t.get("name"), t.get("distances"), t.get("node_cpus")])


def _edges(t: dict) -> list[tuple[int, int]]:
    """The spec's links, or the nearest-neighbour pairs of the SLIT (as lab.topology.render does)."""
    d = t.get("distances") or []
    if t.get("links"):
        return sorted({(min(a, b), max(a, b)) for a, b in t["links"]})
    n = len(d)
    edges = []
    for i in range(n):
        remote = [d[i][j] for j in range(n) if j != i]
        if remote:
            edges += [(min(i, j), max(i, j)) for j in range(n) if j != i and d[i][j] == min(remote)]
    return sorted(set(edges))


def topology_svg(t: dict) -> str:
    d = t.get("distances") or []
    n = len(d)
    node_cpus = t.get("node_cpus") or [[] for _ in range(n)]
    mem = t.get("memory_mib") or [None] * n
    nodes, dashed = [], []
    for i in range(n):
        cpus = node_cpus[i] if i < len(node_cpus) else []
        lines = [f"node {i}", f"CPUs {format_cpulist(cpus)}" if cpus else "no CPUs"]
        if i < len(mem) and mem[i] is not None:
            lines.append(f"{mem[i]} MiB")
        nodes.append(lines)
        dashed.append(not cpus)

    def label(a: int, b: int) -> str:
        return str(d[a][b]) if d[a][b] == d[b][a] else f"{d[a][b]}/{d[b][a]}"

    near = _edges(t)
    edges = [(a, b, label(a, b)) for a, b in near]
    # A SLIT without links: the nearest pairs are the edges; on small machines the other pairs are drawn faint.
    faint = []
    if not t.get("links") and n <= 6:
        faint = [(a, b, label(a, b)) for a in range(n) for b in range(a + 1, n) if (a, b) not in near]
    return svg.topology_graph(nodes, edges, dashed=dashed, faint=faint)


def distance_table(d: list[list[int]]) -> str:
    n = len(d)
    values = sorted({v for row in d for v in row})
    hi = max(values) if values else 10
    head = "<tr><th>node</th>" + "".join(f"<th>{j}</th>" for j in range(n)) + "</tr>"
    rows = []
    for i in range(n):
        cells = []
        for j in range(n):
            v = d[i][j]
            if i == j:
                cells.append(f'<td class="local">{v}</td>')
            else:
                t = (v - 10) / (hi - 10) if hi > 10 else 0
                cells.append(f'<td style="background:{svg.mix("#eef3fd", "#f59e0b", 0.15 + 0.7 * t)}">{v}</td>')
        rows.append(f"<tr><th>{i}</th>{''.join(cells)}</tr>")
    return f'<table class="dist"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def kernel_view(kv: dict | None) -> tuple[str, str]:
    """(summary table, sched-domain levels table) of the predicted kernel view."""
    if not kv:
        return '<p class="muted">No predicted kernel view in the run record.</p>', ""
    pairs = [
        ("topology type", f"<strong>{e(kv.get('type'))}</strong>"),
        ("sched-domain levels", f"{e(kv.get('levels'))} ({e(kv.get('numa_levels'))} NUMA)"),
        ("distinct distances", e(", ".join(str(x) for x in kv.get("distinct_distances", [])))),
        ("reclaim distance", e(kv.get("reclaim_distance"))),
        ("levels beyond it", e(", ".join(str(x) for x in kv.get("levels_beyond_reclaim_distance", []))) or "none"),
        ("CPU-less nodes", e(", ".join(str(x) for x in kv.get("cpuless_nodes", []))) or "none"),
    ]
    out = ""
    levels = kv.get("level_detail") or []
    if levels:
        nodes = sorted({k for lv in levels for k in (lv.get("span_cpus") or {})}, key=lambda s: int(s))
        head = ["level", "name", "distance", "wake affine"] + [f"node {k} spans CPUs" for k in nodes]
        rows = []
        for lv in levels:
            spans = lv.get("span_cpus") or {}
            vis = lv.get("visible") or {}
            rows.append(
                [
                    e(lv.get("level")),
                    e(lv.get("name")),
                    e(lv.get("distance")),
                    "yes" if lv.get("wake_affine") else '<span class="badge warn">no</span>',
                ]
                + [
                    f'<span class="mono">{e(spans.get(k, ""))}</span>'
                    + ("" if vis.get(k, True) else " <small>(degenerate)</small>")
                    for k in nodes
                ]
            )
        out = "<h4>Predicted sched-domain levels</h4>" + table(head, rows, "small")
    return kv_table(pairs), out


def placement_html(p: dict) -> str:
    if not p:
        return '<p class="muted">No placement recorded.</p>'
    mem = p.get("memory_host_nodes") or []
    pins = p.get("vcpu_pins") or []
    pinned = p.get("pinned") or {}
    parts = []
    if mem:
        parts.append(
            "<h4>Guest node → host node (memory)</h4>"
            + table(["guest node"] + [str(i) for i in range(len(mem))], [["host node"] + [e(h) for h in mem]], "dist")
        )
    if pins:
        actual = [pinned.get(str(i), pinned.get(i)) for i in range(len(pins))]
        rows = [["planned host CPUs"] + [e(c) for c in pins]]
        if pinned:
            rows.append(["pinned"] + [e(a) if a is not None else "–" for a in actual])
        title = f"<h4>vCPU → host CPU pins ({e(p.get('pinning', 'cpu'))})</h4>"
        parts.append(title + table(["vCPU"] + [str(i) for i in range(len(pins))], rows, "dist"))
    backing = p.get("backing") or {}
    kv = [
        ("host NUMA nodes", e(p.get("host_nodes"))),
        ("memory backing", e(", ".join(f"{k}={v}" for k, v in backing.items()))),
    ]
    parts.append(kv_table(kv))
    if p.get("pin_error"):
        parts.append(box("bad", "vCPU pinning failed", [str(p["pin_error"])]))
    if p.get("warnings"):
        parts.append(box("warn", "Placement warnings", [str(w) for w in p["warnings"]]))
    if p.get("notes"):
        parts.append(box("info", "Placement notes", [str(n) for n in p["notes"]]))
    return "".join(parts)


def topology_section(report: dict) -> str:
    runs = report.get("runs", [])
    if not runs:
        return '<p class="muted">No runs.</p>'
    by_topo: dict[str, list[dict]] = {}
    for r in runs:
        by_topo.setdefault(_topo_key(r.get("topology") or {}), []).append(r)
    out = []
    for group in by_topo.values():
        t = group[0].get("topology") or {}
        d = t.get("distances") or []
        src = (
            "the links of the spec"
            if t.get("links")
            else "the nearest pairs in the SLIT (the spec has no links; farther pairs dashed)"
        )
        out.append(f"<h3>{e(t.get('name'))}</h3>")
        if t.get("description"):
            out.append(f"<p>{e(t['description'])}</p>")
        out.append('<div class="grid">')
        out.append(
            figure(
                topology_svg(t),
                f"Nodes with their CPUs and memory; edges are {e(src)}, labelled with their SLIT distance.",
            )
        )
        out.append(
            "<div><h4>Distance matrix (SLIT)</h4>"
            + distance_table(d)
            + f'<p class="muted">{e(t.get("total_cpus"))} CPUs, {e(t.get("threads", 1))} thread(s) per core, '
            f"{num(t.get('total_memory_mib'))} MiB.</p></div>"
        )
        kv_summary, kv_levels = kernel_view(t.get("kernel_view"))
        out.append(f"<div><h4>Predicted kernel view</h4>{kv_summary}</div>")
        out.append("</div>")
        out.append(kv_levels)
        # Guest verification.
        rows = []
        for r in group:
            ok = r.get("guest_topology_ok")
            probs = r.get("guest_topology_problems") or []
            complaints = r.get("guest_kernel_complaints") or []
            verdict = (
                '<span class="badge warn">matches, kernel complained</span>'
                if ok and complaints
                else '<span class="badge ok">guest matches</span>'
                if ok
                else '<span class="badge bad">mismatch</span>'
                if probs or ok is False
                else '<span class="badge warn">not checked</span>'
            )
            probs = [*probs, *(f"kernel: {complaint_line(c)}" for c in complaints)]
            rows.append(
                [f'<a href="#{anchor(r["run_id"])}">{e(r["run_id"])}</a>', verdict, e("; ".join(map(str, probs)))]
            )
        out.append("<h4>Guest topology verification</h4>")
        out.append(
            '<p class="muted">The guest\'s own /sys node list, distances and sched domains, compared with the '
            "spec and the prediction.</p>"
        )
        out.append(table(["run", "verdict", "problems"], rows))
        # Host placement, once per distinct placement.
        places: dict[str, list[dict]] = {}
        for r in group:
            places.setdefault(json.dumps(r.get("placement") or {}, sort_keys=True), []).append(r)
        for p_runs in places.values():
            who = "all runs" if len(places) == 1 else ", ".join(r["run_id"] for r in p_runs)
            out.append(f"<h3>Host placement <small>({e(who)})</small></h3>")
            out.append(placement_html(p_runs[0].get("placement") or {}))
    return "\n".join(out)


# --- one run --------------------------------------------------------------------------


def _metadata(r: dict) -> str:
    k = r.get("kernel") or {}
    w = r.get("workload") or {}
    res = w.get("result") or {}
    s = r.get("settings") or {}
    t = r.get("timings") or {}
    b = r.get("backend") or {}
    patches = k.get("patches") or []
    if isinstance(patches, str):
        patches = [patches]
    kernel = kv_table(
        [
            ("name", f"<strong>{e(k.get('name'))}</strong>"),
            ("release", e(k.get("release"))),
            ("guest uname -r", e(k.get("guest_release"))),
            ("build id", f'<span class="mono">{e(k.get("build_id"))}</span>' if k.get("build_id") else ""),
            (
                "image sha256",
                f'<span class="mono">{e(str(k.get("sha256", ""))[:16])}…</span>' if k.get("sha256") else "",
            ),
            ("boot protocol", e(k.get("boot_protocol"))),
            (
                "patches",
                "<ul>" + "".join(f"<li>{e(p if isinstance(p, str) else json.dumps(p))}</li>" for p in patches) + "</ul>"
                if patches
                else "",
            ),
            ("image", f'<span class="mono">{e(k.get("image"))}</span>' if k.get("image") else ""),
        ]
    )
    result_bits = ", ".join(
        f"{key} {num(res[key])}"
        for key in ("elapsed_s", "gbps", "loops", "threads", "processes", "converged_s")
        if res.get(key) is not None
    )
    workload = kv_table(
        [
            ("name", f"<strong>{e(w.get('name'))}</strong>"),
            ("command", f'<span class="mono">{e(w.get("command"))}</span>'),
            ("result", e(result_bits) if result_bits else '<span class="muted">no parsed result</span>'),
            ("exit code", e(w.get("exit_code"))),
        ]
    )
    nb = s.get("numa_balancing")
    nb_txt = {"0": "off (0)", "1": "on (1)", "2": "tiering (2)", None: "kernel default"}.get(nb, str(nb))
    knobs = s.get("knobs") or {}
    settings = kv_table(
        [
            ("numa_balancing", f"<strong>{e(nb_txt)}</strong>"),
            (
                "knobs requested",
                "<br>".join(f'<span class="mono">{e(a)}={e(v)}</span>' for a, v in knobs.items()) or "kernel defaults",
            ),
            ("read back", "<br>".join(f'<span class="mono">{e(x)}</span>' for x in s.get("readback") or [])),
            ("trace events", ", ".join(f'<span class="mono">{e(x)}</span>' for x in s.get("trace_events") or [])),
            ("trace buffer", f"{e(s.get('trace_buffer_kb'))} KiB/CPU" if s.get("trace_buffer_kb") else ""),
        ]
    )
    timings = kv_table(
        [
            (
                "accelerator",
                accel_badge(r)
                + (
                    f" <small>{e(_get(r, 'accelerator', 'reason'))}</small>" if _get(r, "accelerator", "reason") else ""
                ),
            ),
            ("boot", f"{num(t.get('boot_s'))} s" if t.get("boot_s") is not None else ""),
            ("workload", f"{num(t.get('workload_s'))} s" if t.get("workload_s") is not None else ""),
            ("VM total", f"{num(t.get('vm_s'))} s" if t.get("vm_s") is not None else ""),
            ("backend", e(" ".join(str(x) for x in (b.get("name"), b.get("version")) if x))),
        ]
    )
    return (
        f'<div class="meta"><div><h4>Kernel</h4>{kernel}</div><div><h4>Workload</h4>{workload}</div>'
        f"<div><h4>Settings</h4>{settings}</div><div><h4>Machine</h4>{timings}</div></div>"
    )


def _files(r: dict) -> str:
    links = [f'<li><a href="{e(path)}">{e(name)}</a></li>' for name, path in (r.get("files") or {}).items()]
    if r.get("perfetto"):
        links.insert(
            0,
            f'<li><a class="perfetto" href="{e(r["perfetto"])}" title="Open it in ui.perfetto.dev '
            f'(Open trace file) or chrome://tracing">Perfetto timeline (JSON)</a></li>',
        )
    if not links:
        return '<p class="muted">No raw files next to this report.</p>'
    hints = []
    if "trace.dat" in (r.get("files") or {}):
        hints.append("trace.dat opens in KernelShark")
    if r.get("perfetto"):
        hints.append(
            "the Perfetto JSON puts each NUMA event on its CPU's track, with an arrow to the destination CPU "
            "(open it in ui.perfetto.dev or chrome://tracing)"
        )
    text = "; ".join(hints)
    hint = f'<p class="muted">{e(text[:1].upper() + text[1:])}.</p>' if hints else ""
    return f'<ul class="files">{"".join(links)}</ul>{hint}'


def _fold_table(title: str, node_moves: dict, key: str, axis: str) -> str:
    vals = sorted({k for kind in KINDS for k in (_get(node_moves, kind, key) or {})}, key=lambda s: int(s))
    if not vals:
        return ""
    rows = [[e(kind)] + [num((_get(node_moves, kind, key) or {}).get(v, 0)) for v in vals] for kind in KINDS]
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
        and not any(ev.values())
        and not vm.get("numa_hint_faults")
        and not vm.get("numa_pages_migrated")
        and not vm.get("numa_pte_updates")
    )


def numa_section(r: dict) -> str:
    m = r.get("metrics") or {}
    out = []
    if not m:
        return ""
    if is_quiet(m):
        nb = _get(r, "settings", "numa_balancing")
        why = " (numa_balancing = 0: expected)" if nb == "0" else " (unexpected with NUMA balancing on)"
        return box(
            "ok" if nb == "0" else "warn",
            "No NUMA-balancing activity" + why,
            [
                "no sched_move_numa, sched_swap_numa, sched_stick_numa or mm_migrate_pages events in the trace",
                "no NUMA PTE updates, hint faults or page migrations in /proc/vmstat",
            ],
        )
    # A trace that could not be read at all: say so instead of drawing its zeros.
    if m.get("numa") and m.get("trace_problems") and not any((m.get("events") or {}).values()):
        out.append(
            box(
                "warn",
                "No trace data: the NUMA events of this run could not be read",
                [
                    "the pictures of the trace (node matrices, stick reasons, event rates) are left out; "
                    "/proc/vmstat below is unaffected"
                ],
            )
        )
        numa = {}
    else:
        numa = m.get("numa") or {}
        if not numa:
            out.append('<p class="muted">No NUMA-balancing trace analysis for this run.</p>')
        elif m.get("trace_problems"):
            out.append('<p class="muted">The trace is incomplete (see above): the counts below are lower bounds.</p>')
    n = len(_get(r, "topology", "distances", default=[]) or [])
    labels = [str(i) for i in range(n)]
    nm = numa.get("node_moves")
    if nm:
        figs = []
        for kind in KINDS:
            mat = _get(nm, kind, "matrix")
            if mat is None:
                continue
            extra = _get(nm, kind, "without_destination") or 0
            cap = f"{KIND_EVENT[kind]}: src_nid → dst_nid"
            if extra:
                cap += f"; {num(extra)} without a destination node (not in the matrix)"
            figs.append(figure(svg.heatmap(mat, labels, title=kind, color=KIND_COLOR[kind]), e(cap)))
        folds = _fold_table("by SLIT distance", nm, "by_distance", "distance") + _fold_table(
            "by hops", nm, "by_hops", "hops"
        )
        out.append("<h4>Source → destination node</h4>")
        out.append(f'<div class="grid">{"".join(figs)}<div class="folds">{folds}</div></div>')
    side = []
    sr = numa.get("stick_reasons")
    if sr is not None:
        items = [(STICK_REASONS.get(k, k), v, KIND_COLOR["stick"]) for k, v in sr.items()]
        side.append(
            "<div><h4>Stick reasons</h4>"
            + figure(svg.bar_chart(items, width=420), "Why sched_stick_numa kept a task where it was.")
            + "</div>"
        )
    sg = numa.get("swap_groups")
    if sg is not None:
        side.append(
            "<div><h4>Swaps and NUMA groups</h4>"
            + kv_table(
                [("same group (ngid)", num(sg.get("same_group"))), ("across groups", num(sg.get("cross_group")))]
            )
            + "</div>"
        )
    mp = numa.get("migrate_pages")
    if mp is not None:
        rows = [
            [e(reason)]
            + [num(c.get(f, 0)) for f in ("calls", "succeeded", "failed", "thp_succeeded", "thp_failed", "thp_split")]
            for reason, c in mp.items()
        ]
        side.append(
            "<div><h4>mm_migrate_pages by reason</h4>"
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
    vt = _vmstat_table(m)
    if vt:
        side.append(vt)
    lb = numa.get("cross_node_lb")
    if lb is not None:
        side.append(
            "<div><h4>Load-balancer migrations</h4>"
            + kv_table(
                [("sched_migrate_task", num(lb.get("migrations"))), ("crossing nodes", num(lb.get("cross_node")))]
            )
            + "</div>"
        )
    if side:
        out.append(f'<div class="grid">{"".join(side)}</div>')
    charts = []
    series = _get(numa, "rates", "series") or {}
    vs = m.get("vmstat_series") or {}
    bin_s = _get(numa, "rates", "bin_s", default=1) or 1
    length = max((len(v) for v in series.values()), default=0)
    rx = [i * bin_s for i in range(length)]
    # The same x axis (seconds since the workload started) for every chart of the run, with its end marked.
    x_range = (0.0, max([*rx, *(vs.get("t") or []), 1]))
    duration = _get(r, "workload", "duration_s")
    marks = [(float(duration), "workload end")] if isinstance(duration, (int, float)) else []
    common = {"x_label": "s since workload start", "x_range": x_range, "marks": marks}
    if series:
        sched = {k: series[k] for k in KINDS if k in series}
        charts.append(
            figure(
                svg.line_chart(rx, sched, title="NUMA scheduler events per second", colors=KIND_COLOR, **common),
                "sched_move_numa / sched_swap_numa / sched_stick_numa per second.",
            )
        )
        if "migrate_pages" in series:
            charts.append(
                figure(
                    svg.line_chart(
                        rx,
                        {"calls": series["migrate_pages"]},
                        title="mm_migrate_pages calls per second",
                        colors={"calls": svg.KIND_COLORS["migrate_pages"]},
                        **common,
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
                    y_max=100,
                    colors={"hint local %": "#0891b2"},
                    **common,
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
                    colors={"pages": svg.KIND_COLORS["migrate_pages"]},
                    **common,
                ),
                "numa_pages_migrated from /proc/vmstat, since the workload started.",
            )
        )
    if charts:
        out.append("<h4>Over time</h4>")
        out.append(f'<div class="grid">{"".join(charts)}</div>')
    pt = numa.get("per_task") or {}
    if pt.get("processes") or pt.get("tasks"):

        def rows_of(items: list[dict]) -> list[list[str]]:
            return [[e(i.get("id")), e(i.get("comm"))] + [num(i.get(k, 0)) for k in KINDS] for i in items]

        out.append(
            "<details><summary>Per process and per task counts</summary>"
            '<div class="grid"><div><h4>processes (tgid)</h4>'
            + table(["tgid", "comm", *KINDS], rows_of(pt.get("processes", [])), "small", (2, 3, 4))
            + "</div><div><h4>tasks (pid)</h4>"
            + table(["pid", "comm", *KINDS], rows_of(pt.get("tasks", [])), "small", (2, 3, 4))
            + "</div></div></details>"
        )
    skipped = numa.get("skipped") or {}
    if skipped:
        out.append(
            '<p class="muted">Not analysed: ' + "; ".join(f"{e(k)} ({e(v)})" for k, v in skipped.items()) + ".</p>"
        )
    return "".join(out)


def _vmstat_table(m: dict) -> str:
    rows = m.get("mmtests") or {}
    if not rows:
        return ""
    return (
        "<div><h4>vmstat (mmtests rows)</h4>"
        + table(["", "value"], [[e(k), percent(v, 2) if k.endswith("percent") else num(v)] for k, v in rows.items()],
                "small", (1,))
        + "</div>"
    )


def _facts(r: dict) -> str:
    """One line with what a reader looks for first."""
    m = r.get("metrics") or {}
    nb = _get(r, "settings", "numa_balancing")
    bits = [
        f"kernel <strong>{e(_get(r, 'kernel', 'name'))}</strong> {e(_get(r, 'kernel', 'guest_release') or '')}",
        "numa_balancing <strong>"
        + {"0": "off", "1": "on", "2": "tiering", None: "default"}.get(nb, e(nb))
        + "</strong>",
        f"{e(_get(r, 'topology', 'name'))} / {e(_get(r, 'workload', 'name'))}",
    ]
    gbps = _get(r, "workload", "result", "gbps")
    if gbps is not None:
        bits.append(f"<strong>{num(gbps)} GB/s</strong>")
    vm = m.get("vmstat") or {}
    if vm:
        bits.append(f"{num(vm.get('numa_pages_migrated'))} pages migrated")
        if vm.get("numa_hint_faults"):
            bits.append(f"hint local {percent(vm.get('hint_local_pct'), 2)} %")
        else:
            bits.append("no NUMA hint faults")
    if _get(r, "timings", "boot_s") is not None:
        bits.append(f"boot {num(_get(r, 'timings', 'boot_s'))} s")
    lost = m.get("lost_events")
    if lost == 0:
        bits.append("no trace events lost")
    return '<p class="facts">' + " · ".join(bits) + "</p>"


def run_section(r: dict) -> str:
    rid = r.get("run_id", "?")
    status = r.get("status", "?")
    m = r.get("metrics") or {}
    head = (
        f'<h3><span class="id">{e(rid)}</span> {status_badge(status)} {accel_badge(r)}'
        f' <span class="badge plain">{e(r.get("group") or "")}</span>'
        + (f" <small>{e(r.get('label'))}</small>" if r.get("label") else "")
        + "</h3>"
    )
    parts = [head]
    if status != "ok":
        tail = r.get("console_tail") or []
        if isinstance(tail, list):
            tail = "\n".join(str(x) for x in tail)
        body = f"<p><strong>{e(status)}</strong>: {e(r.get('reason', ''))}</p>"
        if m.get("trace_problems"):
            body += f"<p>Trace: {e('; '.join(map(str, m['trace_problems'])))}.</p>"
        if tail:
            body += f"<p>Last lines of the guest console:</p><pre>{e(tail)}</pre>"
        else:
            body += "<p>The guest console is in console.log (raw files below).</p>"
        parts.append(f'<div class="box bad"><h4>The run did not finish normally</h4>{body}</div>')
    problems = m.get("trace_problems") or []
    if problems and status == "ok":
        parts.append(box("warn", "Trace problems: this part of the data is incomplete", [str(p) for p in problems]))
    lost = m.get("lost_events")
    if lost:
        what = ["the tracer's ring buffer overflowed or dropped events; counts below are lower bounds"]
        if r.get("trace_incomplete"):
            what.append("more than 1% of the records are missing: the A/B tables leave this run out")
        parts.append(box("bad" if r.get("trace_incomplete") else "warn", f"{describe_lost(m)}", what))
    complaints = r.get("guest_kernel_complaints") or []
    if complaints:
        parts.append(
            box(
                "warn",
                "The guest kernel complained about its topology at boot",
                [complaint_line(c) for c in complaints],
            )
        )
    parts.append(_facts(r))
    parts.append(_files(r))
    parts.append(access_section(r))
    if status == "ok" or m.get("numa"):
        parts.append(numa_section(r))
    parts.append(
        "<details open><summary>Run metadata: kernel, workload, settings, machine</summary>"
        + _metadata(r)
        + "</details>"
    )
    return f'<article class="runcard" id="{anchor(rid)}">{"".join(parts)}</article>'


def runs_section(report: dict) -> str:
    runs = report.get("runs", [])
    if not runs:
        return '<p class="muted">No runs.</p>'
    return "\n".join(run_section(r) for r in runs)


# --- comparisons ----------------------------------------------------------------------


def _values_by_run(report: dict) -> dict[str, dict[str, float]]:
    """Metric values per run directory name (the names Comparison lists), from the report's re-analysis."""
    out = {}
    for r in report.get("runs", []):
        pseudo = {
            "metrics": r.get("metrics") or {},
            "workload": r.get("workload") or {},
            "timings": r.get("timings") or {},
        }
        vals = metric_values(pseudo)
        out[Path(r.get("path") or r["run_id"]).name] = vals
        out.setdefault(r["run_id"], vals)
    return out


def _verdict_text(row: Row) -> str:
    v = row.verdict()
    return {
        "better": '<span class="verdict-better">significantly better</span>',
        "worse": '<span class="verdict-worse">significantly worse</span>',
        "same": "no significant difference",
        "unknown": "significance cannot be judged (fewer than 3 runs a side)",
    }[v]


def compare_plots(c: Comparison, values: dict[str, dict[str, float]]) -> str:
    figs = []
    for key in KEY_METRICS:
        row = c.row(key)
        if row is None:
            continue
        metric = METRIC_KEYS[key]
        base = [values[r][key] for r in c.base_runs if key in values.get(r, {})]
        new = [values[r][key] for r in c.new_runs if key in values.get(r, {})]
        groups = [(c.base_label, base, BASE_COLOR), (c.new_label, new, NEW_COLOR)]
        title = f"{metric.label}" + (f" ({metric.unit})" if metric.unit else "")
        # The same mean as the table's mean row (Hmean for rates, Amean otherwise).
        plot = svg.dot_plot(
            groups, title=title, note=f"{metric.better} is better", width=380, harmonic=row.mean_name == "Hmean"
        )
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
        "are coloured green (better) or red (worse).</p>"
    ]
    for c in comparisons:
        # to_html lists the excluded runs (status not ok, or an incomplete trace) under its notes.
        out.append(
            f'<div class="card ab-layout"><div class="ab-table">{to_html(c)}</div>'
            f'<aside class="ab-plots">{compare_plots(c, values)}</aside></div>'
        )
    return "\n".join(out)


# --- the page --------------------------------------------------------------------------


def render_html(report: dict, comparisons: list[Comparison]) -> str:
    runs = report.get("runs", [])
    topos = sorted({str(_get(r, "topology", "name")) for r in runs})
    loads = sorted({str(_get(r, "workload", "name")) for r in runs})
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
