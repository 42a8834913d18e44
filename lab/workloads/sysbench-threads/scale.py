"""sysbench threads: two threads per guest CPU."""

from __future__ import annotations

from lab.topology.model.topology import Topology


def scale(topo: Topology, duration: float) -> dict[str, int]:
    return {"threads": 2 * max(1, topo.total_cpus)}
