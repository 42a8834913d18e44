"""seed 000's numa01.sh: 2 processes of half the CPUs' threads, process-shared memory."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.scaling import perf_numa_mem


def scale(topo: Topology, duration: float) -> dict[str, int]:
    cpus = topo.total_cpus
    return perf_numa_mem(topo, procs=2, threads=cpus // 2, per_thread_mem=False)
