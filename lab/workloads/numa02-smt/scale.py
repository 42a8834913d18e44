"""numa02-smt's threads (half the guest's CPUs) and each one's private memory."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.scaling import share_mib


def scale(topo: Topology, duration: float) -> dict[str, int]:
    threads = max(1, topo.total_cpus // 2)
    return {"threads": threads, "mem_mib_per_thread": share_mib(topo, threads, 32)}
