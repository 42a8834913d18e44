"""The SLIT a kernel with the SNC-3 fix builds its NUMA sched domains from (commit 4d6dd05d07d0, in 7.x).

"sched/topology: Fix sched domain build error for GNR, CWF in SNC-3 mode" gave the scheduler distances of its
own (``arch_sched_node_distance``, arch/x86/kernel/smpboot.c): on Granite Rapids X and Clearwater Forest's
Darkmont X (CPUID family 6, models 173 and 221) of more than one package and three or more nodes a package, the
distance between two nodes of different packages is the average of both directions over the two packages'
clusters (integer division), once the SLIT has the expected form (each package's own cluster symmetric; else the
kernel logs "fixup disabled" and keeps the SLIT). The kernel logs ``Fixing up SNC SLIT table.`` when it takes
it. NUMA balancing and sysfs keep the true SLIT; only the sched domains (and their groups) see these.
"""

from __future__ import annotations

from dataclasses import replace

from lab.topology.model.topology import Topology

MODELS = frozenset({(6, 173), (6, 221)})  # INTEL_GRANITERAPIDS_X, INTEL_ATOM_DARKMONT_X
FIXING_UP = "Fixing up SNC SLIT table."


def snc3_distances(topo: Topology) -> tuple[tuple[int, ...], ...] | None:
    """The scheduler's distances of a kernel with the fix on ``topo``; None where the fix leaves the SLIT alone."""
    grid = topo.cpu_grid
    if grid is None or grid.cpu_model not in MODELS or grid.packages < 2 or topo.n_nodes % grid.packages:
        return None
    u = topo.n_nodes // grid.packages
    d = topo.distances
    if u < 3:
        return None
    for p in range(grid.packages):  # slit_validate: each package's own cluster symmetric
        nodes = range(p * u, p * u + u)
        if any(d[i][j] != d[j][i] for i in nodes for j in nodes):
            return None
    out = []
    for i in range(topo.n_nodes):
        row = []
        for j in range(topo.n_nodes):
            if i // u == j // u:
                row.append(d[i][j])
                continue
            x, y = i - i % u, j - j % u
            total = sum(d[a][b] + d[b][a] for a in range(x, x + u) for b in range(y, y + u))
            row.append(total // (2 * u * u))
        out.append(tuple(row))
    return tuple(out)


def sched_topology(topo: Topology, fixed: bool) -> Topology:
    """``topo`` as the scheduler of a kernel sees its distances: the SNC-3 fix's when ``fixed`` (the kernel said it
    took it) and the machine is one the fix applies to, else ``topo`` itself."""
    if not fixed:
        return topo
    distances = snc3_distances(topo)
    return topo if distances is None else replace(topo, distances=distances)
