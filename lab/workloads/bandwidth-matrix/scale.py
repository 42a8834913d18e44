"""Per (CPU node, memory node) pair: a chase buffer and three stream arrays. Of latency-matrix's 32 MiB a pair,
16 for the chase (64x the remote-latency model's 256 KiB cache) and 4 for each array (16x), unless the guest is
too small."""

from __future__ import annotations

from lab.topology.model import Topology
from lab.workloads.scaling import share_mib


def scale(topo: Topology, duration: float) -> dict[str, int]:
    share = share_mib(topo, len(topo.cpu_nodes) * topo.n_nodes, 28)
    return {"mem_mib_per_pair": max(1, share * 4 // 7), "stream_mib": max(1, share // 7)}
