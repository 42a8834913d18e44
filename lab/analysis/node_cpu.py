"""Busy CPU time per guest node over the workload, from ``/proc/stat`` before and after it.

The guest init saves ``/proc/stat`` next to ``vmstat.start`` and
``vmstat.end`` (``stat.start``, ``stat.end``). A CPU's busy time is
user + nice + system + irq + softirq + steal, its idle time idle + iowait,
both in USER_HZ ticks (100 per second on x86). Summed over each node's CPUs,
this shows whether the scheduler used a node or left it idle (seed 002: tasks
bound to nodes 1 and 3 that stay on one of them).
"""

from __future__ import annotations

from pathlib import Path

from lab.record_files import STAT_END, STAT_START
from lab.topology.model.topology import Topology
from lab.untrusted import read_guest_text, to_int

USER_HZ = 100


def read_cpu_ticks(path: Path) -> dict[int, tuple[int, int]]:
    """cpu -> (busy ticks, idle ticks) from a /proc/stat copy; {} if missing."""
    out: dict[int, tuple[int, int]] = {}
    for line in (read_guest_text(path) or "").splitlines():
        parts = line.split()
        cpu = to_int(parts[0][3:]) if parts and parts[0].startswith("cpu") else None
        v = [to_int(x) for x in parts[1:9]]
        if cpu is None or cpu < 0 or any(x is None or x < 0 for x in v):
            continue
        v += [0] * (8 - len(v))
        user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
        out[cpu] = (user + nice + system + irq + softirq + steal, idle + iowait)
    return out


def node_cpu_time(run_dir: Path, topo: Topology) -> dict:
    """{"busy_s": {node: s}, "idle_s": {node: s}, "busy_pct": {node: %}, "busiest_node", "idlest_node"} over
    the workload; {} without both snapshots."""
    start, end = read_cpu_ticks(run_dir / STAT_START), read_cpu_ticks(run_dir / STAT_END)
    if not start or not end:
        return {}
    busy: dict[str, float] = {}
    idle: dict[str, float] = {}
    pct: dict[str, float] = {}
    for node, cpus in zip(topo.nodes, topo.node_cpus()):
        if not cpus:
            continue
        b = sum(end.get(c, (0, 0))[0] - start.get(c, (0, 0))[0] for c in cpus) / USER_HZ
        i = sum(end.get(c, (0, 0))[1] - start.get(c, (0, 0))[1] for c in cpus) / USER_HZ
        busy[str(node.id)], idle[str(node.id)] = round(b, 2), round(i, 2)
        pct[str(node.id)] = round(100 * b / (b + i), 1) if b + i > 0 else 0.0
    if not busy:
        return {}
    return {
        "busy_s": busy,
        "idle_s": idle,
        "busy_pct": pct,
        "busiest_node": int(max(busy, key=lambda n: busy[n])),
        "idlest_node": int(min(busy, key=lambda n: busy[n])),
    }
