"""One machine value: a real machine's nodes (their CPUs and memory), its SLIT and lower memory tiers, and where
known how its CPUs group (packages, dies, cores, L2s, L3s) and its caches' sizes, before any scaling.

Importers fill it (numactl -H output: lab.topology.model.numactl; sysfs: lab.topology.model.sysfs_machine, strict
for an import, best effort for this host; hwloc: lab.topology.importers.hwloc), and what reads a machine reads it:
``numalab topo import``'s spec (lab.topology.importers.machine_grid, imported_spec) and this host's placement
(lab.placement.host_inventory).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lab.errors import LabError

Group = frozenset[int]


@dataclass(frozen=True)
class Cache:
    """A unified or data cache: its level, the CPUs sharing it, its size (None where the source does not say)."""

    level: int
    cpus: Group
    size_kib: int | None = None


@dataclass(frozen=True)
class CpuGroups:
    """How a machine's CPUs (its own CPU ids) group; each a partition of the CPUs, () where not known."""

    packages: tuple[Group, ...] = ()
    cores: tuple[Group, ...] = ()  # (): each CPU a core of its own
    llcs: tuple[Group, ...] = ()  # the L3s
    l2s: tuple[Group, ...] = ()  # (the CPUs' clusters where the source has no caches)
    dies: tuple[Group, ...] = ()  # (said in the description only: the grid's dies are its LLCs)
    vendor: str = ""  # the CPUID vendor string (GenuineIntel, AuthenticAMD, ...), "" if not known
    cpu_models: tuple[tuple[int, int], ...] = ()  # the (family, model) pairs the source gives; () if not known
    caches: tuple[Cache, ...] = ()  # the unified and data L2s and L3s with their sizes (sysfs, hwloc XML), in order


@dataclass(frozen=True)
class MachineNode:
    """A node as the machine reported it (its own id, its CPU ids, its memory in MiB)."""

    id: int
    cpus: tuple[int, ...]
    memory_mib: int


@dataclass(frozen=True)
class Machine:
    """A real machine's NUMA layout (and with ``groups`` its CPU grid), before any scaling."""

    nodes: tuple[MachineNode, ...]
    distances: tuple[tuple[int, ...], ...]
    origin: str  # "numactl -H output (FILE)", "sysfs (ROOT)", "hwloc XML (FILE)", ...
    slow_nodes: tuple[int, ...] = ()  # CPU-less nodes below the top memory tier (sysfs memory_tiering), own ids
    groups: CpuGroups | None = None  # how the CPUs group (sysfs with cpu/, hwloc); None: the source does not say
    facts: tuple[str, ...] = ()  # what the reader decided (default distances, a node given CPUs), for the description

    @property
    def total_cpus(self) -> int:
        return sum(len(n.cpus) for n in self.nodes)


def check_machine(machine: Machine, where: Callable[[int, str], str]) -> None:
    """What every reader of a real machine (numactl -H output, a sysfs node directory) refuses: a CPU
    listed for two nodes, and an asymmetric SLIT (the kernel itself complains of one; a spec can still
    give one in full, by hand). ``where(node, "cpus" | "distance")`` names the file (and line) it came from."""
    seen: dict[int, int] = {}
    for n in machine.nodes:
        for c in n.cpus:
            if c in seen:
                raise LabError(f"{where(n.id, 'cpus')}: CPU {c} is listed for node {seen[c]} and node {n.id}")
            seen[c] = n.id
    ids = [n.id for n in machine.nodes]
    for i, a in enumerate(ids):
        for j in range(i):
            b = ids[j]
            if machine.distances[i][j] != machine.distances[j][i]:
                raise LabError(
                    f"{where(a, 'distance')}: distance {a}->{b} is {machine.distances[i][j]} but {b}->{a} is "
                    f"{machine.distances[j][i]}; an imported SLIT must be symmetric (give an asymmetric one in a "
                    "spec, as a full distances matrix)"
                )
