"""misplaced's placement (lab/workloads/misplaced/scale.py), the task on the memory's node: the local control."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.misplaced.scale import placement


def scale(topo: Topology, duration: float) -> dict[str, int]:
    return placement(topo, "misplaced-local")
