"""The host's NUMA inventory, read from sysfs: nodes, CPUs, free memory, hugepages, L3s."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from lab.cpulist import format_cpulist
from lab.topology.model.machine import Machine, MachineNode
from lab.topology.model.sysfs import SysfsFiles, SysfsReader, Trust
from lab.topology.model.sysfs_machine import read_machine

SYS_NODE = Path("/sys/devices/system/node")


@dataclass(frozen=True)
class HostNode:
    """A host node as placement reads it: the machine's node (id, CPUs, MemTotal) and what is free on it now."""

    id: int
    cpus: tuple[int, ...]
    mem_total_mib: int
    mem_available_mib: int
    hugepages_free: dict[int, int] = field(default_factory=dict)  # page size KiB -> free pages


@dataclass(frozen=True)
class NodeFree:
    """What is free on a host node now: the memory to be had without swapping, its free hugepages."""

    mem_available_mib: int
    hugepages_free: dict[int, int] = field(default_factory=dict)  # page size KiB -> free pages


@dataclass(frozen=True)
class HostInventory:
    """The host's machine (its nodes, SLIT and L3s: lab.topology.model.machine; read from sysfs here, from
    libvirt's capabilities for a remote host) and its live state: the CPUs this process may use, the memory
    available in all and what is free on each node."""

    machine: Machine
    online_cpus: tuple[int, ...]
    mem_available_mib: int
    free: tuple[NodeFree, ...]  # by position in machine.nodes

    @property
    def nodes(self) -> tuple[HostNode, ...]:
        return tuple(
            HostNode(n.id, n.cpus, n.memory_mib, f.mem_available_mib, f.hugepages_free)
            for n, f in zip(self.machine.nodes, self.free)
        )

    @property
    def distances(self) -> tuple[tuple[int, ...], ...]:
        """The host's SLIT by position in ``nodes``; () when not known."""
        return self.machine.distances

    @property
    def llcs(self) -> tuple[tuple[int, ...], ...]:
        """The host's L3s as groups of usable CPUs (:func:`usable_llcs`, for lab.placement.llc_backing); ()
        when not known."""
        return usable_llcs(self.machine, self.online_cpus)

    def distance(self, a: int, b: int) -> int | None:
        """The SLIT distance between host nodes ``a`` and ``b`` (node ids), None if not known."""
        ids = [n.id for n in self.machine.nodes]
        try:
            return self.distances[ids.index(a)][ids.index(b)]
        except (ValueError, IndexError):
            return None

    @property
    def n_cpus(self) -> int:
        return len(self.online_cpus)

    def to_dict(self) -> dict:
        return {
            "nodes": [asdict(n) | {"cpus": list(n.cpus)} for n in self.nodes],
            "online_cpus": list(self.online_cpus),
            "mem_available_mib": self.mem_available_mib,
            "distances": [list(row) for row in self.distances],
            "llcs": [format_cpulist(g) for g in self.llcs],
        }


def _meminfo_kb(text: str, key: str) -> int:
    m = re.search(rf"{re.escape(key)}:\s+(\d+) kB", text)
    return int(m.group(1)) if m else 0


def read_inventory(sys_node: Path = SYS_NODE, proc_meminfo: Path = Path("/proc/meminfo")) -> HostInventory:
    """Read the host: the machine (lab.topology.model.sysfs_machine, best effort: ``sys_node`` and ``cpu/`` beside
    it) and what this process may use of it now. A host without NUMA sysfs is one node holding every CPU."""
    online = tuple(sorted(os.sched_getaffinity(0)))
    meminfo = proc_meminfo.read_text() if proc_meminfo.exists() else ""
    available = _meminfo_kb(meminfo, "MemAvailable") // 1024
    machine = read_machine(sys_node, Trust.BEST_EFFORT)
    reader = SysfsReader(SysfsFiles(sys_node), Trust.BEST_EFFORT)
    free = tuple(_free(reader, n.id) for n in machine.nodes)
    if len(machine.nodes) <= 1:
        # One node: /proc/meminfo is the better figure (some hosts, like
        # micro-VMs with hot-plugged memory, under-report in the node file).
        cpus = machine.nodes[0].cpus if machine.nodes else online
        huge = free[0].hugepages_free if free else {}
        total = max(machine.nodes[0].memory_mib if machine.nodes else 0, _meminfo_kb(meminfo, "MemTotal") // 1024)
        machine = replace(machine, nodes=(MachineNode(0, cpus, total),), distances=((10,),))
        free = (NodeFree(available, huge),)
    return HostInventory(machine, online, available, free)


def _free(reader: SysfsReader, node: int) -> NodeFree:
    """A node's memory to be had without swapping (MemFree plus inactive page cache, MiB) and its free hugepages
    by page size (KiB); what cannot be read is left out."""
    info = reader.text(f"node{node}/meminfo") or ""
    avail = (_meminfo_kb(info, "MemFree") + _meminfo_kb(info, "Inactive(file)")) // 1024
    huge = {}
    assert reader.files.root is not None
    for h in (reader.files.root / f"node{node}" / "hugepages").glob("hugepages-*kB"):
        size = h.name[len("hugepages-") : -2]
        free = reader.value(f"node{node}/hugepages/{h.name}/free_hugepages", "int") if size.isdigit() else None
        if free is not None:
            huge[int(size)] = free
    return NodeFree(avail, huge)


def usable_llcs(machine: Machine, online: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """The machine's L3s as groups of the CPUs this process may use (``online``), in order; () when its sysfs
    says nothing of its caches."""
    usable = set(online)
    groups = {tuple(c for c in sorted(g) if c in usable) for g in (machine.groups.llcs if machine.groups else ())}
    return tuple(sorted(g for g in groups if g))
