"""One buffer per (CPU node, memory node) pair, 32 MiB (128x the remote-latency model's 256 KiB cache, and
as large as a host's last-level cache: the buffers together are larger) unless the guest is too small."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.scaling import share_mib


def scale(topo: Topology, duration: float) -> dict[str, int]:
    return {"mem_mib_per_pair": share_mib(topo, len(topo.cpu_nodes) * topo.n_nodes, 32)}
