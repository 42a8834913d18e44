"""The host's NUMA inventory, read from sysfs: nodes, CPUs, free memory, hugepages."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lab.cpulist import format_cpulist, parse_cpulist
from lab.placement.llc_backing import read_host_llcs

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
    # The host's L3s as groups of usable CPUs (lab.placement.llc_backing); () when not known
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
    """Read the host. A host without NUMA sysfs is one node holding every CPU."""
    online = tuple(sorted(os.sched_getaffinity(0)))
    meminfo = proc_meminfo.read_text() if proc_meminfo.exists() else ""
    available = _meminfo_kb(meminfo, "MemAvailable") // 1024
    node_dirs = sorted((p for p in sys_node.glob("node[0-9]*") if p.name[4:].isdigit()), key=lambda p: int(p.name[4:]))
    nodes: list[HostNode] = []
    rows: list[tuple[int, ...]] = []
    for p in node_dirs:
        cpus = tuple(parse_cpulist((p / "cpulist").read_text()))
        info = (p / "meminfo").read_text()
        total = _meminfo_kb(info, "MemTotal") // 1024
        # MemFree plus inactive page cache: what can be had without swapping.
        avail = (_meminfo_kb(info, "MemFree") + _meminfo_kb(info, "Inactive(file)")) // 1024
        huge = {}
        for h in (p / "hugepages").glob("hugepages-*kB"):
            size = int(h.name[len("hugepages-") : -2])
            huge[size] = int((h / "free_hugepages").read_text())
        nodes.append(HostNode(int(p.name[4:]), cpus, total, avail, huge))
        rows.append(_distance_row(p))
    if len(nodes) <= 1:
        # One node: /proc/meminfo is the better figure (some hosts, like
        # micro-VMs with hot-plugged memory, under-report in the node file).
        cpus = nodes[0].cpus if nodes else online
        huge = nodes[0].hugepages_free if nodes else {}
        total = max(nodes[0].mem_total_mib if nodes else 0, _meminfo_kb(meminfo, "MemTotal") // 1024)
        nodes = [HostNode(0, cpus, total, available, huge)]
        rows = [(10,)]
    # (node ids may have gaps: the SLIT row of a node lists every possible node's distance, in id order;
    # keep the columns of the nodes present)
    ids = [n.id for n in nodes]
    if len(rows) == len(nodes) and all(len(r) > max(ids) for r in rows):
        distances = tuple(tuple(r[i] for i in ids) for r in rows)
    else:
        distances = tuple(tuple(10 if a == b else 20 for b in ids) for a in ids)  # an unreadable SLIT: ACPI's default
    return HostInventory(tuple(nodes), online, available, distances, read_host_llcs(online))


def _distance_row(node_dir: Path) -> tuple[int, ...]:
    try:
        return tuple(int(w) for w in (node_dir / "distance").read_text().split())
    except (OSError, ValueError):
        return ()
