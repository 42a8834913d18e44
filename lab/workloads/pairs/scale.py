"""pairs: a pair of tasks for every 4 guest CPUs; ``heavy`` adds pairs-heavy's working sets (its variants use it)."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.scaling import share_mib


def scale(topo: Topology, duration: float) -> dict[str, int]:
    return {"pairs": max(1, topo.total_cpus // 4)}


def heavy(topo: Topology, duration: float) -> dict[str, int]:
    """pairs-heavy's pairs and memory: each process up to 256 MiB of its own, numalab's share split over them."""
    pairs = scale(topo, duration)["pairs"]
    return {"pairs": pairs, "mem_mib_per_process": share_mib(topo, 2 * pairs, 256)}
