"""pairs: a pair of tasks for every 4 guest CPUs."""

from __future__ import annotations

from lab.topology.model.topology import Topology


def scale(topo: Topology, duration: float) -> dict[str, int]:
    return {"pairs": max(1, topo.total_cpus // 4)}
