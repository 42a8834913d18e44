"""One stress-ng --vm instance per guest CPU, sharing the memory a workload may touch."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.workload_type import MEM_SHARE


def scale(topo: Topology, duration: float) -> dict[str, int]:
    n = max(1, topo.total_cpus)
    return {"instances": n, "mib_per_instance": max(4, int(topo.total_memory_mib * MEM_SHARE) // n)}
