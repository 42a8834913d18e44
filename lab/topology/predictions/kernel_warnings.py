"""What the guest kernel (Linux 6.1) will complain about in a valid spec, before booting it.

Validation (lab.topology.model.spec) rejects what QEMU or the kernel refuses
outright. Some specs are accepted by both and still make the kernel log an
error at boot; ``numalab topo check`` and ``topo show`` warn about those, and
the run record's topology verdict carries what the kernel actually said
(lab.analysis.kernel_complaints).
"""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.topology.predictions.cpu_view import smp_layout


def predicted_warnings(topo: Topology) -> list[str]:
    """One sentence per complaint the kernel will make at boot."""
    cpu_nodes = [n.id for n in topo.nodes if n.cpus]
    d = topo.distances
    asym = [(i, j) for i in cpu_nodes for j in cpu_nodes if i < j and d[i][j] != d[j][i]]
    out = []
    if asym:
        pairs = ", ".join(f"{i}->{j} {d[i][j]} but {j}->{i} {d[j][i]}" for i, j in asym[:3])
        more = f" (and {len(asym) - 3} more pairs)" if len(asym) > 3 else ""
        out.append(
            f"asymmetric SLIT between nodes with CPUs ({pairs}{more}): the kernel logs 'ERROR: Node-distance not "
            "symmetric' (with sched_verbose, which numalab boots with) and builds its NUMA sched domains from one "
            'direction only; its sched-domain check may also report "ERROR: groups don\'t span domain->span"'
        )
    return out + layout_warnings(topo)


def layout_warnings(topo: Topology) -> list[str]:
    """The complaints that come from how many CPUs a node is given (sockets of 3, an LLC or module of one core),
    which a bigger scale of the same machine avoids: ``topo import`` chooses its default scale by them
    (lab.topology.importers.machine_grid)."""
    out = []
    grid = topo.cpu_grid
    if grid is not None:
        sockets, per_socket = grid.packages, grid.cpus_per_package
    else:
        smp = smp_layout(topo)
        sockets, per_socket = smp.sockets, smp.cores * smp.threads
    if sockets >= 2 and per_socket == 3:
        out.append(
            f"{sockets} sockets of 3 CPUs (APIC IDs with gaps): QEMU 7.2 with Debian's 6.1 was measured to hang at "
            "boot on this layout (docs/qemu-topology.md); QEMU 10 (--qemu backports) and 6.12 boot it"
        )
    if grid is not None and grid.cores_per_cluster == 1 and (grid.dies_per_package > 1 or grid.has_clusters):
        out.append(
            "a die (LLC) or module of one core: 6.1 takes each such CPU for a package of its own (it reads no "
            "module level), so its guest view will not be this machine's; give an LLC or module 2 cores or more"
        )
    return out
