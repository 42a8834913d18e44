"""Views that see LLCs (issue 48): the workload's time on each LLC, task migrations by how far they went, and
where a wakeup puts the woken task against the waker's LLC.

An LLC here is the kernel's: the CPUs that share a CPU's L3 on its node, its ``MC`` span
(:func:`lab.topology.predictions.cpu_view.predict_cpus`' ``l3_cpus``, cut at the node as ``match_llc`` cuts it),
which is what ``select_idle_sibling`` searches. Every topology has them: a machine with a CPU grid
(lab.topology.model.cpu_grid) has ``llcs_per_node`` a node (or each node its own ``llcs``); one without has an
LLC a node, or an LLC a CPU where its nodes differ in size (QEMU's L3 is the socket's, and such a machine
has a socket a core).

Two analyses, declared in :data:`lab.analysis.numa.ANALYSES`:

* ``llc`` (traced by default: the residency's events) gives

  * ``residency``: the workload's tasks' time on each LLC and on each node, in seconds and as a share of
    their time (lab.analysis.residency's stays of each task, grouped by LLC instead of by node; "on" is
    where the scheduler has the task, running or waiting);
  * ``migrations``: every sched_migrate_task by how far the task went: ``within_llc``, ``between_llcs`` (of
    one node) and ``between_nodes``, for every task (``all``, with an LLC x LLC ``matrix``) and for the
    workload's tasks (``workload``);

* ``llc_wakeups`` (not traced by default: ``--event sched:sched_waking --event sched:sched_wakeup``; a
  ping-pong workload wakes thousands of times a second) pairs each sched_waking (on the waker's CPU) with
  the next sched_wakeup of the same pid (its ``target_cpu``: the CPU chosen) and counts the chosen CPU in
  the waker's LLC (``waker_llc``), in another LLC of the waker's node (``waker_node``) or on another node
  (``other_node``); ``on_waker_cpu`` and ``on_previous_cpu`` (the waking's ``target_cpu``) are among them.
  A waking followed by another waking of the pid, a new task of that pid (sched_wakeup_new), its exit or
  the trace's end before any wakeup is ``waking_unpaired``; a wakeup without a waking before it,
  ``wakeup_unpaired``. For every wakee (``all``) and for the workload's tasks (``workload``), each with its
  waker CPU x chosen CPU ``matrix``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lab.analysis.residency import BIN_S, MAX_TASKS, interval_seconds, stays
from lab.cpulist import format_cpulist, parse_cpulist
from lab.events import MIGRATE_TASK, PROCESS_EXIT, WAKEUP, WAKEUP_NEW, WAKING
from lab.topology.model.topology import Topology
from lab.topology.predictions.cpu_view import predict_cpus

if TYPE_CHECKING:
    from lab.trace.tracedat import TraceData

MIGRATION_KINDS = ("within_llc", "between_llcs", "between_nodes")
WAKEUP_KINDS = ("waker_llc", "waker_node", "other_node")


def llcs(topo: Topology) -> list[dict]:
    """The topology's LLCs in order of their first CPU: each one's ``cpus`` (a cpulist), ``node`` and ``package``."""
    node_of = {cpu: node for node, cpus in enumerate(topo.node_cpus()) for cpu in cpus}
    groups: dict[tuple[str, int], list[int]] = {}
    package: dict[tuple[str, int], int] = {}
    for v, c in enumerate(predict_cpus(topo)["cpus"]):  # (in CPU order: an LLC's first CPU comes first)
        key = (c["l3_cpus"], node_of.get(v, -1))
        groups.setdefault(key, []).append(v)
        package.setdefault(key, c["package"])
    return [{"cpus": format_cpulist(cpus), "node": key[1], "package": package[key]} for key, cpus in groups.items()]


def llc_of(topo: Topology) -> dict[int, int]:
    """CPU -> the index of its LLC in :func:`llcs`."""
    return {cpu: i for i, x in enumerate(llcs(topo)) for cpu in parse_cpulist(x["cpus"])}


def _split(a: int, b: int, llc: dict[int, int], node: list[int]) -> str | None:
    """How far CPU ``a`` -> CPU ``b`` goes: one of MIGRATION_KINDS (None: a CPU the topology does not have)."""
    la, lb = llc.get(a), llc.get(b)
    if la is None or lb is None:
        return None
    if la == lb:
        return "within_llc"
    return "between_llcs" if node[la] == node[lb] else "between_nodes"


def _top_share(row: list[float]) -> float | None:
    total = sum(row)
    return round(max(row) / total, 4) if total > 0 else None


def _residency(
    trace: TraceData, llc: dict[int, int], node: list[int], n_nodes: int, t0: float
) -> tuple[dict, set[int]]:
    """The workload's time per LLC and per node, over the run and each interval (``BIN_S``), and its tasks' pids.

    ``by_interval`` has, per interval, the workload's seconds on each LLC; ``one_llc_share`` the share of each
    interval's time on that interval's most-used LLC (1.0: the workload was on one LLC; 1/LLCs: spread evenly);
    ``one_llc_share_late`` the same over the run's second half, when balancing's start-up is over. ``tasks_llc``
    is each task's most-used LLC per interval (the tasks that spent the most time first, at most
    :data:`MAX_TASKS`)."""
    by_task = stays(trace, llc, t0)
    end = max((b for segs in by_task.values() for _a, b, _i in segs), default=t0)
    n_bins = max(1, int((end - t0) // BIN_S) + (1 if (end - t0) % BIN_S else 0))
    seconds = [0.0] * len(node)
    bins = [[0.0] * len(node) for _ in range(n_bins)]
    per_task = []
    for pid, segs in by_task.items():
        own = interval_seconds(segs, n_bins, len(node), t0)
        for a, b, i in segs:
            seconds[i] += max(b - max(a, t0), 0.0)
        for k, row in enumerate(own):
            bins[k] = [x + y for x, y in zip(bins[k], row, strict=True)]
        per_task.append((sum(map(sum, own)), pid, [max(range(len(node)), key=r.__getitem__) if sum(r) else None
                                                   for r in own]))  # fmt: skip
    per_node = [sum(s for s, n in zip(seconds, node, strict=True) if n == k) for k in range(n_nodes)]
    total = sum(seconds)
    late = [sum(col) for col in zip(*bins[n_bins // 2 :], strict=True)] if n_bins > 1 else seconds
    per_task.sort(key=lambda t: (-t[0], t[1]))
    return {
        "tasks": len(by_task),
        "seconds": [round(s, 4) for s in seconds],
        "share": [s / total if total else None for s in seconds],
        "node_seconds": [round(s, 4) for s in per_node],
        "node_share": [s / total if total else None for s in per_node],
        "bin_s": BIN_S,
        "by_interval": [[round(x, 3) for x in row] for row in bins],
        "one_llc_share": [_top_share(row) for row in bins],
        "one_llc_share_late": _top_share(late),
        "tasks_llc": [{"pid": pid, "llc": llcs_} for _s, pid, llcs_ in per_task[:MAX_TASKS]],
    }, set(by_task)


def llc_view(trace: TraceData, topo: Topology, t0: float) -> dict:
    """The workload's time per LLC and node, and task migrations by how far they went (the module docstring)."""
    table = llcs(topo)
    llc = llc_of(topo)
    node = [x["node"] for x in table]
    residency, workload = _residency(trace, llc, node, topo.n_nodes, t0)
    counts = {scope: dict.fromkeys(MIGRATION_KINDS, 0) for scope in ("all", "workload")}
    matrix = [[0] * len(table) for _ in table]
    unplaced = 0
    for e in trace.named(MIGRATE_TASK.name):
        a, b = e.int("orig_cpu", -1), e.int("dest_cpu", -1)
        kind = _split(a, b, llc, node)
        if kind is None:
            unplaced += 1
            continue
        counts["all"][kind] += 1
        matrix[llc[a]][llc[b]] += 1
        if e.int("pid", -1) in workload:
            counts["workload"][kind] += 1
    return {
        "llcs": table,
        "residency": residency,
        "migrations": {"all": counts["all"] | {"matrix": matrix}, "workload": counts["workload"], "unplaced": unplaced},
    }


def _wakeup_counts(n_cpus: int) -> dict:
    return {"wakeups": 0, **dict.fromkeys(WAKEUP_KINDS, 0), "on_waker_cpu": 0, "on_previous_cpu": 0,
            "matrix": [[0] * n_cpus for _ in range(n_cpus)]}  # fmt: skip


def _with_shares(c: dict) -> dict:
    n = c["wakeups"]
    return c | {f"{k}_pct": (100.0 * c[k] / n if n else None) for k in WAKEUP_KINDS}


def llc_wakeups(trace: TraceData, topo: Topology, t0: float) -> dict:
    """Where wakeups put the woken task against the waker's LLC (the module docstring)."""
    llc = llc_of(topo)
    node = [x["node"] for x in llcs(topo)]
    workload = set(stays(trace, llc, t0))
    n = topo.total_cpus
    scopes = {"all": _wakeup_counts(n), "workload": _wakeup_counts(n)}
    pending: dict[int, tuple[int, int]] = {}  # pid -> (the waker's CPU, the task's previous CPU)
    unpaired_waking = unpaired_wakeup = unplaced = 0
    for e in trace.named(WAKING.name, WAKEUP.name, WAKEUP_NEW.name, PROCESS_EXIT.name):
        pid = e.int("pid", -1)
        if e.name == WAKING.name:
            unpaired_waking += pid in pending
            pending[pid] = (e.cpu, e.int("target_cpu", -1))
            continue
        if e.name != WAKEUP.name:  # a new task of this pid, or its end: no wakeup will follow a waking left
            unpaired_waking += pending.pop(pid, None) is not None
            continue
        if pid not in pending:
            unpaired_wakeup += 1
            continue
        waker, prev = pending.pop(pid)
        chosen = e.int("target_cpu", -1)
        kind = _split(waker, chosen, llc, node)
        if kind is None or not (0 <= waker < n and 0 <= chosen < n):
            unplaced += 1
            continue
        kind = {"within_llc": "waker_llc", "between_llcs": "waker_node", "between_nodes": "other_node"}[kind]
        for scope in ("all", "workload") if pid in workload else ("all",):
            c = scopes[scope]
            c["wakeups"] += 1
            c[kind] += 1
            c["on_waker_cpu"] += chosen == waker
            c["on_previous_cpu"] += chosen == prev
            c["matrix"][waker][chosen] += 1
    return {
        "all": _with_shares(scopes["all"]),
        "workload": _with_shares(scopes["workload"]),
        "waking_unpaired": unpaired_waking + len(pending),
        "wakeup_unpaired": unpaired_wakeup,
        "unplaced": unplaced,
    }
