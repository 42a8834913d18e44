"""seed 000's numa04.sh: a process per node of its CPUs' threads."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.scaling import cpu_nodes, perf_numa_mem


def scale(topo: Topology, duration: float) -> dict[str, int]:
    cpus, nodes = topo.total_cpus, cpu_nodes(topo)
    return perf_numa_mem(topo, procs=nodes, threads=cpus // nodes, per_thread_mem=False)
