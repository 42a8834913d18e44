"""seed 000's numa02.sh: 1 process of a thread per CPU, each thread's memory its own."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.scaling import perf_numa_mem


def scale(topo: Topology, duration: float) -> dict[str, int]:
    cpus = topo.total_cpus
    return perf_numa_mem(topo, procs=1, threads=cpus, per_thread_mem=True)
