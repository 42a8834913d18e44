"""A run's NUMA-balancing trace as Chrome trace-event JSON, for ui.perfetto.dev and chrome://tracing.

Perfetto cannot import trace.dat's NUMA events itself, so this writes the
JSON trace-event format (``{"traceEvents": [...], "displayTimeUnit": "ms"}``):

* one process "guest CPUs" (pid 1) with a track (thread) per guest CPU:
  tid = CPU number, named "CPU n";
* every sched_move_numa / sched_swap_numa / sched_stick_numa is an instant
  event (``"ph": "i", "s": "t"``) on the track of its source CPU, with all the
  tracepoint's fields as args;
* a move or swap also gets a flow arrow to the destination CPU: ``"ph": "s"``
  on the source track and ``"ph": "f", "bp": "e"`` on the destination track,
  with the same id. Perfetto binds a flow end to the slice open on that track,
  so an arrival instant (category ``numa.dst``) is placed on the destination
  track first; a stick (a migration that did not happen) has no arrow;
* mm_migrate_pages becomes counter tracks (``"ph": "C"``) of pages migrated
  (succeeded, failed) and of calls per second;
* the workload's start and end, when known, are global instant events;
* one process "workload tasks" (pid 2) with a track per task of the workload (tid = the task's pid, named
  "comm pid"): a slice per stay on a node, named "node N" with the node as an argument (the residency
  analysis, lab.analysis.residency);
* per-node memory counter tracks (``"ph": "C"``, "node N memory (MiB)": used, and the workload's pages) from
  the guest's node memory samples (lab.analysis.node_memory).

Timestamps are the trace's (guest uptime) in µs.
"""

from __future__ import annotations

from collections import defaultdict

from lab.analysis.lost import lost_per_cpu
from lab.analysis.node_memory import node_memory
from lab.analysis.numa import NUMA_KINDS
from lab.analysis.record import RunRecord
from lab.analysis.residency import residency
from lab.errors import LabError
from lab.events import (
    MIGRATE_PAGES,
    MIGRATE_TASK,
    MOVE_NUMA,
    NUMA_DECISIONS,
    PROCESS_EXIT,
    SWAP_NUMA,
    WAKEUP_NEW,
    TraceEvent,
)
from lab.record_files import TRACE_DAT, TRACE_STATS
from lab.trace.tracedat import Event, TraceData, read_trace, stats_per_cpu

# The events this export decodes, as an analysis declares them (lab.analysis.numa).
REQUIRES: tuple[TraceEvent, ...] = (*NUMA_DECISIONS, MIGRATE_PAGES, MIGRATE_TASK, WAKEUP_NEW, PROCESS_EXIT)
PID = 1
TASKS_PID = 2  # the workload's tasks, a track each
FLOW_KINDS = (MOVE_NUMA.name, SWAP_NUMA.name)  # the decisions that move a task: an arrow to the destination
MIGRATE = MIGRATE_PAGES.name
CATEGORY = "numa"
DST_CATEGORY = "numa.dst"


def _us(ts: float) -> float:
    return round(ts * 1e6, 3)


def _args(e: Event) -> dict:
    out: dict = {"comm": e.comm, "pid": e.pid}
    for k, v in e.fields.items():
        try:
            out[k] = int(v)
        except ValueError:
            out[k] = v
    return out


def _meta(name: str, args: dict, tid: int | None = None) -> dict:
    ev = {"name": name, "ph": "M", "pid": PID, "args": args}
    if tid is not None:
        ev["tid"] = tid
    return ev


def trace_events(
    data: TraceData, n_cpus: int, title: str = "guest CPUs", marks: dict[str, float] | None = None
) -> dict:
    """The trace-event JSON object for the events of ``data`` (``marks``: name -> guest uptime in s)."""
    cpus = set(range(n_cpus))
    numa = [e for e in data.events if e.name in NUMA_KINDS]
    for e in numa:
        cpus.add(e.int("src_cpu", e.cpu))
        if e.name in FLOW_KINDS and e.int("dst_cpu", -1) >= 0:
            cpus.add(e.int("dst_cpu"))
    out: list[dict] = [
        _meta("process_name", {"name": title}),
        _meta("process_sort_index", {"sort_index": 0}),
    ]
    for cpu in sorted(c for c in cpus if c >= 0):
        out.append(_meta("thread_name", {"name": f"CPU {cpu}"}, cpu))
        out.append(_meta("thread_sort_index", {"sort_index": cpu}, cpu))
    flow_id = 0
    for e in sorted(numa, key=lambda e: e.ts):
        ts = _us(e.ts)
        src = e.int("src_cpu", e.cpu)
        args = _args(e)
        out.append(
            {"name": e.name, "cat": CATEGORY, "ph": "i", "s": "t", "ts": ts, "pid": PID, "tid": src, "args": args}
        )
        dst = e.int("dst_cpu", -1)
        if e.name in FLOW_KINDS and dst >= 0:
            flow_id += 1
            base = {"name": e.name, "cat": CATEGORY, "id": flow_id, "ts": ts, "pid": PID}
            out.append(base | {"ph": "s", "tid": src})
            out.append(
                {
                    "name": f"{e.name} (arrives)",
                    "cat": DST_CATEGORY,
                    "ph": "i",
                    "s": "t",
                    "ts": ts,
                    "pid": PID,
                    "tid": dst,
                    "args": {"from_cpu": src, "flow": flow_id, **args},
                }
            )
            out.append(base | {"ph": "f", "bp": "e", "tid": dst})
    # Page migrations: per-second counters (the event itself is far too frequent to draw one by one).
    bins: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for e in data.events:
        if e.name == MIGRATE:
            b = bins[int(e.ts)]
            b[0] += e.int("nr_succeeded")
            b[1] += e.int("nr_failed")
            b[2] += 1
    if bins:
        for sec in range(min(bins), max(bins) + 2):
            ok, failed, calls = bins.get(sec, (0, 0, 0))
            ts = _us(sec)
            out.append(
                {
                    "name": "pages migrated/s",
                    "ph": "C",
                    "ts": ts,
                    "pid": PID,
                    "args": {"succeeded": ok, "failed": failed},
                }
            )
            out.append({"name": f"{MIGRATE} calls/s", "ph": "C", "ts": ts, "pid": PID, "args": {"calls": calls}})
    for name, t in (marks or {}).items():
        out.append({"name": name, "cat": "numalab", "ph": "i", "s": "g", "ts": _us(t), "pid": PID, "tid": 0})
    return {
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": {"source": "numalab", "lost_events": sum(data.dropped.values()), "problems": data.problems},
    }


def task_tracks(tasks: list[dict], t0: float) -> list[dict]:
    """A track per task (process "workload tasks"), a slice per stay on a node: ``tasks`` as the residency
    analysis gives them (segments in seconds from ``t0``, guest uptime)."""
    if not tasks:
        return []
    out = [
        {"name": "process_name", "ph": "M", "pid": TASKS_PID, "args": {"name": "workload tasks (node residency)"}},
        {"name": "process_sort_index", "ph": "M", "pid": TASKS_PID, "args": {"sort_index": 1}},
    ]
    for t in tasks:
        tid = t["pid"]
        out.append({"name": "thread_name", "ph": "M", "pid": TASKS_PID, "tid": tid,
                    "args": {"name": f"{t.get('comm', '')} {tid}"}})  # fmt: skip
        for a, b, node in t.get("segments") or []:
            dur = round((b - a) * 1e6, 3)
            out.append({"name": f"node {node}", "cat": "residency", "ph": "X", "ts": _us(t0 + a), "dur": dur,
                        "pid": TASKS_PID, "tid": tid, "args": {"node": node}})  # fmt: skip
    return out


def node_counters(nm: dict, t0: float) -> list[dict]:
    """Per node, a counter track of its used memory and of the workload's pages on it (MiB)."""
    out = []
    for k, t in enumerate(nm.get("t") or []):
        used = (nm.get("used_mib") or [])[k] if k < len(nm.get("used_mib") or []) else None
        mine = (nm.get("workload_mib") or [])[k] if k < len(nm.get("workload_mib") or []) else None
        for node, u in enumerate(used or []):
            args = {"used": u} | ({"workload": mine[node]} if mine else {})
            out.append({"name": f"node {node} memory (MiB)", "ph": "C", "ts": _us(t0 + t), "pid": PID, "args": args})
    return out


def perfetto_trace(run: RunRecord) -> dict:
    """The run's trace.dat as trace-event JSON (see the module doc).

    A trace.dat that cannot be read at all gives a timeline with only the CPU tracks, and the reason in
    ``otherData.problems`` (the report says the same), rather than no report.
    """
    try:
        data = read_trace(run.file(TRACE_DAT), tuple(e.name for e in REQUIRES))
    except LabError as err:
        data = TraceData([], problems=[str(err)])
    stages = {s["name"]: s.get("uptime") for s in run.stages}
    marks = {
        label: stages[key]
        for key, label in (("workload-start", "workload start"), ("workload-end", "workload end"))
        if stages.get(key) is not None
    }
    result = trace_events(data, run.topology.total_cpus, f"guest CPUs ({run.run_id})", marks)
    t0 = marks.get("workload start")
    if t0 is not None:
        names = {e.name for e in data.events}
        if MIGRATE_TASK.name in names and WAKEUP_NEW.name in names:
            result["traceEvents"] += task_tracks(residency(data, run.topology, t0)["tasks"], t0)
        result["traceEvents"] += node_counters(node_memory(run.path, run.topology, t0), t0)
    result["otherData"] |= {
        "run_id": run.run_id,
        "topology": run.topology.name,
        "kernel": run.kernel_name,
        "node_cpus": run.topology.node_cpus(),
        # each loss once: the buffer stats and trace-cmd's DROPPED notices count the same overruns
        "lost_events": sum(lost_per_cpu(stats_per_cpu(run.file(TRACE_STATS)), data.dropped).values()),
    }
    return result
