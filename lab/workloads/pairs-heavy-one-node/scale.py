"""pairs-heavy-one-node: pairs-heavy's pairs and memory, every side started on node 0."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.pairs.scale import heavy


def scale(topo: Topology, duration: float) -> dict[str, int]:
    return {**heavy(topo, duration), "start_node": 0}
