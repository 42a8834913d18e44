"""The NUMA topology model: nodes, CPUs, memory, SMT threads and a SLIT.

A :class:`Topology` is plain, immutable data. It is built from a spec file by
``lab.topology.model.spec`` and checked by :func:`validate`, which applies QEMU's and
the guest kernel's rules so that what we boot is what the kernel will use.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from lab.errors import LabError
from lab.topology.model.cpu_grid import CpuGrid, build_grid, grid_from_dict
from lab.topology.model.tiers import tiers_from_dict

LOCAL_DISTANCE = 10
MAX_DISTANCE = 255
MAX_NODES = 128
MAX_VCPUS = 288  # what QEMU's q35 machine accepts (-smp beyond it: "Invalid SMP CPUs")
MAX_NODE_MEMORY_MIB = 16 << 20  # 16 TiB a node: more than any host numalab runs on
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def check_name(name: object, field: str) -> str:
    """A name that becomes part of a file name (run ids, matrix directories): letters, digits and
    ``._+-``, at most 64, starting with a letter or digit, so never ``..``, ``/`` or a NUL."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise LabError(
            f"{field}: {name!r} is not a usable name (letters, digits and . _ + -, at most 64, "
            "starting with a letter or digit)"
        )
    return name


# The kernel clears SD_BALANCE_EXEC/FORK and SD_WAKE_AFFINE on NUMA levels
# further than this (node_reclaim_distance, RECLAIM_DISTANCE on x86).
RECLAIM_DISTANCE = 30


@dataclass(frozen=True)
class Node:
    id: int
    cpus: int
    memory_mib: int  # 0: a memoryless node (CPUs, no memory)


# A machine's LLCs as the memory model prices them (--coherence on; lab.vm.tcg.latency_model), when its spec gives
# no ``llc:``. The size is one LLC of a current server's node (an AMD CCD's L3, a sub-NUMA cluster's share of an Intel
# L3). The transfer is a line moved between two LLCs of one node: AMD Zen 4 across core complexes, up to about 80 ns
# (inside one complex about 15-19 ns: the model leaves a move inside an LLC free); docs/throughput.md.
DEFAULT_LLC_MIB = 32
DEFAULT_LLC_TRANSFER_NS = 80.0


@dataclass(frozen=True)
class LlcCosts:
    """The spec's ``llc:``: each LLC's size (MiB) and a line's move between two LLCs of one node (ns of guest time);
    None where the spec leaves it to the default."""

    size_mib: int | None = None
    transfer_ns: float | None = None

    @property
    def size(self) -> int:
        return DEFAULT_LLC_MIB if self.size_mib is None else self.size_mib

    @property
    def transfer(self) -> float:
        return DEFAULT_LLC_TRANSFER_NS if self.transfer_ns is None else self.transfer_ns

    def to_dict(self) -> dict:
        return {k: v for k, v in (("size_mib", self.size_mib), ("transfer_ns", self.transfer_ns)) if v is not None}


def llc_costs_from_dict(d: dict | None) -> LlcCosts | None:
    """A spec's or a manifest's ``llc:`` (None: not given)."""
    if not d:
        return None
    transfer = d.get("transfer_ns")
    return LlcCosts(d.get("size_mib"), None if transfer is None else float(transfer))


@dataclass(frozen=True)
class Topology:
    name: str
    nodes: tuple[Node, ...]
    distances: tuple[tuple[int, ...], ...]
    threads: int = 1
    links: tuple[tuple[int, int], ...] = ()
    description: str = ""
    source: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    tiers: Any = None  # lab.topology.model.tiers.MemoryTiers: slow (dax kmem) nodes, initiators, HMAT
    # remote/local memory latency per (CPU node, memory node), for --remote-latency table, where the SLIT is
    # not a latency ratio; None: not given (slit uses distance / 10)
    latency_ratio: tuple[tuple[float, ...], ...] | None = None
    # local/remote memory bandwidth per (CPU node, memory node), for the stream misses of --remote-latency;
    # None: not given (the latency ratios in use)
    bandwidth_ratio: tuple[tuple[float, ...], ...] | None = None
    # packages, LLCs (dies), clusters, cores and threads (lab.topology.model.cpu_grid); None: one package and one LLC
    # per node, numalab's layout before the grid (lab.vm.qemu.qemu_argv.smp_layout)
    cpu_grid: CpuGrid | None = None
    # the LLCs' size and a line's move between two of one node, for the memory model (None: the defaults)
    llc: LlcCosts | None = None

    @property
    def llc_costs(self) -> LlcCosts:
        """The spec's ``llc:``, or the defaults."""
        return self.llc or LlcCosts()

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def total_cpus(self) -> int:
        return sum(n.cpus for n in self.nodes)

    @property
    def total_memory_mib(self) -> int:
        return sum(n.memory_mib for n in self.nodes)

    @property
    def cpu_nodes(self) -> list[int]:
        """Ids of the nodes that have CPUs (the kernel's for_each_cpu_node)."""
        return [n.id for n in self.nodes if n.cpus > 0]

    @property
    def memoryless_nodes(self) -> list[int]:
        """Ids of the nodes with CPUs and no memory."""
        return [n.id for n in self.nodes if n.memory_mib == 0]

    def node_cpus(self) -> list[list[int]]:
        """vCPU ids of each node. vCPUs are numbered node by node."""
        out: list[list[int]] = []
        first = 0
        for n in self.nodes:
            out.append(list(range(first, first + n.cpus)))
            first += n.cpus
        return out

    def is_symmetric(self) -> bool:
        d = self.distances
        return all(d[i][j] == d[j][i] for i in range(len(d)) for j in range(len(d)))

    def hops(self) -> list[list[int]] | None:
        """Hop counts between nodes from the link graph, or None without links."""
        if not self.links:
            return None
        return hop_matrix(self.n_nodes, self.links)

    def with_overrides(
        self,
        cpus_per_node: int | None = None,
        mem_per_node_mib: int | None = None,
        threads: int | None = None,
    ) -> Topology:
        """A copy with per-node sizes replaced (CPU-less nodes stay CPU-less, memoryless ones memoryless); a CPU
        grid is laid again over the new sizes, with the same packages, LLCs a node and cluster size. On an uneven
        grid ``cpus_per_node`` is the CPUs of the nodes with the fewest LLCs, the others' in proportion."""
        llcs = self.node_llcs()
        uneven = self.cpu_grid is not None and self.cpu_grid.uneven
        nodes = tuple(
            Node(
                n.id,
                _scaled_cpus(cpus_per_node, llcs, n.id, uneven) if cpus_per_node is not None and n.cpus > 0 else n.cpus,
                mem_per_node_mib if mem_per_node_mib is not None and n.memory_mib > 0 else n.memory_mib,
            )
            for n in self.nodes
        )
        threads = threads if threads is not None else self.threads
        grid = self.cpu_grid
        if grid is not None:
            grid = build_grid(
                [n.cpus for n in nodes],
                threads,
                grid.packages,
                grid.llcs_per_node or None,
                grid.cores_per_cluster if grid.has_clusters else None,
                grid.vendor or None,
                [n or None for n in llcs] if grid.uneven else None,
                {"family": grid.cpu_model[0], "model": grid.cpu_model[1]} if grid.cpu_model else None,
            )
        topo = replace(self, nodes=nodes, threads=threads, cpu_grid=grid)
        validate(topo)
        return topo

    def node_llcs(self) -> list[int]:
        """Each node's LLCs (0 for a CPU-less node; 1 a CPU node without a grid)."""
        counts = iter(self.cpu_grid.llc_counts if self.cpu_grid is not None else ())
        return [0 if n.cpus == 0 else next(counts, 1) for n in self.nodes]

    def to_dict(self) -> dict:
        return (
            {
                "name": self.name,
                "description": self.description,
                "source": self.source,
                "nodes": self.n_nodes,
                "cpus": [n.cpus for n in self.nodes],
                "memory_mib": [n.memory_mib for n in self.nodes],
                "threads": self.threads,
                "total_cpus": self.total_cpus,
                "total_memory_mib": self.total_memory_mib,
                "node_cpus": self.node_cpus(),
                "distances": [list(r) for r in self.distances],
                "links": [list(link) for link in self.links],
            }
            | ({"tiers": self.tiers.to_dict()} if self.tiers else {})
            | ({"latency_ratio": [list(r) for r in self.latency_ratio]} if self.latency_ratio else {})
            | ({"bandwidth_ratio": [list(r) for r in self.bandwidth_ratio]} if self.bandwidth_ratio else {})
            | ({"cpu_grid": self.cpu_grid.to_dict()} if self.cpu_grid else {})
            | ({"llc": self.llc.to_dict()} if self.llc else {})
        )


def _scaled_cpus(cpus_per_node: int, llcs: list[int], node: int, uneven: bool) -> int:
    """A CPU node's share of ``cpus_per_node``: all of it, or on an uneven grid all of it on a node of the fewest
    LLCs and in proportion on one of more, or a one-line LabError when the fewest LLCs do not split it."""
    if not uneven:
        return cpus_per_node
    fewest = min(n for n in llcs if n)
    if cpus_per_node % fewest:
        raise LabError(
            f"cpus_per_node: {cpus_per_node} CPUs for the nodes of {fewest} LLCs (the fewest a node has here) do not "
            f"split into {fewest} LLCs"
        )
    return cpus_per_node // fewest * llcs[node]


def topology_from_dict(d: dict) -> Topology:
    """Inverse of :meth:`Topology.to_dict` (as stored in a run manifest)."""
    nodes = tuple(Node(i, c, m) for i, (c, m) in enumerate(zip(d["cpus"], d["memory_mib"])))
    topo = Topology(
        name=d["name"],
        nodes=nodes,
        distances=tuple(tuple(r) for r in d["distances"]),
        threads=d.get("threads", 1),
        links=tuple(tuple(x) for x in d.get("links", [])),
        description=d.get("description", ""),
        source=d.get("source", ""),
        tiers=_tiers_from_dict(d.get("tiers")),
        latency_ratio=tuple(tuple(float(x) for x in r) for r in d["latency_ratio"]) if d.get("latency_ratio") else None,
        bandwidth_ratio=(
            tuple(tuple(float(x) for x in r) for r in d["bandwidth_ratio"]) if d.get("bandwidth_ratio") else None
        ),
        cpu_grid=grid_from_dict(d.get("cpu_grid")),
        llc=llc_costs_from_dict(d.get("llc")),
    )
    validate(topo)
    return topo


def _tiers_from_dict(d: dict | None) -> Any:
    if not d:
        return None

    return tiers_from_dict(d)


def hop_matrix(n: int, links: tuple[tuple[int, int], ...] | list[tuple[int, int]]) -> list[list[int]]:
    """All-pairs hop counts (BFS) over an undirected link list."""
    adj: list[set[int]] = [set() for _ in range(n)]
    for a, b in links:
        adj[a].add(b)
        adj[b].add(a)
    out = []
    for src in range(n):
        dist = [-1] * n
        dist[src] = 0
        queue = deque([src])
        while queue:
            u = queue.popleft()
            for v in adj[u]:
                if dist[v] < 0:
                    dist[v] = dist[u] + 1
                    queue.append(v)
        out.append(dist)
    return out


def _check_node_fields(idx: int, node: Node, pre: str) -> None:
    """Node ``idx``'s id, CPU count and memory size, or a one-line LabError."""
    if node.id != idx:
        raise LabError(f"{pre}nodes[{idx}].id: node ids must be contiguous from 0, expected {idx} but got {node.id}")
    if node.cpus < 0:
        raise LabError(f"{pre}nodes[{idx}].cpus: must be >= 0, got {node.cpus}")
    if node.memory_mib < 0:
        raise LabError(f"{pre}nodes[{idx}].memory: must be 0 (a memoryless node) or more, got {node.memory_mib} MiB")
    if node.memory_mib == 0 and node.cpus == 0:
        raise LabError(
            f"{pre}nodes[{idx}]: a node needs CPUs or memory (memory 0 makes a memoryless node of one with CPUs)"
        )
    if node.memory_mib > MAX_NODE_MEMORY_MIB:
        raise LabError(f"{pre}nodes[{idx}].memory: at most {MAX_NODE_MEMORY_MIB >> 20}T a node")
    if node.cpus > MAX_VCPUS:
        raise LabError(f"{pre}nodes[{idx}].cpus: {node.cpus} vCPUs, at most {MAX_VCPUS} (QEMU's q35 limit)")


def _check_nodes(topo: Topology, pre: str) -> None:
    """The node count and every node's fields, or a one-line LabError."""
    n = topo.n_nodes
    if n < 1:
        raise LabError(f"{pre}nodes: at least one node is required")
    if n > MAX_NODES:
        raise LabError(f"{pre}nodes: {n} nodes given, at most {MAX_NODES} are supported")
    for idx, node in enumerate(topo.nodes):
        _check_node_fields(idx, node, pre)
    if topo.total_memory_mib <= 0:
        raise LabError(f"{pre}memory: at least one node must have memory")


def _check_cpus(topo: Topology, pre: str) -> None:
    """Threads, per-node CPU counts against them, and the total vCPU count, or a one-line LabError."""
    if topo.threads < 1:
        raise LabError(f"{pre}threads: must be >= 1, got {topo.threads}")
    for node in topo.nodes:
        if node.cpus % topo.threads:
            raise LabError(f"{pre}nodes[{node.id}].cpus: {node.cpus} CPUs is not a multiple of threads={topo.threads}")
    if topo.total_cpus < 1:
        raise LabError(f"{pre}cpus: at least one node must have CPUs")
    if topo.total_cpus > MAX_VCPUS:
        raise LabError(f"{pre}cpus: {topo.total_cpus} vCPUs in all, at most {MAX_VCPUS} (QEMU's q35 limit)")
    grid = topo.cpu_grid
    if grid is not None and (grid.total_cpus != topo.total_cpus or grid.threads != topo.threads):
        raise LabError(
            f"{pre}cpu_grid: {grid.total_cpus} vCPUs of {grid.threads} thread(s) a core, where the nodes have "
            f"{topo.total_cpus} of {topo.threads}"
        )


def _distance_error(i: int, j: int, v: int) -> str | None:
    """What is wrong with SLIT entry ``[i][j]`` = ``v`` (without the prefix), or None."""
    if i == j and v != LOCAL_DISTANCE:
        return f"distances[{i}][{j}]: local distance must be {LOCAL_DISTANCE}, got {v}"
    if i != j and not LOCAL_DISTANCE < v <= MAX_DISTANCE:
        why = " (the kernel discards the whole SLIT for a remote distance <= 10)" if v <= 10 else ""
        return f"distances[{i}][{j}]: remote distance must be in {LOCAL_DISTANCE + 1}..{MAX_DISTANCE}, got {v}{why}"
    return None


def _check_distances(topo: Topology, pre: str) -> None:
    """The SLIT's shape and every entry, or a one-line LabError."""
    n = topo.n_nodes
    d = topo.distances
    if len(d) != n or any(len(row) != n for row in d):
        raise LabError(f"{pre}distances: must be a {n}x{n} matrix for {n} nodes")
    for i in range(n):
        for j in range(n):
            wrong = _distance_error(i, j, d[i][j])
            if wrong:
                raise LabError(f"{pre}{wrong}")


def _check_links(topo: Topology, pre: str) -> None:
    """Every link joins two distinct existing nodes, or a one-line LabError."""
    n = topo.n_nodes
    for a, b in topo.links:
        if not (0 <= a < n and 0 <= b < n) or a == b:
            raise LabError(f"{pre}links: [{a}, {b}] is not a link between two distinct nodes 0..{n - 1}")


def validate(topo: Topology, where: str = "") -> None:
    """Raise a one-line LabError naming the offending field, or return."""
    pre = f"{where}: " if where else ""
    _check_nodes(topo, pre)
    _check_cpus(topo, pre)
    _check_distances(topo, pre)
    _check_links(topo, pre)
    if topo.tiers is not None:
        topo.tiers.check(topo, pre)
