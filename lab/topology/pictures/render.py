"""Pictures of a topology: the SLIT as a table, the links as ASCII, and the parts both the text and the
HTML report draw from (which node pairs are edges, how an edge is labelled, how far each SLIT entry is).

The edges and the distance table are worked out here once, from plain distance
matrices and link lists, so that ``numalab topo show`` and the HTML report
(which has only the run record's topology as data) cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lab.cpulist import format_cpulist
from lab.topology.model.cpu_grid import CpuGrid
from lab.topology.model.topology import LOCAL_DISTANCE, Topology

Distances = Sequence[Sequence[int]]


@dataclass(frozen=True)
class DistanceCell:
    value: int
    far: float | None  # None on the diagonal; else 0 (local distance) .. 1 (the table's largest distance)


def distance_grid(distances: Distances) -> list[list[DistanceCell]]:
    """The SLIT with each remote entry's place between the local distance and the table's largest one."""
    hi = max((v for row in distances for v in row), default=LOCAL_DISTANCE)
    span = hi - LOCAL_DISTANCE

    def far(v: int) -> float:
        return (v - LOCAL_DISTANCE) / span if span > 0 else 0

    return [[DistanceCell(v, None if i == j else far(v)) for j, v in enumerate(row)] for i, row in enumerate(distances)]


def distance_table(topo: Topology) -> str:
    """numactl -H style 'node distances:' table."""
    n = topo.n_nodes
    w = max(3, len(str(n - 1)) + 1)
    lines = ["node distances:", "node " + "".join(f"{j:>{w}}" for j in range(n))]
    for i, row in enumerate(distance_grid(topo.distances)):
        lines.append(f"{i:>3}: " + "".join(f"{c.value:>{w}}" for c in row))
    return "\n".join(lines)


def nearest_pairs(distances: Distances) -> list[tuple[int, int]]:
    """Every node joined to its nearest other node(s) (by its own row of the SLIT), as sorted (a < b) pairs.

    A pair is an edge when it is nearest for either end: a CPU-less node far from all others still gets
    joined to the nodes nearest to it."""
    n = len(distances)
    pairs = set()
    for i in range(n):
        remote = [distances[i][j] for j in range(n) if j != i]
        if remote:
            near = min(remote)
            pairs |= {(min(i, j), max(i, j)) for j in range(n) if j != i and distances[i][j] == near}
    return sorted(pairs)


def edges(distances: Distances, links: Sequence[Sequence[int]] | None = None) -> list[tuple[int, int]]:
    """The spec's links, or for an explicit matrix without links the nearest-neighbour pairs; (a < b), sorted."""
    if links:
        return sorted({(min(a, b), max(a, b)) for a, b in links})
    return nearest_pairs(distances)


def edge_label(distances: Distances, a: int, b: int) -> str:
    """The SLIT distance of a pair: one number, or 'a->b/b->a' when the SLIT is asymmetric there."""
    ab, ba = distances[a][b], distances[b][a]
    return str(ab) if ab == ba else f"{ab}/{ba}"


def link_picture(topo: Topology) -> str:
    """One line per node: its CPUs/memory and its links with their distances."""
    cpus = topo.node_cpus()
    pairs = edges(topo.distances, topo.links)
    lines = ["links (" + ("from the spec" if topo.links else "nearest neighbours in the SLIT") + "):"]
    for node in topo.nodes:
        peers = [(b if a == node.id else a) for a, b in pairs if node.id in (a, b)]
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


def _per_node(grid: CpuGrid, cpu_nodes: list[int]) -> str:
    """``2 LLC(s) a node, 1 node(s) a package``, or an uneven grid's LLCs node by node and nodes package by
    package."""
    nodes = grid.package_nodes()
    if not grid.uneven:
        return f"{grid.llcs_per_node} LLC(s) a node, {nodes[0]} node(s) a package"
    llcs = ", ".join(f"node {i} {n}" for i, n in zip(cpu_nodes, grid.llc_counts))
    per_package = f"{nodes[0]} node(s) a package" if len(set(nodes)) == 1 else f"nodes a package {list(nodes)}"
    return f"uneven LLCs a node ({llcs}), {per_package}"


def cpu_lines(topo: Topology, cpus_view: dict) -> list[str]:
    """The machine below its nodes (``cpu_view.predict_cpus()``): packages, LLCs and their CPUs, memoryless
    nodes, and each distinct stack of sched domains below NUMA."""
    grid = topo.cpu_grid
    lines = []
    if grid is not None:
        clusters = (
            f", {grid.clusters_per_die} clusters of {grid.cores_per_cluster} cores an LLC" if grid.has_clusters else ""
        )
        lines.append(
            f"cpus: {grid.packages} package(s) x {grid.dies_per_package} LLC(s) (dies){clusters}, "
            f"{grid.cores_per_die} cores x {grid.threads} thread(s) an LLC; {_per_node(grid, topo.cpu_nodes)}; "
            f"CPUID vendor {cpus_view['vendor']}" + (f", {grid.cpu_model_text}" if grid.cpu_model else "")
        )
    else:
        lines.append("cpus: a package and an LLC a node (no packages/llcs_per_node/cores_per_cluster in the spec)")
    cpus = cpus_view["cpus"]
    llcs: dict[str, int] = {}
    for c in cpus:
        llcs.setdefault(c["l3_cpus"], c["package"])
    for span, package in llcs.items():
        lines.append(f"  package {package}  LLC cpus {span}")
    if cpus_view["memoryless_nodes"]:
        lines.append(f"  memoryless nodes {cpus_view['memoryless_nodes']}: their CPUs' memory comes from other nodes")
    costs = topo.llc_costs
    if topo.llc is not None or max(topo.node_llcs(), default=1) > 1:
        given = "the spec's llc:" if topo.llc is not None else "the defaults; a spec's llc: sets them"
        lines.append(
            f"  memory model (--coherence on): {costs.size} MiB an LLC, a line {costs.transfer:g} ns between two LLCs "
            f"of a node ({given})"
        )
    seen: set[str] = set()
    lines.append("sched domains below NUMA (cpu: name span, ...):")
    for v, c in enumerate(cpus):
        names = {"PKG": "PKG (DIE before 6.8)"}
        stack = ", ".join(f"{names.get(d['name'], d['name'])} {d['cpus']}" for d in c["domains"]) or "(none)"
        shape = ",".join(d["name"] for d in c["domains"])
        if shape not in seen:
            seen.add(shape)
            lines.append(f"  cpu {v}: {stack}")
    return lines
