"""Per (CPU node, memory node) pair: a chase buffer and three stream arrays. Of latency-matrix's 32 MiB a pair,
16 for the chase (64x the remote-latency model's 256 KiB cache) and 4 for each array (16x), unless the guest is
too small. The pages moved: as many MiB as an array in 4 KiB pages, and four times that in transparent huge pages
(whole 2 MiB, at least one): a move's own costs (its system call, draining the LRU caches, the other CPUs' work it
waits for) are then a small part of what a MiB costs."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.scaling import share_mib


def scale(topo: Topology, duration: float) -> dict[str, int]:
    share = share_mib(topo, len(topo.cpu_nodes) * topo.n_nodes, 28)
    stream = max(1, share // 7)
    huge = max(2, stream * 4 // 2 * 2)  # whole huge pages
    return {"mem_mib_per_pair": max(1, share * 4 // 7), "stream_mib": stream, "huge_mib": huge}
