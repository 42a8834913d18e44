"""Where each task of the workload ran, second by second: per-task node residency, convergence and ping-pong.

Declared in :data:`lab.analysis.numa.ANALYSES` (the LISA way: the events next to the analysis) and traced by
default. A task's CPU is known from three events:

* ``sched_wakeup_new``: where a new task starts (``target_cpu``);
* ``sched_migrate_task``: every change of a task's CPU (``set_task_cpu``: load balancing, wake-up placement,
  NUMA moves and swaps alike), ``orig_cpu`` -> ``dest_cpu``;
* ``sched_process_exit`` (when traced): where its life ends; otherwise the trace's last event does.

A task of the workload is one created while the trace ran (a ``sched_wakeup_new``) or one NUMA balancing
decided about, less the guest init's own helpers (:data:`HELPERS`) and kernel threads (kthreadd's children).
"On a node" means assigned to one of its CPUs (running or waiting there), as the scheduler sees it.

Figures (times in seconds from the workload's start, ``t0``):

* ``seconds``: per task and per interval (``bin_s``), the time on each node;
* ``node``: per task and interval, the node it spent most of that interval on (None: not alive);
* convergence is defined only for a task that had somewhere to converge to: one NUMA balancing decided
  about (a sched_move_numa, sched_swap_numa or sched_stick_numa naming it; its ``dst_nid`` is the node
  balancing preferred for it). A task no decision named (every task with balancing off, or on one node) has
  ``converged_s`` None and ``target`` False: it never had to move, and "settled at once" would reward that.
  Its ``target_node`` is the node the last such decision named for it (a move's or swap's destination, a
  stick's wanted node); a task whose final node is not that one did not converge (a stick: balancing could
  not move it there). A task with a target has *settled* in the first interval from which every later
  interval's node is its final one, provided it stayed there :data:`SETTLED_MIN_BINS` intervals or more (else
  it did not converge); a last interval it lived less than half of (its exit) is not counted. Its
  ``converged_s`` is not that
  interval's start but the trace's own time of its last arrival on the final node before that interval
  ended (its start, if it never arrived from elsewhere): intervals find where it settled, the events say when.
  The workload's ``convergence_s`` is the last settling time among the tasks with a target, one that never
  settled counting as the window's end; None (n/a) when no task had a target;
* ping-pong: a task that left node A and was moved back to A within :data:`PINGPONG_WINDOW_S`
  (``pingpong``: any migrations; ``pingpong_numa``: both moves were NUMA-balancing decisions, sched_move_numa
  or sched_swap_numa). Defined only where a task can change node: None on a one-node topology; the NUMA
  ping-pongs, only where balancing decided about some task (None otherwise, as for convergence);
* settling, from the generic events alone, so defined for any scheduler (the fair class, a sched_ext one):
  each task's ``settle`` and ``settled_s`` (:func:`settling`: convergence's rule without a target, for a task
  that changed node: the time of its last arrival on the node it ended on, if from then on that was the node
  it spent most of each interval on, for :data:`SETTLED_MIN_S` or more; n/a for a task that never changed node
  or lived less than that). The workload's ``settled_s`` is the last settling time among the tasks that changed
  node, one still moving counting as the window's end; None (n/a) when no task changed node. It says when
  the placement stopped changing, not whether it was a good one (a task can settle on the wrong node);
* migrations (every ``sched_migrate_task`` of the workload's tasks): ``migrations_between_nodes`` (its
  ``node_changes``; None on one node) and ``migrations_within_node``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from lab.events import MIGRATE_TASK, MOVE_NUMA, PROCESS_EXIT, STICK_NUMA, SWAP_NUMA, WAKEUP_NEW
from lab.topology.model.topology import Topology

if TYPE_CHECKING:
    from lab.trace.tracedat import TraceData

BIN_S = 1.0  # the interval: vmstat's default (the plan's vmstat_interval_s)
PINGPONG_WINDOW_S = 1.0  # back to the node it left within this: a ping-pong
SETTLED_MIN_BINS = 2  # on the final node for at least this many intervals: converged
SETTLED_MIN_S = SETTLED_MIN_BINS * BIN_S  # on the final node for at least this long to its end: settled
SETTLE_KINDS = ("settled", "moving", "stayed", "short")  # a task's ``settle`` (:func:`settling`)
MAX_TASKS = 64  # tasks kept per run (the most moved first); the workload figures count every task
MAX_MARKS = 2000  # move/swap/stick marks kept for the strip
# The guest init's own processes (busybox applets, the trace grabber), never the workload's.
HELPERS = frozenset({"sh", "sleep", "cat", "grep", "busybox", "init", "numalab-tracegr", "numalab-tracegrab",
                     "trace-cmd", "dmesg", "tar", "cp", "kill", "poweroff", "umount", "rm"})  # fmt: skip


KTHREADD = 2  # the parent of every kernel thread


def _node_of(topo: Topology) -> dict[int, int]:
    return {cpu: node for node, cpus in enumerate(topo.node_cpus()) for cpu in cpus}


def _marks(trace: TraceData, t0: float) -> tuple[dict[int, list], list[tuple[float, int, int]]]:
    """pid -> [[t, kind, src_nid, dst_nid], ...] (NUMA decisions), and the NUMA moves as (ts, pid, dst_nid)."""
    marks: dict[int, list] = defaultdict(list)
    numa_moves: list[tuple[float, int, int]] = []
    for e in trace.named(MOVE_NUMA.name, SWAP_NUMA.name, STICK_NUMA.name):
        t = round(e.ts - t0, 4)
        if e.name == MOVE_NUMA.name:
            pid, s, d = e.int("pid", -1), e.int("src_nid", -1), e.int("dst_nid", -1)
            marks[pid].append([t, "move", s, d])
            numa_moves.append((e.ts, pid, d))
        elif e.name == SWAP_NUMA.name:
            a, b = e.int("src_pid", -1), e.int("dst_pid", -1)
            s, d = e.int("src_nid", -1), e.int("dst_nid", -1)
            marks[a].append([t, "swap", s, d])
            marks[b].append([t, "swap", d, s])
            numa_moves += [(e.ts, a, d), (e.ts, b, s)]
        else:
            marks[e.int("src_pid", -1)].append([t, "stick", e.int("src_nid", -1), e.int("dst_nid", -1)])
    return marks, numa_moves


def _timelines(trace: TraceData, node_of: dict[int, int], end: float):
    """pid -> [(ts, node)] changes of node (first entry: where it started), pid -> (start, end), pid -> comm, the
    pids created while the trace ran, and pid -> its migrations that stayed within a group (``node_of``'s)."""
    changes: dict[int, list[tuple[float, int]]] = {}
    life: dict[int, list[float]] = {}
    comm: dict[int, str] = {}
    created: set[int] = set()
    within: Counter = Counter()
    for e in trace.named(WAKEUP_NEW.name, MIGRATE_TASK.name, PROCESS_EXIT.name):
        pid = e.int("pid", -1)
        if pid <= 0:
            continue
        comm[pid] = e.fields.get("comm", e.comm)
        if e.name == WAKEUP_NEW.name:
            node = node_of.get(e.int("target_cpu", -1))
            if node is not None and pid not in changes:
                changes[pid] = [(e.ts, node)]
                life[pid] = [e.ts, end]
                if e.pid != KTHREADD:  # (the event comes from the parent: kthreadd's children are kernel threads)
                    created.add(pid)
        elif e.name == MIGRATE_TASK.name:
            a, b = node_of.get(e.int("orig_cpu", -1)), node_of.get(e.int("dest_cpu", -1))
            if a is None or b is None:
                continue
            if pid not in changes:  # alive before the trace: on orig_cpu's node since then
                changes[pid] = [(-1.0, a)]
                life[pid] = [-1.0, end]
            if changes[pid][-1][1] != b:
                changes[pid].append((e.ts, b))
            elif a == b:
                within[pid] += 1
        elif pid in life:
            life[pid][1] = e.ts
    return changes, life, comm, created, within


def interval_seconds(segs: list[tuple[float, float, int]], n_bins: int, n_nodes: int, t0: float) -> list[list[float]]:
    out = [[0.0] * n_nodes for _ in range(n_bins)]
    for a, b, node in segs:
        a, b = max(a - t0, 0.0), max(b - t0, 0.0)
        i = int(a // BIN_S)
        while a < b and i < n_bins:
            edge = min(b, (i + 1) * BIN_S)
            out[i][node] += edge - a
            a, i = edge, i + 1
    return [[round(x, 3) for x in row] for row in out]


def _settled(nodes: list[int | None], seconds: list[list[float]]) -> int | None:
    """The first interval from which every later interval's node is the final one (None: not converged). A last
    interval the task lived less than half of (its exit, the workload's end) is not counted."""
    alive = [i for i, n in enumerate(nodes) if n is not None]
    if len(alive) > 1 and sum(seconds[alive[-1]]) < BIN_S / 2:
        alive.pop()
    if not alive:
        return None
    final = nodes[alive[-1]]
    first = alive[-1]
    for i in reversed(alive):
        if nodes[i] != final:
            break
        first = i
    return first if alive[-1] - first + 1 >= SETTLED_MIN_BINS or first == alive[0] else None


def arrival(seq: list[tuple[float, int]], settled_bin: int, born: float, t0: float, final: int | None = None) -> float:
    """When a task that settled in interval ``settled_bin`` arrived on its final node (``final``; by default the
    node of its last change): the time (from ``t0``) of its last change of node to that node before the interval
    ended, or its start if it was there from its start; never before it started."""
    final = seq[-1][1] if final is None else final
    edge = t0 + (settled_bin + 1) * BIN_S
    start = max(born, t0)
    came = [t for (t, n), (_t, prev) in zip(seq[1:], seq, strict=False) if n == final and prev != final and t < edge]
    return round(max(came[-1], start) - t0 if came else start - t0, 4)


def settling(
    seq: list[tuple[float, int]],
    nodes: list[int | None],
    seconds: list[list[float]],
    born: float,
    died: float,
    t0: float,
) -> dict:
    """When a task settled, from its changes of node alone (any scheduler; the module docstring). By the rule
    convergence uses (:func:`_settled`), without its target: from the first interval from which the node the
    task spent most of each interval on is its final one, for :data:`SETTLED_MIN_BINS` intervals or more (so a
    visit of a few milliseconds to another node does not unsettle it). ``settle`` is

    * ``short``: it lived less than :data:`SETTLED_MIN_S` in the window (too short to tell);
    * ``stayed``: it never changed node in the window (nothing to settle: n/a, not 0, which would reward never
      moving a task that started on the wrong node);
    * ``moving``: it changed node, and never stayed on its final node that long to its end;
    * ``settled``: it did; its ``settled_s`` is the trace's time (from ``t0``) of its last arrival on that node
      before the interval it settled in ended (its start, if it was there from its start).
    """
    start = max(born, t0)
    if died - start < SETTLED_MIN_S:
        return {"settle": "short", "settled_s": None}
    if not any(t > start for t, _n in seq[1:]):
        return {"settle": "stayed", "settled_s": None}
    first = _settled(nodes, seconds)
    if first is None:
        return {"settle": "moving", "settled_s": None}
    return {"settle": "settled", "settled_s": arrival(seq, first, born, t0, nodes[first])}


def preferred(marks: list) -> int | None:
    """The node the last NUMA decision about a task named for it (``[t, kind, src_nid, dst_nid]`` marks, in
    trace order): its destination; None without one (no decision, or a field the trace did not have)."""
    last = marks[-1] if marks else None
    return last[3] if last is not None and isinstance(last[3], int) and last[3] >= 0 else None


def pingpongs(changes: list[tuple[float, int]], window: float = PINGPONG_WINDOW_S) -> int:
    """Returns to the node a task left, within ``window`` seconds of leaving it."""
    count = 0
    for (_t, prev), (t_left, _mid), (t_back, back) in zip(changes, changes[1:], changes[2:], strict=False):
        if back == prev and t_back - t_left <= window:
            count += 1
    return count


def _pingpong_numa(numa_moves: list[tuple[float, int, int]], starts: dict[int, int], window: float) -> Counter:
    """Per pid: NUMA moves (move/swap) that took a task back to the node a NUMA move took it from, in ``window``."""
    by_pid: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for ts, pid, dst in sorted(numa_moves):
        by_pid[pid].append((ts, dst))
    out: Counter = Counter()
    for pid, moves in by_pid.items():
        seq = [(-1.0, starts.get(pid, -1)), *moves] if pid in starts else moves
        out[pid] = pingpongs(seq, window)
    return out


def _segments(seq: list[tuple[float, int]], born: float, died: float, t0: float) -> list[tuple[float, float, int]]:
    """A task's stays as (start, end, group) in trace time, from its changes of group, within its life."""
    times = [max(t, born) if t >= 0 else max(born, t0) for t, _n in seq]
    return [(a, b, n) for (a, (_t, n), b) in zip(times, seq, [*times[1:], died], strict=True) if b > a]


def _workload(trace: TraceData, group_of: dict[int, int], t0: float):
    """The trace's end, the timelines of :func:`_timelines` over ``group_of``, the NUMA marks, and the pids of
    the workload's tasks (see the module docstring)."""
    every = [e.ts for e in trace.events]
    end = max(every) if every else t0
    changes, life, comm, created, within = _timelines(trace, group_of, end)
    marks, numa_moves = _marks(trace, t0)
    workload = [
        p for p in changes if (p in created or p in marks) and comm.get(p, "") not in HELPERS and life[p][1] > t0
    ]
    return end, changes, life, comm, marks, numa_moves, workload, within


def stays(trace: TraceData, group_of: dict[int, int], t0: float) -> dict[int, list[tuple[float, float, int]]]:
    """Per task of the workload, its stays on groups of CPUs (``group_of``: CPU -> its node, its LLC, ...) as
    (start, end, group) in trace time: what :func:`residency` bins per node, for any grouping of the CPUs."""
    _end, changes, life, _comm, _marks_, _moves, workload, _within = _workload(trace, group_of, t0)
    return {p: _segments(changes[p], *life[p], t0) for p in workload}


def residency(trace: TraceData, topo: Topology, t0: float) -> dict:
    """Per-task node residency over time, convergence and ping-pong (see the module docstring)."""
    end, changes, life, comm, marks, numa_moves, workload, within = _workload(trace, _node_of(topo), t0)
    n_bins = max(1, int((end - t0) // BIN_S) + (1 if (end - t0) % BIN_S else 0))
    window_s = round(end - t0, 3)
    tasks = []
    starts = {p: changes[p][0][1] for p in workload}
    pp_numa = _pingpong_numa(numa_moves, starts, PINGPONG_WINDOW_S)
    for pid in workload:
        seq = changes[pid]
        born, died = life[pid]
        segs = _segments(seq, born, died, t0)
        seconds = interval_seconds(segs, n_bins, topo.n_nodes, t0)
        nodes = [max(range(topo.n_nodes), key=row.__getitem__) if sum(row) > 0 else None for row in seconds]
        target, target_node = pid in marks, preferred(marks.get(pid, []))
        settled = _settled(nodes, seconds) if target and target_node in (None, seq[-1][1]) else None
        tasks.append({
            "pid": pid,
            "comm": comm.get(pid, ""),
            "start_s": round(max(born, t0) - t0, 4),
            "end_s": round(died - t0, 4),
            "node_changes": len(seq) - 1,
            "migrations_within_node": within.get(pid, 0),
            "final_node": seq[-1][1],
            "target": target,
            "target_node": target_node,
            "converged_s": None if settled is None else arrival(seq, settled, born, t0),
            **settling(seq, nodes, seconds, born, died, t0),
            "pingpong": pingpongs(seq),
            "pingpong_numa": pp_numa.get(pid, 0),
            "seconds": seconds,
            "node": nodes,
            "segments": [[round(max(a, t0) - t0, 4), round(b - t0, 4), n] for a, b, n in segs][:500],
            "marks": marks.get(pid, [])[:MAX_MARKS],
        })  # fmt: skip
    tasks.sort(key=lambda t: (-t["node_changes"], t["pid"]))
    summary = workload_summary(tasks, window_s, topo.n_nodes)
    return {
        "bin_s": BIN_S,
        "window_s": window_s,
        "pingpong_window_s": PINGPONG_WINDOW_S,
        "settled_min_bins": SETTLED_MIN_BINS,
        "settled_min_s": SETTLED_MIN_S,
        "workload": summary,
        "tasks": sorted(tasks[:MAX_TASKS], key=lambda t: t["pid"]),
        "tasks_left_out": max(0, len(tasks) - MAX_TASKS),
    }


def workload_summary(tasks: list[dict], window_s: float, n_nodes: int) -> dict:
    """The workload's figures from its tasks' (see the module docstring): convergence over the tasks with a
    target only (None: no task had one), ping-pongs None where no task can change node (one node), the NUMA
    ping-pongs None where no task had a target."""
    aimed = [t for t in tasks if t.get("target")]
    conv = [t["converged_s"] if t["converged_s"] is not None else window_s for t in aimed]
    several = n_nodes > 1
    moved = [t for t in tasks if t.get("settle") in ("settled", "moving")]
    settled = [t["settled_s"] if t["settle"] == "settled" else window_s for t in moved]
    return {
        "tasks": len(tasks),
        "targeted": len(aimed),
        "converged": sum(t["converged_s"] is not None for t in aimed),
        "convergence_s": max(conv) if conv else None,
        "pingpong": sum(t["pingpong"] for t in tasks) if several and tasks else None,
        "pingpong_numa": sum(t["pingpong_numa"] for t in tasks) if several and aimed else None,
        "node_changes": sum(t["node_changes"] for t in tasks),
        # Any scheduler's (the generic events only): how the tasks moved, and when those that moved settled.
        "migrations_between_nodes": sum(t["node_changes"] for t in tasks) if several and tasks else None,
        "migrations_within_node": sum(t.get("migrations_within_node", 0) for t in tasks) if tasks else None,
        **{k: sum(t.get("settle") == k for t in tasks) for k in SETTLE_KINDS},
        "settled_s": max(settled) if settled else None,
    }
