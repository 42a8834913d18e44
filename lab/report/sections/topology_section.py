"""The topology section: per distinct topology its graph, SLIT, predicted kernel view, the guests' own
verification, and the host placement of its runs."""

from __future__ import annotations

import json

from lab.analysis.kernel_complaints import summary as complaint_line
from lab.cpulist import format_cpulist
from lab.report import svg, svg_topology
from lab.report.colors import DISTANCE_FAR, DISTANCE_NEAR
from lab.report.html_parts import anchor, box, e, figure, kv_table, num, table
from lab.topology.pictures import render


def _topo_key(t: dict) -> str:
    return json.dumps([t.get("name"), t.get("distances"), t.get("node_cpus")])


def topology_svg(t: dict) -> str:
    """The topology as a graph: the edges of ``lab.topology.pictures.render`` (the spec's links, or the SLIT's
    nearest pairs, with the other pairs drawn faint on small machines)."""
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
    near = render.edges(d, t.get("links"))
    edges = [(a, b, render.edge_label(d, a, b)) for a, b in near]
    # A SLIT without links: the nearest pairs are the edges; on small machines the other pairs are drawn faint.
    faint = []
    if not t.get("links") and n <= 6:
        faint = [(a, b, render.edge_label(d, a, b)) for a in range(n) for b in range(a + 1, n) if (a, b) not in near]
    return svg_topology.topology_graph(nodes, edges, dashed=dashed, faint=faint)


def distance_table(d: list[list[int]]) -> str:
    """The SLIT as an HTML table, remote entries shaded by how far they are (``render.distance_grid``)."""
    n = len(d)
    head = "<tr><th>node</th>" + "".join(f"<th>{j}</th>" for j in range(n)) + "</tr>"
    rows = []
    for i, row in enumerate(render.distance_grid(d)):
        cells = [
            f'<td class="local">{c.value}</td>'
            if c.far is None
            else f'<td style="background:{svg.mix(DISTANCE_NEAR, DISTANCE_FAR, 0.15 + 0.7 * c.far)}">{c.value}</td>'
            for c in row
        ]
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
    dmap = p.get("distance_map") or []
    if dmap and p.get("host_nodes", 1) > 1:
        rows = [
            [
                f"{d['guest_nodes'][0]}–{d['guest_nodes'][1]}",
                e(d["guest_distance"]),
                f"{d['host_nodes'][0]}–{d['host_nodes'][1]}",
                e(d["host_distance"]) if d.get("host_distance") is not None else "?",
                "emulated: local on the host" if d["host_nodes"][0] == d["host_nodes"][1] else "real",
            ]
            for d in dmap
        ]
        parts.append(
            "<h4>Guest distances on host distances</h4>"
            + table(["guest nodes", "guest SLIT", "host nodes", "host SLIT", "remote memory"], rows, "small")
        )
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


def _machine(t: dict) -> list[str]:
    """The topology itself: its graph, its SLIT and the kernel's view of it as predicted."""
    d = t.get("distances") or []
    src = (
        "the links of the spec"
        if t.get("links")
        else "the nearest pairs in the SLIT (the spec has no links; farther pairs dashed)"
    )
    out = [f"<h3>{e(t.get('name'))}</h3>"]
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
    return out


def _guest_verdict(r: dict) -> str:
    ok = r.get("guest_topology_ok")
    if ok and r.get("guest_kernel_complaints"):
        return '<span class="badge warn">matches, kernel complained</span>'
    if ok:
        return '<span class="badge ok">guest matches</span>'
    if r.get("guest_topology_problems") or ok is False:
        return '<span class="badge bad">mismatch</span>'
    return '<span class="badge warn">not checked</span>'


def _guest_verification(runs: list[dict]) -> list[str]:
    """Per run: did the guest see the topology it was given (its /sys and sched domains), and did its
    kernel complain at boot."""
    rows = []
    for r in runs:
        probs = [
            *(r.get("guest_topology_problems") or []),
            *(f"kernel: {complaint_line(c)}" for c in r.get("guest_kernel_complaints") or []),
        ]
        rows.append(
            [f'<a href="#{anchor(r["run_id"])}">{e(r["run_id"])}</a>', _guest_verdict(r), e("; ".join(map(str, probs)))]
        )
    return [
        "<h4>Guest topology verification</h4>",
        '<p class="muted">The guest\'s own /sys node list, distances and sched domains, compared with the '
        "spec and the prediction.</p>",
        table(["run", "verdict", "problems"], rows),
    ]


def _plan_key(p: dict) -> str:
    """A placement without what each run observed of it (its check), to group runs by plan."""
    return json.dumps({k: v for k, v in p.items() if k != "check"}, sort_keys=True)


def _placement_held(runs: list[dict]) -> list[str]:
    """Per run: whether its placement held, read from outside QEMU over the workload window."""
    rows = []
    for r in runs:
        c = (r.get("placement") or {}).get("check")
        if not c:
            continue
        held = c.get("held")
        badge = ('<span class="badge ok">held</span>' if held else '<span class="badge bad">broken</span>'
                 if held is False else '<span class="badge warn">not sampled</span>')  # fmt: skip
        host = c.get("host") or {}
        load = "–".join(f"{v:.1f}" for v in host.get("load_1m") or [])
        problems = [*(c.get("problems") or []), *([c["failure"]] if c.get("failure") else [])]
        rows.append([f'<a href="#{anchor(r["run_id"])}">{e(r["run_id"])}</a>', badge, e(c.get("samples")),
                     e(load or "–"), e(host.get("steal_s", "–")), e("; ".join(problems))])  # fmt: skip
    if not rows:
        return []
    return [
        "<h4>Did the placement hold?</h4>",
        '<p class="muted">Read from outside QEMU at the workload\'s start and end and every few seconds between: '
        "each vCPU thread's affinity, and each guest node's memory per host node (numa_maps). "
        "A run whose placement broke is <code>placement-broken</code>, left out of compare, the matrix and "
        "bisect.</p>",
        table(["run", "placement", "samples", "host load (1 min)", "steal s", "problems"], rows),
    ]


def _host_placements(runs: list[dict]) -> list[str]:
    """The host placement, once per distinct plan among the runs, and whether each run's held."""
    places: dict[str, list[dict]] = {}
    for r in runs:
        places.setdefault(_plan_key(r.get("placement") or {}), []).append(r)
    out = []
    for p_runs in places.values():
        who = "all runs" if len(places) == 1 else ", ".join(r["run_id"] for r in p_runs)
        out.append(f"<h3>Host placement <small>({e(who)})</small></h3>")
        out.append(placement_html(p_runs[0].get("placement") or {}))
    return out + _placement_held(runs)


def topology_section(report: dict) -> str:
    """Per distinct topology among the runs: the machine, the guests' verification and the placements."""
    runs = report.get("runs", [])
    if not runs:
        return '<p class="muted">No runs.</p>'
    by_topo: dict[str, list[dict]] = {}
    for r in runs:
        by_topo.setdefault(_topo_key(r.get("topology") or {}), []).append(r)
    out = []
    for group in by_topo.values():
        out += _machine(group[0].get("topology") or {})
        out += _guest_verification(group)
        out += _host_placements(group)
    return "\n".join(out)
