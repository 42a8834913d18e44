"""Per (CPU node, memory node) pair: a chase buffer and three stream arrays. Of latency-matrix's 32 MiB a pair,
16 for the chase (64x the remote-latency model's 256 KiB cache) and 4 for each array (16x), unless the guest is
too small. The pages moved: as many MiB as an array, in 4 KiB pages, and again (rounded down to whole 2 MiB, at least
one) in transparent huge pages."""

from __future__ import annotations

from lab.topology.model import Topology
from lab.workloads.scaling import share_mib


def scale(topo: Topology, duration: float) -> dict[str, int]:
    share = share_mib(topo, len(topo.cpu_nodes) * topo.n_nodes, 28)
    stream = max(1, share // 7)
    return {"mem_mib_per_pair": max(1, share * 4 // 7), "stream_mib": stream, "huge_mib": max(2, stream // 2 * 2)}
