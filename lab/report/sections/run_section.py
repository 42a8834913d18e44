"""One run's card: its failure or trace warnings, the one-line facts, raw files, access matrix, NUMA
analysis and metadata. ``runs_section`` lists every run's card in the order given."""

from __future__ import annotations

import json

from lab.analysis.display import percent
from lab.analysis.kernel_complaints import summary as complaint_line
from lab.analysis.lost import describe as describe_lost
from lab.record_files import TRACE_DAT
from lab.report.html_parts import accel_badge, anchor, box, e, get, kv_table, num, status_badge
from lab.report.sections.access_section import access_section
from lab.report.sections.numa_section import numa_section


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
                + (f" <small>{e(get(r, 'accelerator', 'reason'))}</small>" if get(r, "accelerator", "reason") else ""),
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
    if TRACE_DAT in (r.get("files") or {}):
        hints.append("trace.dat opens in KernelShark")
    if r.get("perfetto"):
        hints.append(
            "the Perfetto JSON puts each NUMA event on its CPU's track, with an arrow to the destination CPU "
            "(open it in ui.perfetto.dev or chrome://tracing)"
        )
    text = "; ".join(hints)
    hint = f'<p class="muted">{e(text[:1].upper() + text[1:])}.</p>' if hints else ""
    return f'<ul class="files">{"".join(links)}</ul>{hint}'


def _facts(r: dict) -> str:
    """One line with what a reader looks for first."""
    m = r.get("metrics") or {}
    nb = get(r, "settings", "numa_balancing")
    bits = [
        f"kernel <strong>{e(get(r, 'kernel', 'name'))}</strong> {e(get(r, 'kernel', 'guest_release') or '')}",
        "numa_balancing <strong>"
        + {"0": "off", "1": "on", "2": "tiering", None: "default"}.get(nb, e(nb))
        + "</strong>",
        f"{e(get(r, 'topology', 'name'))} / {e(get(r, 'workload', 'name'))}",
    ]
    gbps = get(r, "workload", "result", "gbps")
    if gbps is not None:
        bits.append(f"<strong>{num(gbps)} GB/s</strong>")
    twin = (m.get("per_vcpu_s") or {}).get("gbps_per_vcpu_s")
    if twin is not None:
        bits.append(f"<strong>{num(twin)} GB per vCPU-second</strong>")
    vt = r.get("vcpu_time") or {}
    if vt.get("run_s") is not None:
        wait = f", {num(vt['wait_s'])} s waiting for a host CPU" if vt.get("wait_s") is not None else ""
        bits.append(f"vCPUs ran {num(vt['run_s'])} s{wait} in the {num(vt.get('window_s'))} s workload window")
    vm = m.get("vmstat") or {}
    if vm:
        bits.append(f"{num(vm.get('numa_pages_migrated'))} pages migrated")
        if vm.get("numa_hint_faults"):
            bits.append(f"hint local {percent(vm.get('hint_local_pct'), 2)} %")
        else:
            bits.append("no NUMA hint faults")
    if get(r, "timings", "boot_s") is not None:
        bits.append(f"boot {num(get(r, 'timings', 'boot_s'))} s")
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
    if notes := m.get("interface_notes"):
        parts.append(
            box("warn", "This kernel lacks what numalab reads: those figures are left out", list(map(str, notes)))
        )
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
