"""Text pictures of a topology: the SLIT as a table and the links as ASCII."""

from __future__ import annotations

from lab.cpulist import format_cpulist
from lab.topology.model import Topology


def distance_table(topo: Topology) -> str:
    """numactl -H style 'node distances:' table."""
    n = topo.n_nodes
    w = max(3, len(str(n - 1)) + 1)
    lines = ["node distances:", "node " + "".join(f"{j:>{w}}" for j in range(n))]
    for i in range(n):
        lines.append(f"{i:>3}: " + "".join(f"{topo.distances[i][j]:>{w}}" for j in range(n)))
    return "\n".join(lines)


def _edges(topo: Topology) -> list[tuple[int, int]]:
    """Links, or for an explicit matrix the nearest-neighbour pairs."""
    if topo.links:
        return sorted({(min(a, b), max(a, b)) for a, b in topo.links})
    n = topo.n_nodes
    edges = []
    for i in range(n):
        remote = [topo.distances[i][j] for j in range(n) if j != i]
        if remote:
            near = min(remote)
            edges += [(i, j) for j in range(i + 1, n) if topo.distances[i][j] == near]
    return edges


def link_picture(topo: Topology) -> str:
    """One line per node: its CPUs/memory and its links with their distances."""
    cpus = topo.node_cpus()
    edges = _edges(topo)
    lines = ["links (" + ("from the spec" if topo.links else "nearest neighbours in the SLIT") + "):"]
    for node in topo.nodes:
        peers = [(b if a == node.id else a) for a, b in edges if node.id in (a, b)]
        cpu = f"cpus {format_cpulist(cpus[node.id])}" if node.cpus else "no cpus"
        links = "  ".join(f"--{topo.distances[node.id][p]}-- [{p}]" for p in peers) or "(no links)"
        lines.append(f"  [{node.id}] ({cpu}, {node.memory_mib}M)  {links}")
    return "\n".join(lines)


def group_lines(view: dict) -> list[str]:
    """The predicted sched groups of ``kernel_view.predict()``, one line per node and NUMA level."""
    rows = view.get("sched_groups") or []
    if not rows:
        return []
    lines = ["sched groups of the NUMA domains (as 6.1 builds them; the CPU's own group first):"]
    for r in rows:
        groups = " ".join("(" + ",".join(map(str, g)) + ")" for g in r["group_nodes"])
        cpus = " ".join("{" + g + "}" for g in r["groups"])
        lines.append(f"  node {r['node']} level {r['level']} (distance {r['distance']}): nodes {groups}  cpus {cpus}")
    return lines
