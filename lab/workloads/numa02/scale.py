"""numa02's threads (one a guest CPU) and each one's private memory."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.scaling import share_mib


def scale(topo: Topology, duration: float) -> dict[str, int]:
    threads = max(1, topo.total_cpus)
    return {"threads": threads, "mem_mib_per_thread": share_mib(topo, threads, 32)}
