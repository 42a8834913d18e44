"""What a machine asks of the QEMU that boots it, whichever backend starts that QEMU (directly, or a libvirt
daemon's): each backend's ``check_machine`` (lab.vm.backend.Backend) holds its QEMU's version against it."""

from __future__ import annotations

from lab.errors import LabError
from lab.topology.model.topology import Topology

# The QEMU that first expresses each part of a machine (lab.topology.model.cpu_grid): -smp modules= and the
# -machine smp-cache property that shares an L2 among a module's cores came in 9.0 and 9.2.
CLUSTERS_QEMU = (9, 2)


def required_qemu(topo: Topology) -> tuple[tuple[int, int], str] | None:
    """The oldest QEMU that can boot ``topo`` as specified, and what needs it; None: any numalab runs."""
    grid = topo.cpu_grid
    if grid is not None and grid.has_clusters:
        return CLUSTERS_QEMU, f"cores_per_cluster: {grid.cores_per_cluster} cores sharing an L2 (-smp modules=)"
    return None


def check_qemu_can_express(topo: Topology, version: tuple[int, ...] | None, where: str = "QEMU") -> None:
    """A one-line error when the QEMU at hand (``version``, None: unknown) would boot a flatter machine than
    ``topo`` says, naming the QEMU that can."""
    need = required_qemu(topo)
    if need is None or version is None:
        return
    (major, minor), what = need
    if tuple(version[:2]) < (major, minor):
        have = ".".join(str(v) for v in version[:3])
        raise LabError(
            f"topology {topo.name}: {what} needs QEMU {major}.{minor} or later; {where} is {have} "
            "(numalab run --qemu backports: QEMU 10 from Debian's backports, make setup-qemu10)"
        )
