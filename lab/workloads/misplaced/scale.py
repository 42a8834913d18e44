"""The memory on the first node with CPUs, the task on the node with CPUs farthest from it by the SLIT (the lowest
id among equals), and as much memory as the memory's node can spare, at most 64 MiB."""

from __future__ import annotations

from lab.errors import LabError
from lab.topology.model.topology import Topology
from lab.workloads.workload_type import MEM_SHARE


def placement(topo: Topology, workload: str) -> dict[str, int]:
    """The placement, for ``misplaced`` and the workloads that share it (a refusal names ``workload``)."""
    nodes = topo.cpu_nodes
    if len(nodes) < 2:
        raise LabError(f"--workload {workload}: topology {topo.name} needs two nodes with CPUs (has {len(nodes)})")
    mem = nodes[0]
    task = max(nodes[1:], key=lambda n: (topo.distances[mem][n], -n))
    mem_mib = max(8, min(64, int(topo.nodes[mem].memory_mib * MEM_SHARE)))
    return {"mem_node": mem, "task_node": task, "node_mem_mib": mem_mib}


def scale(topo: Topology, duration: float) -> dict[str, int]:
    return placement(topo, "misplaced")
