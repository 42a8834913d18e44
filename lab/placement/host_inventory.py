"""The host's NUMA inventory, read from sysfs: nodes, CPUs, free memory, hugepages, L3s."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lab.cpulist import format_cpulist
from lab.topology.model.machine import Machine
from lab.topology.model.sysfs import SysfsFiles, SysfsReader, Trust
from lab.topology.model.sysfs_machine import read_machine

SYS_NODE = Path("/sys/devices/system/node")


@dataclass(frozen=True)
class HostNode:
    id: int
    cpus: tuple[int, ...]
    mem_total_mib: int
    mem_available_mib: int
    hugepages_free: dict[int, int] = field(default_factory=dict)  # page size KiB -> free pages


@dataclass(frozen=True)
class HostInventory:
    nodes: tuple[HostNode, ...]
    online_cpus: tuple[int, ...]
    mem_available_mib: int
    # The host's SLIT (sysfs node*/distance, or libvirt's capabilities), by position in ``nodes``.
    distances: tuple[tuple[int, ...], ...] = ()  # () when not known
    # The host's L3s as groups of usable CPUs (:func:`usable_llcs`, for lab.placement.llc_backing); () when not known
    llcs: tuple[tuple[int, ...], ...] = ()

    def distance(self, a: int, b: int) -> int | None:
        """The SLIT distance between host nodes ``a`` and ``b`` (node ids), None if not known."""
        ids = [n.id for n in self.nodes]
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
    nodes = [HostNode(n.id, n.cpus, n.memory_mib, *_free(reader, n.id)) for n in machine.nodes]
    distances = machine.distances
    if len(nodes) <= 1:
        # One node: /proc/meminfo is the better figure (some hosts, like
        # micro-VMs with hot-plugged memory, under-report in the node file).
        cpus = nodes[0].cpus if nodes else online
        huge = nodes[0].hugepages_free if nodes else {}
        total = max(nodes[0].mem_total_mib if nodes else 0, _meminfo_kb(meminfo, "MemTotal") // 1024)
        nodes = [HostNode(0, cpus, total, available, huge)]
        distances = ((10,),)
    return HostInventory(tuple(nodes), online, available, distances, usable_llcs(machine, online))


def _free(reader: SysfsReader, node: int) -> tuple[int, dict[int, int]]:
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
    return avail, huge


def usable_llcs(machine: Machine, online: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """The machine's L3s as groups of the CPUs this process may use (``online``), in order; () when its sysfs
    says nothing of its caches."""
    usable = set(online)
    groups = {tuple(c for c in sorted(g) if c in usable) for g in (machine.groups.llcs if machine.groups else ())}
    return tuple(sorted(g for g in groups if g))
