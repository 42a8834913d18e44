"""Per-run analyses of the NUMA-balancing trace. Each declares the events it needs (``requires``).

``analyse_trace`` runs every analysis whose events are in the trace's event
set (an analysis whose events were not recorded is reported as skipped, not as
zeros). The events numalab traces by default are the ones the analyses marked
``default`` require (:func:`default_events`), as LISA derives its trace
configuration from its analyses: an analysis added or changed here changes what
a run records, and no list elsewhere can fall behind. Tracepoint formats are in
:mod:`lab.events`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lab.analysis.llc import llc_view, llc_wakeups
from lab.analysis.residency import residency
from lab.events import (
    BY_NAME,
    KNOWN,
    MIGRATE_PAGES,
    MIGRATE_TASK,
    MOVE_NUMA,
    NUMA_DECISIONS,
    PROCESS_EXIT,
    STICK_NUMA,
    SWAP_NUMA,
    WAKEUP,
    WAKEUP_NEW,
    WAKING,
    TraceEvent,
)
from lab.topology.model.topology import Topology

if TYPE_CHECKING:  # (annotations only: the CLI imports this module for its --event help, at every start)
    from lab.trace.tracedat import Event, TraceData

NUMA_KINDS = tuple(e.name for e in NUMA_DECISIONS)  # as trace records name them
# The rates series of mm_migrate_pages: named after its analysis, as report.json files already have it.
MIGRATE_SERIES = "migrate_pages"


@dataclass(frozen=True)
class Analysis:
    name: str
    requires: tuple[TraceEvent, ...]
    fn: Callable[[TraceData, Topology, float], dict]
    any_of: bool = False  # True: runs if any required event was recorded
    default: bool = True  # its events are traced unless the user says otherwise (default_events)
    fields: tuple[str, ...] = ()  # the fields it reads (each in the ``reads`` of one of its events)
    # events it reads when they were recorded, and traced by default with it, but does without
    optional: tuple[TraceEvent, ...] = ()


def _matrix(n: int) -> list[list[int]]:
    return [[0] * n for _ in range(n)]


def _nids(e: Event) -> tuple[int, int]:
    return e.int("src_nid", -1), e.int("dst_nid", -1)


def node_moves(trace: TraceData, topo: Topology, _t0: float) -> dict:
    """src_nid -> dst_nid matrices per kind, and the same folded by hops and by distance."""
    n = topo.n_nodes
    hops = topo.hops()
    out: dict = {}
    for kind in NUMA_DECISIONS:
        m = _matrix(n)
        by_hops: Counter = Counter()
        by_dist: Counter = Counter()
        unplaced = 0
        for e in trace.named(kind.name):
            s, d = _nids(e)
            if not (0 <= s < n and 0 <= d < n):
                unplaced += 1  # e.g. a stick with no destination
                continue
            m[s][d] += 1
            by_dist[topo.distances[s][d]] += 1
            if hops is not None:
                by_hops[hops[s][d]] += 1
        out[kind.short] = {
            "matrix": m,
            "by_distance": {str(k): v for k, v in sorted(by_dist.items())},
            "by_hops": {str(k): v for k, v in sorted(by_hops.items())} if hops is not None else None,
            "without_destination": unplaced,
        }
    return out


def stick_reasons(trace: TraceData, _topo: Topology, _t0: float) -> dict:
    reasons = Counter()
    for e in trace.named(STICK_NUMA.name):
        if e.int("dst_cpu", 0) == -1:
            reasons["no_cpu"] += 1
        elif e.int("dst_pid", 0) == 0:
            reasons["move_to_idle_failed"] += 1
        else:
            reasons["swap_failed"] += 1
    return {k: reasons.get(k, 0) for k in ("no_cpu", "move_to_idle_failed", "swap_failed")}


def swap_groups(trace: TraceData, _topo: Topology, _t0: float) -> dict:
    """Swaps between tasks of one NUMA group (same ngid) against across groups."""
    same = cross = 0
    for e in trace.named(SWAP_NUMA.name):
        if e.int("src_ngid", 0) and e.int("src_ngid", 0) == e.int("dst_ngid", -1):
            same += 1
        else:
            cross += 1
    return {"same_group": same, "cross_group": cross}


def per_task(trace: TraceData, _topo: Topology, _t0: float) -> dict:
    """Counts per task (pid) and per process (tgid); a swap counts for both tasks."""
    tasks: dict[int, Counter] = defaultdict(Counter)
    procs: dict[int, Counter] = defaultdict(Counter)
    comms: dict[int, str] = {}
    for e in trace.named(*NUMA_KINDS):
        kind = BY_NAME[e.name].short
        if e.name == MOVE_NUMA.name:
            parties = [(e.int("pid"), e.int("tgid"))]
        else:
            parties = [(e.int("src_pid"), e.int("src_tgid"))]
            if e.int("dst_pid") > 0:
                parties.append((e.int("dst_pid"), e.int("dst_tgid")))
        for pid, tgid in parties:
            tasks[pid][kind] += 1
            procs[tgid][kind] += 1
        comms.setdefault(e.pid, e.comm)
        comms.setdefault(parties[0][1], e.comm)

    def table(d: dict[int, Counter]) -> list[dict]:
        return [
            {"id": k, "comm": comms.get(k, ""), **{x.short: v.get(x.short, 0) for x in NUMA_DECISIONS}}
            for k, v in sorted(d.items())
        ]

    return {"tasks": table(tasks), "processes": table(procs)}


def rates(trace: TraceData, _topo: Topology, t0: float) -> dict:
    """Events per second since the workload started (guest uptime t0)."""
    series: dict[str, Counter] = {k.short: Counter() for k in NUMA_DECISIONS} | {MIGRATE_SERIES: Counter()}
    last = 0
    for e in trace.named(*NUMA_KINDS, MIGRATE_PAGES.name):
        sec = max(0, int(e.ts - t0))
        last = max(last, sec)
        series[MIGRATE_SERIES if e.name == MIGRATE_PAGES.name else BY_NAME[e.name].short][sec] += 1
    return {
        "bin_s": 1,
        "start_uptime": t0,
        "series": {k: [c.get(i, 0) for i in range(last + 1)] for k, c in series.items()},
    }


def migrate_pages(trace: TraceData, _topo: Topology, _t0: float) -> dict:
    """Page migrations by reason; numa_misplaced is NUMA balancing's."""
    by_reason: dict[str, Counter] = defaultdict(Counter)
    for e in trace.named(MIGRATE_PAGES.name):
        c = by_reason[e.fields.get("reason", "?")]
        c["calls"] += 1
        for f in ("nr_succeeded", "nr_failed", "nr_thp_succeeded", "nr_thp_failed", "nr_thp_split"):
            c[f.removeprefix("nr_")] += e.int(f)
    return {r: dict(c) for r, c in sorted(by_reason.items())}


def cross_node_lb(trace: TraceData, topo: Topology, _t0: float) -> dict:
    """Load-balancer task migrations (sched_migrate_task) that cross nodes."""
    node_of = {cpu: node for node, cpus in enumerate(topo.node_cpus()) for cpu in cpus}
    total = cross = 0
    m = _matrix(topo.n_nodes)
    for e in trace.named(MIGRATE_TASK.name):
        total += 1
        a, b = node_of.get(e.int("orig_cpu", -1)), node_of.get(e.int("dest_cpu", -1))
        if a is not None and b is not None and a != b:
            cross += 1
            m[a][b] += 1
    return {"migrations": total, "cross_node": cross, "matrix": m}


ANALYSES = (
    Analysis("node_moves", NUMA_DECISIONS, node_moves, any_of=True, fields=("src_nid", "dst_nid")),
    Analysis("stick_reasons", (STICK_NUMA,), stick_reasons, fields=("dst_cpu", "dst_pid")),
    Analysis("swap_groups", (SWAP_NUMA,), swap_groups, fields=("src_ngid", "dst_ngid")),
    Analysis("per_task", NUMA_DECISIONS, per_task, any_of=True,
             fields=("pid", "tgid", "src_pid", "src_tgid", "dst_pid", "dst_tgid")),
    Analysis("rates", NUMA_DECISIONS, rates, any_of=True),
    Analysis("migrate_pages", (MIGRATE_PAGES,), migrate_pages,
             fields=("nr_succeeded", "nr_failed", "nr_thp_succeeded", "nr_thp_failed", "nr_thp_split", "reason")),
    # Every task migration (sched_migrate_task) is far more than the NUMA decisions: traced by default for the
    # residency, with the trace buffer sized for it (lab.run.options.RunOptions.trace_buffer_kb; its cost:
    # docs/reports.md).
    Analysis("cross_node_lb", (MIGRATE_TASK,), cross_node_lb, fields=("orig_cpu", "dest_cpu")),
    Analysis("residency", (MIGRATE_TASK, WAKEUP_NEW), residency, fields=("comm", "pid", "orig_cpu", "dest_cpu",
             "target_cpu"), optional=(PROCESS_EXIT, *NUMA_DECISIONS)),
    # The same events seen by LLC (lab.analysis.llc): the workload's time per LLC, migrations by how far they went.
    Analysis("llc", (MIGRATE_TASK, WAKEUP_NEW), llc_view, fields=("comm", "pid", "orig_cpu", "dest_cpu", "target_cpu"),
             optional=(PROCESS_EXIT,)),
    # Where wakeups land against the waker's LLC. sched_waking and sched_wakeup come with every wakeup (a
    # perf-sched-pipe run of 3 s under TCG: 12,093 of each, trace.dat 60 KiB -> 1,000 KiB; docs/topologies.md):
    # asked for with --event, not traced by default.
    Analysis("llc_wakeups", (WAKING, WAKEUP), llc_wakeups, default=False, fields=("pid", "target_cpu"),
             optional=(MIGRATE_TASK, WAKEUP_NEW, PROCESS_EXIT)),
)  # fmt: skip


def default_events(analyses: tuple[Analysis, ...] = ANALYSES) -> tuple[TraceEvent, ...]:
    """The events a run traces unless told otherwise: those the default analyses require, in the
    analyses' order, each once."""
    return tuple(dict.fromkeys(e for a in analyses if a.default for e in (*a.requires, *a.optional)))


def lean_events(analyses: tuple[Analysis, ...] = ANALYSES) -> tuple[TraceEvent, ...]:
    """``--lean``'s events: those of the default analyses that read NUMA balancing's own events and page
    migrations only (its decisions and pages), none of the every-migration and task-life events."""
    own = {*NUMA_DECISIONS, MIGRATE_PAGES}
    return default_events(tuple(a for a in analyses if set(a.requires) <= own))


# Every event some analysis decodes (others are only counted), as trace records name them.
ANALYSIS_EVENTS = tuple(sorted({e.name for a in ANALYSES for e in (*a.requires, *a.optional)}))


def missing_fields(a: Analysis, formats: dict[str, frozenset[str]], recorded: set[str]) -> dict[str, list[str]]:
    """Event name -> the fields ``a`` reads of it that the booted kernel's format does not print (events whose
    format is unknown are taken as they are documented in lab.events)."""
    out = {}
    for e in a.requires:
        if e.name in recorded and e.name in formats:
            gone = [f for f in a.fields if f in e.reads and f not in formats[e.name]]
            if gone:
                out[e.name] = gone
    return out


def analyse_trace(trace: TraceData, topo: Topology, recorded: set[str], t0: float) -> dict:
    """Run every analysis whose events were recorded and whose fields this kernel prints; list the others as
    skipped, with why (an analysis that read a field the kernel renamed would count zeros), but for an opt-in
    analysis none of whose events was traced: that one was not asked for."""
    out: dict = {"skipped": {}}
    for a in ANALYSES:
        have = [r for r in a.requires if r.name in recorded]
        ok = bool(have) if a.any_of else len(have) == len(a.requires)
        gone = missing_fields(a, trace.formats, recorded) if ok else {}
        if gone:
            what = "; ".join(f"{name} has no {', '.join(fields)}" for name, fields in gone.items())
            out["skipped"][a.name] = f"{what} in this kernel's format"
        elif ok:
            out[a.name] = a.fn(trace, topo, t0)
        elif a.default or have:  # (an opt-in analysis none of whose events was asked for was not skipped)
            out["skipped"][a.name] = f"needs {', '.join(r.name for r in a.requires)} (not recorded)"
    return out


def format_notes(formats: dict[str, frozenset[str]], recorded: set[str]) -> list[str]:
    """One line per recorded event whose format, in the booted kernel, lacks a field numalab reads (or that
    trace.dat has no format for): what a run record says instead of counting zeros. [] when the formats are
    unknown (a trace-cmd that cannot list them) or all there."""
    if not formats:
        return []
    notes = []
    for e in KNOWN:
        if e.name not in recorded:
            continue
        if e.name not in formats:
            notes.append(f"trace event {e.full}: trace.dat has no format for it (not in this kernel?)")
            continue
        gone = [f for f in e.reads if f not in formats[e.name]]
        if gone:
            users = [a.name for a in ANALYSES if any(f in a.fields for f in gone) and e in a.requires]
            printed = sorted(f[:64] for f in formats[e.name])  # (the guest's file: its names, bounded)
            shown = ", ".join(printed[:24]) + (f" and {len(printed) - 24} more" if len(printed) > 24 else "") or "none"
            notes.append(
                f"trace event {e.full}: this kernel's format has no {', '.join(gone)} (renamed or removed; it prints "
                f"{shown}): " + (f"{', '.join(users)} left out, not counted as 0" if users else "not shown")
            )
    return notes
