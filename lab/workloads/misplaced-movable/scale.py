"""misplaced's placement of the task and its memory (lab/workloads/misplaced/scale.py)."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.misplaced.scale import placement


def scale(topo: Topology, duration: float) -> dict[str, int]:
    return placement(topo, "misplaced-movable")
