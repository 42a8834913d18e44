"""The report's access-matrix part: a CPU-node x memory-node heatmap, a local-% timeline next to the
kernel's hint-local %, and the plugin's slowdown against plain runs of the same setup."""

from __future__ import annotations

from html import escape

from lab.analysis.access_counts import prefault_unfinished, slowdown
from lab.analysis.record import RunRecord
from lab.analysis.stats import hmean
from lab.report import svg
from lab.report.colors import ACCESS_LOCAL_COLOR, HINT_LOCAL_COLOR


def _setup(r: RunRecord) -> tuple:
    return (
        r.topology.name,
        r.workload_name,
        r.workload_duration_s,
        r.kernel_name,
        r.numa_balancing,
        tuple(sorted(r.knobs.items())),
    )


def _gbps(r: RunRecord) -> float | None:
    v = r.workload_result.get("gbps")
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


def slowdowns(runs: list[RunRecord]) -> dict[str, dict]:
    """Per instrumented run: lab.analysis.access_counts.slowdown of its GB/s against the plain (uninstrumented) ok
    runs of the same topology, workload, duration, kernel and settings in the same report. Runs that never
    finished numa01-thread-alloc's prefault are left out on both sides and said so."""
    plain: dict[tuple, list[float]] = {}
    plain_out: dict[tuple, int] = {}
    for r in runs:
        g = _gbps(r)
        if r.status == "ok" and r.access_matrix is None and g is not None:
            if prefault_unfinished(r.workload_result):
                plain_out[_setup(r)] = plain_out.get(_setup(r), 0) + 1
            else:
                plain.setdefault(_setup(r), []).append(g)
    out = {}
    for r in runs:
        if r.access_matrix is None:
            continue
        base, g = plain.get(_setup(r)) or [], _gbps(r)
        entry: dict = {"factor": None, "plain_runs": len(base), "plain_left_out": plain_out.get(_setup(r), 0)}
        stuck = prefault_unfinished(r.workload_result)
        if stuck:
            entry["prefault"] = stuck
        elif base and g:
            factor = slowdown(base, [g])
            entry |= {"factor": round(factor, 2) if factor else None, "plain_gbps_hmean": hmean(base)}
        out[r.run_id] = entry
    return out


def _step_hold(t: list[float], vs_t: list[float], vs_vals: list[float | None]) -> list[float | None]:
    """The vmstat interval value that covers each time in ``t`` (vmstat samples end their interval)."""
    out: list[float | None] = []
    for x in t:
        v = None
        for k, end in enumerate(vs_t):
            if end >= x:
                v = vs_vals[k] if k > 0 else None
                break
        out.append(v)
    return out


def access_section(r: dict) -> str:
    """HTML for one run entry of report.json; "" when the run counted no accesses."""
    a = r.get("access_matrix")
    if not a:
        return ""
    head = "<h4>Memory accesses by node (access-matrix plugin)</h4>"
    sample = (a.get("plugin") or {}).get("sample")
    sd = a.get("slowdown") or {}
    factor = sd.get("factor")
    left_out = sd.get("plain_left_out") or 0
    left = f"; {left_out} plain run(s) that never finished the prefault left out" if left_out else ""
    if factor:
        slow = (
            f"the plugin slowed the workload {factor:g}x (Hmean GB/s of {sd['plain_runs']} plain run"
            f"{'s' if sd['plain_runs'] != 1 else ''} of the same setup in this report / this run's GB/s{left})"
        )
    elif sd.get("prefault"):
        slow = f"slowdown not measured: this run's {sd['prefault']}, so its GB/s counts page faults"
    else:
        slow = f"slowdown not measured (no plain run of the same setup in this report{left})"
    if a.get("problem"):
        return head + f'<div class="box bad"><p>{escape(a["problem"])}</p></div>'
    matrix = a.get("matrix") or []
    labels = [str(i) for i in range(len(matrix))]
    lp = a.get("local_pct")
    facts = (
        f'<p class="facts">access-local <strong>{lp if lp is not None else "-"} %</strong> · '
        f"{a.get('accesses', 0):,} sampled accesses (every {sample}th) · {escape(slow)}. "
        "Instrumented runs are kept out of throughput comparisons.</p>"
    )
    heat = svg.heatmap(matrix, labels, title="accesses by node", row_axis="CPU node", col_axis="memory node")
    caption = (
        f"Sampled loads and stores in the workload window ({a.get('window_s', ['?', '?'])[0]} s to "
        f"{a.get('window_s', ['?', '?'])[1]} s); the diagonal is local."
    )
    figs = [f"<figure>{heat}<figcaption>{escape(caption)}</figcaption></figure>"]
    series = a.get("series") or []
    if series:
        t = [float(s["t"]) for s in series]
        lines: dict[str, list[float | None]] = {"access local %": [s.get("local_pct") for s in series]}
        vs = (r.get("metrics") or {}).get("vmstat_series") or {}
        if vs.get("t"):
            lines["hint local %"] = _step_hold(t, list(vs["t"]), list(vs.get("hint_local_pct") or []))
        chart = svg.line_chart(
            t,
            lines,
            title="local % over time",
            axes=svg.Axes(x_label="s since workload start", y_max=100),
            colors={"access local %": ACCESS_LOCAL_COLOR, "hint local %": HINT_LOCAL_COLOR},
        )
        figs.append(
            f"<figure>{chart}<figcaption>Access-local %: the plugin's sampled accesses per "
            f"{a.get('interval_ms', '?')} ms snapshot. Hint-local %: the kernel's numa_hint_faults_local / "
            "numa_hint_faults per vmstat interval (a sample of faults; gaps: no faults).</figcaption></figure>"
        )
    return head + facts + f'<div class="grid">{"".join(figs)}</div>'
