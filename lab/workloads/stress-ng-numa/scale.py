"""One stress-ng --numa instance per guest node with CPUs."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.scaling import cpu_nodes


def scale(topo: Topology, duration: float) -> dict[str, int]:
    return {"instances": cpu_nodes(topo)}
