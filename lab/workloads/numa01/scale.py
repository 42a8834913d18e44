"""numa01's threads (half the guest's CPUs, in each of its 2 processes) and each process's memory."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.scaling import share_mib


def scale(topo: Topology, duration: float) -> dict[str, int]:
    threads = max(1, topo.total_cpus // 2)
    return {"threads": threads, "mem_mib_per_process": share_mib(topo, 2, 3072)}
