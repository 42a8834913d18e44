"""Two tasks per CPU of nodes 1 and 3 together, all started on node 1."""

from __future__ import annotations

from lab.errors import LabError
from lab.topology.model.topology import Topology


def scale(topo: Topology, duration: float) -> dict[str, int]:
    cpus = topo.node_cpus()
    a, b = (cpus[n] if n < len(cpus) else [] for n in (1, 3))
    if not a or len(a) != len(b):
        raise LabError(
            f"--workload nodes13: topology {topo.name} needs nodes 1 and 3 with the same number of CPUs"
            f" (has {len(a)} and {len(b)})"
        )
    width = len(a)
    return {"a_cpu": a[0], "b_cpu": b[0], "width": width, "tasks": 4 * width}
