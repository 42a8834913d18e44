"""Did the placement hold? Read from outside QEMU, in the host's /proc, while the guest runs.

* **Memory**: each guest node's memory backend is a mapping of the QEMU process bound (``policy=bind``,
  ``host-nodes=``) to its planned host node. ``/proc/<qemu>/numa_maps`` shows each mapping's policy
  (``bind:N``) and its pages per host node (``N0=...``); ``/proc/<qemu>/maps`` its size. The memory
  bound to each host node must add up to the guest nodes the plan put there, and every page of it
  must sit on that node. A page elsewhere is memory that moved (``migratepages``, a cpuset change,
  the host's own balancing under a weaker policy) or a plan QEMU did not apply.
* **vCPUs**: each vCPU thread's affinity (``sched_getaffinity``) must be the CPUs it was pinned to.
* **The host** during the window: its load average and the steal time of its CPUs (``/proc/stat``),
  recorded, not judged: a busy host slows a run, it does not misplace it.

Pure functions over the text of those files, and a reader of them for one process.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from lab.cpulist import format_cpulist

PAGE_KIB_DEFAULT = 4


@dataclass(frozen=True)
class Mapping:
    start: int
    size: int  # bytes, from /proc/<pid>/maps
    policy: str  # numa_maps' policy word: "default", "bind:0", "interleave:0-1", ...
    pages: dict[int, int] = field(default_factory=dict)  # host node -> pages (numa_maps' N<node>=)
    page_kib: int = PAGE_KIB_DEFAULT

    @property
    def bound_to(self) -> tuple[int, ...] | None:
        """The host nodes of a ``bind`` policy (None for any other policy)."""
        kind, _, nodes = self.policy.partition(":")
        if kind != "bind" or not nodes:
            return None
        out: list[int] = []
        for part in nodes.split(","):
            lo, _, hi = part.partition("-")
            out += range(int(lo), int(hi or lo) + 1)
        return tuple(out)


def parse_maps(text: str) -> dict[int, int]:
    """/proc/<pid>/maps: start address -> size in bytes."""
    sizes: dict[int, int] = {}
    for line in text.splitlines():
        span = line.split(" ", 1)[0]
        lo, sep, hi = span.partition("-")
        if sep:
            try:
                sizes[int(lo, 16)] = int(hi, 16) - int(lo, 16)
            except ValueError:
                continue
    return sizes


def parse_numa_maps(text: str, sizes: dict[int, int]) -> list[Mapping]:
    """/proc/<pid>/numa_maps, each line joined with its size from :func:`parse_maps`."""
    out: list[Mapping] = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 2:
            continue
        try:
            start = int(words[0], 16)
        except ValueError:
            continue
        pages: dict[int, int] = {}
        page_kib = PAGE_KIB_DEFAULT
        for w in words[2:]:
            if m := re.fullmatch(r"N(\d+)=(\d+)", w):
                pages[int(m.group(1))] = int(m.group(2))
            elif w.startswith("kernelpagesize_kB="):
                page_kib = int(w.split("=", 1)[1])
        out.append(Mapping(start, sizes.get(start, 0), words[1], pages, page_kib))
    return out


def check_memory(planned: dict[int, int], mappings: list[Mapping]) -> tuple[dict, list[str]]:
    """``planned``: host node -> bytes of guest memory the plan binds there. Returns (per host node: bound
    bytes and resident MiB per node, problems)."""
    bound: dict[int, int] = {}
    resident: dict[int, dict[int, float]] = {}
    problems: list[str] = []
    for m in mappings:
        nodes = m.bound_to
        if nodes is None or len(nodes) != 1:
            continue  # QEMU's own memory, or a policy the plan never makes
        host = nodes[0]
        bound[host] = bound.get(host, 0) + m.size
        per = resident.setdefault(host, {})
        for node, n in m.pages.items():
            per[node] = per.get(node, 0.0) + n * m.page_kib / 1024
    for host, want in sorted(planned.items()):
        have = bound.get(host, 0)
        if have < want:
            problems.append(
                f"memory: {want >> 20} MiB of guest memory should be bound to host node {host}, "
                f"{have >> 20} MiB is (numa_maps)"
            )
    for host, per in sorted(resident.items()):
        away = {node: mib for node, mib in per.items() if node != host and mib > 0}
        if away:
            where = ", ".join(f"{mib:.1f} MiB on node {node}" for node, mib in sorted(away.items()))
            problems.append(f"memory: guest memory bound to host node {host} has {where} (numa_maps)")
    view = {
        str(host): {
            "bound_mib": round(bound.get(host, 0) / (1 << 20), 1),
            "resident_mib": {str(n): round(v, 1) for n, v in sorted(resident.get(host, {}).items())},
        }
        for host in sorted(set(planned) | set(bound))
    }
    return view, problems


def check_vcpus(pins: dict[int, tuple[int, ...]], affinity: dict[int, tuple[int, ...] | None]) -> list[str]:
    """Each vCPU's planned CPUs against its thread's affinity now (None: the thread was not found)."""
    problems = []
    for vcpu, cpus in sorted(pins.items()):
        have = affinity.get(vcpu)
        if have is None:
            continue  # a thread that is gone (the VM is stopping) proves nothing either way
        if tuple(sorted(have)) != tuple(sorted(cpus)):
            problems.append(f"vCPU {vcpu}: pinned to CPUs {format_cpulist(cpus)}, runs on {format_cpulist(have)}")
    return problems


def read_mappings(pid: int, proc: Path = Path("/proc")) -> list[Mapping]:
    base = proc / str(pid)
    return parse_numa_maps((base / "numa_maps").read_text(), parse_maps((base / "maps").read_text()))


def read_affinity(tids: dict[int, int]) -> dict[int, tuple[int, ...] | None]:
    out: dict[int, tuple[int, ...] | None] = {}
    for vcpu, tid in tids.items():
        try:
            out[vcpu] = tuple(sorted(os.sched_getaffinity(tid)))
        except OSError:
            out[vcpu] = None
    return out


def host_load(proc: Path = Path("/proc")) -> dict:
    """The host's 1-minute load and its CPUs' total steal time in seconds (USER_HZ ticks)."""
    load = float((proc / "loadavg").read_text().split()[0])
    first = (proc / "stat").read_text().split("\n", 1)[0].split()
    steal_ticks = int(first[8]) if len(first) > 8 else 0
    return {"load_1m": load, "steal_s": steal_ticks / os.sysconf("SC_CLK_TCK")}
