"""pairs-heavy-one-node: pairs-heavy's pairs and memory (a pair for every 4 guest CPUs, each process up to 256 MiB
of its own), every side started on node 0."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.pairs.scale import scale as pairs_scale
from lab.workloads.scaling import share_mib


def scale(topo: Topology, duration: float) -> dict[str, int]:
    pairs = pairs_scale(topo, duration)["pairs"]
    return {"pairs": pairs, "mem_mib_per_process": share_mib(topo, 2 * pairs, 256), "start_node": 0}
