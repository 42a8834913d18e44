"""seed 000's numa05.sh: 2 processes per node, half its CPUs' threads each."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.scaling import cpu_nodes, perf_numa_mem


def scale(topo: Topology, duration: float) -> dict[str, int]:
    cpus, nodes = topo.total_cpus, cpu_nodes(topo)
    return perf_numa_mem(topo, procs=2 * nodes, threads=cpus // (2 * nodes), per_thread_mem=False)
