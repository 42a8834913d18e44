"""Who, where, when (issue 37): a run's per-task node residency (a task x time strip with the NUMA decisions on
it, each task's convergence and ping-pong), the same by LLC with wakeups against the waker's LLC (issue 48), and
its per-node memory over time; in an A/B, each over-time chart with A and B on one chart (medians per interval,
the runs' spread as a band).

The data come from lab.analysis.residency, lab.analysis.llc and lab.analysis.node_memory; a run without them
(older records, a trace without sched_migrate_task) says so and how to get them.
"""

from __future__ import annotations

import math
from statistics import median

from lab.analysis.compare import Comparison
from lab.analysis.display import percent
from lab.events import MIGRATE_TASK, MOVE_NUMA, PROCESS_EXIT, STICK_NUMA, SWAP_NUMA, WAKEUP, WAKEUP_NEW, WAKING
from lab.report import svg
from lab.report.colors import BASE_COLOR, EVENT_COLORS, NEW_COLOR, NODE_COLORS
from lab.report.html_parts import box, e, figure, get, num, table
from lab.report.svg_views import band_chart, task_strip

STRIP_TASKS = 48  # rows of the strip (the most moved tasks first)


def _residency(r: dict) -> str:
    res = get(r, "metrics", "numa", "residency")
    if not isinstance(res, dict):
        why = get(r, "metrics", "numa", "skipped", "residency")
        if not why:
            return ""
        return (
            f'<p class="muted">No per-task residency: {e(why)}. numalab traces {e(MIGRATE_TASK.full)} and '
            f"{e(WAKEUP_NEW.full)} by default; a run with --event or --no-trace has to ask for them.</p>"
        )
    tasks = res.get("tasks") or []
    if not tasks:
        return '<p class="muted">Per-task residency: no task of the workload in the trace.</p>'
    n = len(get(r, "topology", "distances", default=[]) or []) or 1
    shown = sorted(tasks, key=lambda t: (-(t.get("node_changes") or 0), t.get("pid", 0)))[:STRIP_TASKS]
    shown.sort(key=lambda t: t.get("pid", 0))
    rows = [{"label": f"{t.get('comm', '')[:12]} {t.get('pid')}", "segments": t.get("segments"),
             "marks": t.get("marks")} for t in shown]  # fmt: skip
    duration = get(r, "workload", "duration_s")
    marks = [(float(duration), "workload end")] if isinstance(duration, (int, float)) else []
    strip = task_strip(rows, n, float(res.get("window_s") or 1), NODE_COLORS, EVENT_COLORS,
                       title="Where each task ran", marks=marks)  # fmt: skip
    w = res.get("workload") or {}
    left = len(tasks) - len(shown) + (res.get("tasks_left_out") or 0)
    cap = (
        f"Each row is a task of the workload, coloured by the node of the CPU it was on ({e(MIGRATE_TASK.name)}, "
        f"{e(WAKEUP_NEW.name)}); ▲ {e(MOVE_NUMA.name)}, ◆ {e(SWAP_NUMA.name)}, × {e(STICK_NUMA.name)} on it."
        + (f" {left} more tasks not drawn." if left > 0 else "")
    )
    facts = table(
        ["tasks", "with a target", "converged", "convergence (s)", "ping-pongs", "of them NUMA moves",
         "node changes"],
        [[num(w.get("tasks")), num(w.get("targeted")), num(w.get("converged")), _na(w.get("convergence_s")),
          _na(w.get("pingpong")), _na(w.get("pingpong_numa")), num(w.get("node_changes"))]],
        "small", (0, 1, 2, 3, 4, 5, 6),
    )  # fmt: skip
    per_task = table(
        ["pid", "comm", "final node", "converged at (s)", "settled at (s)", "node changes", "within a node",
         "ping-pongs"],
        [[e(t.get("pid")), e(t.get("comm")), e(t.get("final_node")), _converged(t), _settled(t),
          num(t.get("node_changes")), _na(t.get("migrations_within_node")), num(t.get("pingpong"))] for t in tasks],
        "small", (0, 2, 3, 4, 5, 6, 7),
    )  # fmt: skip
    how = (
        "A task has a target when NUMA balancing decided about it (a move, swap or stick naming it); only such a "
        "task has a convergence (n/a for the others: with balancing off, every task); one that does not end on "
        "the node the last decision named for it did not converge. Else it has converged when, "
        f"from some interval ({num(res.get('bin_s'))} s) to its end, the node it spent most of each interval on "
        f"is its final node, for {num(res.get('settled_min_bins'))} intervals or more, at the time it last "
        "arrived there; the workload's convergence is the last such task's (one that never settled counts as "
        "the end of the trace). "
        f"A ping-pong is a task moved back to a node it left within {num(res.get('pingpong_window_s'))} s "
        "(n/a on one node)."
    )
    return (
        f'<div class="views residency" id="residency-{e(r.get("run_id"))}"><h4>Per-task node residency</h4>'
        f'{figure(strip, cap)}{facts}<p class="muted">{e(how)}</p>{_placement(res, w)}'
        f"<details><summary>Per task</summary>{per_task}</details></div>"
    )


SETTLE_WORDS = {"moving": "still moving", "stayed": "n/a (never changed node)", "short": "n/a (lived < 2 s)"}


def _settled(task: dict) -> str:
    """A task's settling time (lab.analysis.residency.settling), or why it has none; "-" in older records."""
    settle = task.get("settle")
    if settle is None:
        return "-"
    return num(task.get("settled_s")) if settle == "settled" else SETTLE_WORDS.get(str(settle), e(settle))


def _placement(res: dict, w: dict) -> str:
    """The figures of the generic events, any scheduler's: migrations by how far they went, and settling."""
    if "settled_s" not in w:
        return ""  # (a record analysed before they existed)
    facts = table(
        ["migrations between nodes", "within a node", "moved between nodes", "settled", "still moving",
         "settled by (s)"],
        [[_na(w.get("migrations_between_nodes")), _na(w.get("migrations_within_node")),
          num((w.get("settled") or 0) + (w.get("moving") or 0)), num(w.get("settled")), num(w.get("moving")),
          _na(w.get("settled_s"))]],
        "small", (0, 1, 2, 3, 4, 5),
    )  # fmt: skip
    how = (
        f"From the generic scheduler events only ({MIGRATE_TASK.name}, {WAKEUP_NEW.name}, {PROCESS_EXIT.name}), so "
        "for any scheduler, a sched_ext one too. A task that changed node has settled when, from some interval to its "
        f"end, the node it spent most of each interval on is the node it ended on, for "
        f"{num(res.get('settled_min_s'))} s or more (convergence's rule, without NUMA balancing's target), at the "
        "time it last arrived there; the workload's is the last such task's (one still moving counts as the end of "
        "the trace). A task that never changed node, or lived less than that, has none (n/a), and with no task that "
        "changed node the workload has none. Settling says when the placement stopped changing, not whether it was "
        "a good one."
    )
    return f'<h5>Placement, for any scheduler</h5>{facts}<p class="muted">{e(how)}</p>'


def _na(v: object) -> str:
    """A figure that may be undefined (lab.analysis.residency): "n/a", not a dash that could read as 0."""
    return "n/a" if v is None else num(v)


def targeted(task: dict) -> bool:
    """Whether NUMA balancing decided about a task (its ``target``; a record made before: its NUMA marks)."""
    return bool(task.get("target")) if "target" in task else bool(task.get("marks"))


def _converged(task: dict) -> str:
    if not targeted(task):
        return "n/a (no decision)"
    return "not converged" if task.get("converged_s") is None else num(task.get("converged_s"))


def _pct(v: object) -> str:
    return percent(v) if isinstance(v, (int, float)) else "-"


MOVES = (
    ("within_llc", "within an LLC"),
    ("between_llcs", "between LLCs of a node"),
    ("between_nodes", "between nodes"),
)
PLACES = (
    ("waker_llc", "in the waker's LLC"),
    ("waker_node", "in another LLC of the waker's node"),
    ("other_node", "on another node"),
)


def _llc_time(view: dict, llcs: list[dict]) -> str:
    res = view.get("residency") or {}
    if not res.get("tasks"):
        return ""
    seconds, share = res.get("seconds") or [], res.get("share") or []
    rows = []
    for i, x in enumerate(llcs):
        s = seconds[i] if i < len(seconds) else None
        f = share[i] if i < len(share) else None
        pct = 100.0 * f if isinstance(f, (int, float)) else None
        rows.append([e(i), e(x.get("cpus")), e(x.get("node")), e(x.get("package")), num(s), _pct(pct)])
    head = ["LLC", "CPUs", "node", "package", "s", "share %"]
    return f"<div><h5>The workload&#x27;s time per LLC</h5>{table(head, rows, 'small', (0, 2, 3, 4, 5))}</div>"


def _llc_over_time(view: dict, llcs: list[dict]) -> str:
    """Each second's time per LLC and its share on the most-used one: where cache-aware scheduling gathers."""
    res = view.get("residency") or {}
    by, one = res.get("by_interval"), res.get("one_llc_share")
    if not res.get("tasks") or not isinstance(by, list) or not isinstance(one, list):
        return ""
    rows = []
    for k, row in enumerate(by[:120]):
        if not isinstance(row, list):
            continue
        share = one[k] if k < len(one) else None
        pct = 100.0 * share if isinstance(share, (int, float)) else None
        rows.append([e(k), *(num(x) for x in row[: len(llcs)]), _pct(pct)])
    head = ["second", *(f"LLC {i} s" for i in range(len(llcs))), "on one LLC %"]
    late = res.get("one_llc_share_late")
    said = f"Over the second half: {100.0 * late:.1f}% on one LLC." if isinstance(late, (int, float)) else ""
    return (
        f"<div><h5>Second by second</h5>{table(head, rows, 'small', tuple(range(len(head))))}"
        f'<p class="muted">{e(said)}</p></div>'
    )


def _sched_cache(r: dict) -> str:
    """What a 7.x kernel said of cache-aware scheduling at boot, and its llc_balancing switch in the run."""
    sc = r.get("sched_cache")
    if not isinstance(sc, dict) or not sc.get("configured"):
        return ""
    start, end = sc.get("start") or {}, sc.get("end") or {}
    said = (
        f"Cache-aware scheduling (SCHED_CACHE): the kernel said {sc.get('kernel') or 'nothing'} at boot "
        f"(numalab predicted {sc.get('predicted')}); llc_balancing/enabled {start.get('enabled', '?')} at the "
        f"workload's start, {end.get('enabled', '?')} at its end."
    )
    return f'<p class="muted">{e(said)}</p>'


def _llc_wakeups(w: dict) -> str:
    rows = [
        [e(label), num(get(w, "workload", k)), _pct(get(w, "workload", f"{k}_pct")), num(get(w, "all", k))]
        for k, label in PLACES
    ]
    unpaired = (
        f"{num(w.get('waking_unpaired'))} {WAKING.name} without a {WAKEUP.name}, "
        f"{num(w.get('wakeup_unpaired'))} the other way round"
    )
    how = (
        f"Each {WAKING.name} (on the waker's CPU) paired with the next {WAKEUP.name} of the task (its target_cpu: "
        f"the CPU chosen); {unpaired}."
    )
    head = ["chosen CPU", "workload", "workload %", "all tasks"]
    return (
        f"<div><h5>Where a wakeup put the task</h5>{table(head, rows, 'small', (1, 2, 3))}"
        f'<p class="muted">{e(how)}</p></div>'
    )


def _llc(r: dict) -> str:
    """The workload's time per LLC, task migrations by how far they went and wakeups against the waker's LLC
    (lab.analysis.llc): on a machine with several LLCs in a node, or wherever wakeups were traced; "" elsewhere."""
    view = get(r, "metrics", "numa", "llc")
    wakeups = get(r, "metrics", "numa", "llc_wakeups")
    if not isinstance(view, dict):
        return ""
    llcs = [x for x in view.get("llcs") or [] if isinstance(x, dict)]
    several = len(llcs) > len({x.get("node") for x in llcs})
    if not several and not isinstance(wakeups, dict):
        return ""
    parts = [_llc_time(view, llcs), _llc_over_time(view, llcs)] if several else []
    mig = view.get("migrations") or {}
    rows = [[e(label), num(get(mig, "workload", k)), num(get(mig, "all", k))] for k, label in MOVES]
    parts.append(f"<div><h5>Task migrations</h5>{table(['', 'workload', 'all tasks'], rows, 'small', (1, 2))}</div>")
    if isinstance(wakeups, dict):
        parts.append(_llc_wakeups(wakeups))
    elif several:
        ask = f"numalab run --event {WAKING.full} --event {WAKEUP.full}"
        parts.append(
            f'<p class="muted">Wakeups against the waker\'s LLC: <span class="mono">{e(ask)}</span> (not traced by '
            "default: a ping-pong workload wakes thousands of times a second).</p>"
        )
    how = (
        f"An LLC is the CPUs sharing an L3 on one node (the sched domain MC). Migrations are {MIGRATE_TASK.name}'s; "
        "a task's time is where the scheduler had it, running or waiting, as in the per-node residency."
    )
    return (
        f'<div class="views llc"><h4>By LLC</h4><div class="grid">{"".join(parts)}</div>'
        f'<p class="muted">{e(how)}</p>{_sched_cache(r)}</div>'
    )


def _node_memory(r: dict) -> str:
    nm = get(r, "metrics", "node_memory")
    if not isinstance(nm, dict) or not nm.get("t"):
        return ""
    t = nm["t"]
    n = len(nm.get("total_mib") or [])
    colors = {f"node {i}": NODE_COLORS[i % len(NODE_COLORS)] for i in range(n)}
    used = {f"node {i}": [row[i] if row else None for row in nm.get("used_mib", [])] for i in range(n)}
    figs = [figure(svg.line_chart(t, used, title="Used memory per node (MiB)", colors=colors,
                                  axes=svg.Axes(x_label="s since workload start"), width=640),
                   "MemUsed of /sys/devices/system/node/nodeN/meminfo at each vmstat sample.")]  # fmt: skip
    if any(row for row in nm.get("workload_mib") or []):
        mine = {f"node {i}": [row[i] if row else None for row in nm["workload_mib"]] for i in range(n)}
        figs.append(figure(svg.line_chart(t, mine, title="The workload's memory per node (MiB)", colors=colors,
                                          axes=svg.Axes(x_label="s since workload start"), width=640),
                           "The N&lt;node&gt;= pages of /proc/PID/numa_maps of the workload's processes."))  # fmt: skip
        figs += process_memory(nm, n, colors)
    else:
        figs.append('<p class="muted">The workload\'s pages per node were not sampled: <span class="mono">'
                    "numalab run --node-maps</span> reads its processes' /proc/PID/numa_maps with each sample "
                    "(off by default: under TCG it slows the workload).</p>")  # fmt: skip
    problems = nm.get("problems") or []
    checks = (
        box("warn", "The node memory samples do not add up", [e(p) for p in problems])
        if problems
        else "<p class=\"muted\">Checked: each node's used + free memory is its total, the workload's pages on the "
        "nodes match its resident set, and no node holds more of the workload than it has in use.</p>"
    )
    grid = f'<div class="grid">{"".join(figs)}</div>'
    return f'<div class="views node-memory"><h4>Memory per node over time</h4>{grid}{checks}</div>'


PROCESS_CHARTS = 6  # per-process charts drawn (the largest first); the JSON has every sampled process


def _peak(series: dict) -> float:
    rows = series.get("mib") if isinstance(series, dict) else None
    return max((sum(x for x in row if isinstance(x, (int, float))) for row in rows or [] if isinstance(row, list)),
               default=0.0)  # fmt: skip


def _series_ok(series: object) -> bool:
    """A process's series as node_memory writes it: times and as many rows of MiB per node."""
    if not isinstance(series, dict):
        return False
    t, mib = series.get("t"), series.get("mib")
    return isinstance(t, list) and isinstance(mib, list) and len(t) == len(mib) > 0


def process_memory(nm: dict, n: int, colors: dict[str, str]) -> list[str]:
    """Each of the workload's processes' memory per node over time (node_memory's ``processes``: its numa_maps
    at each sample), one chart a process on the per-node charts' time axis, the largest
    :data:`PROCESS_CHARTS` processes by their peak; [] without them."""
    procs = nm.get("processes")
    if not isinstance(procs, dict):
        return []
    procs = {k: v for k, v in procs.items() if _series_ok(v)}  # (a record is a user's file: damage is left out)
    if not procs:
        return []
    t = [x for x in nm.get("t") or [] if isinstance(x, (int, float))]
    span = (min(t), max(t)) if t and min(t) < max(t) else None
    ranked = sorted(procs.items(), key=lambda kv: (-_peak(kv[1]), kv[0]))
    figs = []
    for pid, series in ranked[:PROCESS_CHARTS]:
        rows = [row if isinstance(row, list) else [] for row in series.get("mib") or []]
        lines = {f"node {i}": [row[i] if i < len(row) else None for row in rows] for i in range(n)}
        chart = svg.line_chart(series.get("t") or [], lines, title=f"Process {pid}: its memory per node (MiB)",
                               colors=colors, axes=svg.Axes(x_label="s since workload start", x_range=span),
                               width=640)  # fmt: skip
        figs.append(figure(chart, f"The N&lt;node&gt;= pages of /proc/{e(pid)}/numa_maps at each sample (its "
                                  "threads share them)."))  # fmt: skip
    if len(ranked) > PROCESS_CHARTS:
        figs.append(f'<p class="muted">{len(ranked) - PROCESS_CHARTS} smaller processes not drawn (report.json '
                    "has them: node_memory.processes).</p>")  # fmt: skip
    return figs


def run_views(r: dict) -> str:
    """A run's per-task residency, its view by LLC and per-node memory ("" when it has none)."""
    return _residency(r) + _llc(r) + _node_memory(r)


# --- A/B overlays ---------------------------------------------------------------------------------------------


def _binned(t: list, vals: list) -> dict[int, float]:
    """A run's series on the whole seconds its samples span, linearly between two samples (runs sample at
    different instants: a median of whichever runs sampled near a second would jump between runs). A gap
    (None) stays a gap."""
    num = (int, float)
    pts = [(float(tv), float(v) if isinstance(v, num) else None) for tv, v in zip(t or [], vals or [], strict=False)
           if isinstance(tv, num)]  # fmt: skip
    out: dict[int, float] = {}
    for ta, va in pts:
        if va is not None and ta >= 0 and ta == int(ta):
            out[int(ta)] = va
    for (ta, va), (tb, vb) in zip(pts, pts[1:], strict=False):
        if va is None or vb is None or tb <= ta:
            continue
        for s in range(max(0, math.ceil(ta)), math.floor(tb) + 1):
            out.setdefault(s, va + (vb - va) * (s - ta) / (tb - ta))
    return out


def _settled_pct(res: dict) -> tuple[list, list]:
    """Per second, the % of the workload's tasks with a target (balancing decided about them) that had
    converged by then; none where no task had one (a run with balancing off: n/a, not 0%)."""
    tasks = [t for t in res.get("tasks") or [] if isinstance(t, dict) and targeted(t)]
    window = res.get("window_s") or 0
    if not tasks:
        return [], []
    xs = list(range(int(window) + 1))
    conv = [t.get("converged_s") for t in tasks]
    return xs, [100.0 * sum(c is not None and c <= x for c in conv) / len(tasks) for x in xs]


OVERLAYS = (
    ("NUMA pages migrated (cumulative)", None, lambda m: (get(m, "vmstat_series", "t"),
                                                         get(m, "vmstat_series", "numa_pages_migrated"))),
    ("NUMA hint-local % per interval", 100.0, lambda m: (get(m, "vmstat_series", "t"),
                                                        get(m, "vmstat_series", "hint_local_pct"))),
    ("NUMA moves + swaps per second", None, lambda m: (
        list(range(len(get(m, "numa", "rates", "series", "move") or []))),
        [a + b for a, b in zip(get(m, "numa", "rates", "series", "move") or [],
                               get(m, "numa", "rates", "series", "swap") or [], strict=False)])),
    ("Tasks with a target converged (%)", 100.0, lambda m: _settled_pct(get(m, "numa", "residency") or {})),
)  # fmt: skip


def _group(runs: list[dict], pick) -> dict[int, tuple[float, float, float]]:
    per: dict[int, list[float]] = {}
    for r in runs:
        t, vals = pick(r.get("metrics") or {})
        for k, v in _binned(t, vals).items():
            per.setdefault(k, []).append(v)
    return {k: (median(v), min(v), max(v)) for k, v in per.items()}


def ab_overlays(c: Comparison, runs_by_id: dict[str, dict]) -> str:
    """A's and B's over-time charts on one chart each: the median per second, the runs' range as a band."""
    base = [runs_by_id[i] for i in c.base_ids if i in runs_by_id]
    new = [runs_by_id[i] for i in c.new_ids if i in runs_by_id]
    if not base or not new:
        return ""
    figs = []
    colors = {c.base_label: BASE_COLOR, c.new_label: NEW_COLOR}
    if c.base_label == c.new_label:
        colors = {"A": BASE_COLOR, "B": NEW_COLOR}
    names = list(colors)
    for title, y_max, pick in OVERLAYS:
        a, b = _group(base, pick), _group(new, pick)
        if not a or not b:
            continue
        xs = sorted(set(a) | set(b))
        series = {
            name: tuple([g[x][i] if x in g else None for x in xs] for i in range(3))
            for name, g in zip(names, (a, b), strict=True)
        }
        figs.append(figure(band_chart(xs, series, colors, title=title, y_max=y_max),
                           f"{e(title)}: median of the runs per second, their range shaded "
                           f"({len(base)} and {len(new)} runs)."))  # fmt: skip
    if not figs:
        return ""
    return f'<div class="ab-overlays"><h4>A and B over time</h4><div class="grid">{"".join(figs)}</div></div>'
