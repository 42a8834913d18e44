"""pairs-heavy: pairs' number of pairs (a pair for every 4 guest CPUs), each process up to 256 MiB of its own."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.pairs.scale import heavy


def scale(topo: Topology, duration: float) -> dict[str, int]:
    return heavy(topo, duration)
