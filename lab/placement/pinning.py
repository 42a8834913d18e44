"""Placement: which host node backs each guest node, and which host CPU runs each vCPU.

Guest nodes are spread round-robin over the host nodes that have memory; the
vCPUs of a guest node are pinned to the CPUs of the host node that holds its
memory, so a guest node stays one host node. Memory is bound (policy=bind)
and may be plain RAM, memfd or hugepages, optionally preallocated.

Pinning (``pinning``):

* ``cpu``: every vCPU on one host CPU of its host node;
* ``node``: every vCPU on the set of its host node's CPUs, where the host
  scheduler moves it as it likes;
* ``auto`` (the default): ``cpu`` when each host node has a CPU for each of its
  vCPUs, else ``node``. With more vCPUs than CPUs, one-CPU pins make vCPUs that
  share a CPU run in lock-step: a vCPU waiting for another (an IPI, an RCU or
  stop-machine sync, a TLB shootdown) waits for a whole host time slice. On
  this project's 2-CPU machines an idle 4-vCPU boot under TCG took 0.3-0.5 s
  longer pinned one-to-one than pinned per node.

The host CPUs are those this process may run on (``sched_getaffinity``), so
``taskset -c 4-7 numalab run ...`` keeps a run on CPUs 4-7; the matrix runner
gives each concurrent run its own CPUs that way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from lab.cpulist import format_cpulist
from lab.errors import LabError
from lab.placement.host_inventory import HostInventory
from lab.placement.llc_backing import llc_map, llc_pins, unbacked_llc_notes
from lab.topology.model.topology import Topology

BACKINGS = ("ram", "memfd", "hugepages")
PINNINGS = ("auto", "cpu", "node")
# QEMU's own overhead per guest, on top of guest RAM, kept free on the host.
QEMU_OVERHEAD_MIB = 256


@dataclass(frozen=True)
class Backing:
    kind: str = "ram"
    prealloc: bool = False
    hugepage_kib: int = 2048
    hugepage_path: str = "/dev/hugepages"

    def __post_init__(self) -> None:
        if self.kind not in BACKINGS:
            raise LabError(f"backing: {self.kind!r} is not one of {', '.join(BACKINGS)}")


@dataclass(frozen=True)
class Placement:
    memory_host_nodes: tuple[int, ...]  # guest node -> host node
    vcpu_pins: tuple[tuple[int, ...], ...]  # vCPU -> the host CPUs it may run on (one, with pinning "cpu")
    backing: Backing
    host_nodes: int
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    pinning: str = "cpu"  # how the vCPUs are pinned: "cpu" or "node"
    pinning_policy: str = "auto"  # what was asked for (PINNINGS)
    # Per guest node pair: its SLIT distance and the host distance that backs it (None: not known).
    distance_map: tuple[dict, ...] = ()
    # Per guest LLC: its vCPUs, their host CPUs and LLCs, and whether a host LLC backs it (llc_backing.llc_map)
    llc_map: tuple[dict, ...] = ()

    def cpuset(self, vcpu: int) -> str:
        """A vCPU's host CPUs as a cpulist ('3', '0-7')."""
        return format_cpulist(self.vcpu_pins[vcpu])

    def to_dict(self) -> dict:
        return {
            "memory_host_nodes": list(self.memory_host_nodes),
            "pinning": self.pinning,
            "pinning_policy": self.pinning_policy,
            "vcpu_pins": [self.cpuset(v) for v in range(len(self.vcpu_pins))],
            "backing": asdict(self.backing),
            "host_nodes": self.host_nodes,
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "distance_map": list(self.distance_map),
            "llc_map": list(self.llc_map),
        }


def plan_placement(
    topo: Topology,
    host: HostInventory,
    backing: Backing | None = None,
    enforce_fit: bool = True,
    pinning: str = "auto",
    one_thread: bool = False,
) -> Placement:
    """Plan memory binding and vCPU pinning; refuse what cannot fit (a warning without ``enforce_fit``).
    ``one_thread``: QEMU will run every vCPU on one host thread (the virtual clock), so more vCPUs than host CPUs
    do not crowd them: a note, not an overcommit warning."""
    backing = backing or Backing()
    if pinning not in PINNINGS:
        raise LabError(f"--pinning {pinning}: not one of {', '.join(PINNINGS)}")
    mem_nodes = [n for n in host.nodes if n.mem_total_mib > 0] or list(host.nodes)
    mapping = tuple(mem_nodes[i % len(mem_nodes)].id for i in range(topo.n_nodes))
    by_id = {n.id: n for n in host.nodes}

    warnings: list[str] = []
    notes: list[str] = _sharing_notes(topo, host, mem_nodes)
    misfit = _memory_misfits(topo, mapping, by_id, backing)
    if misfit and enforce_fit:
        raise LabError(misfit[0])
    warnings += misfit

    # vCPUs: pin each guest node's vCPUs to CPUs of its memory's host node (those we may use).
    node_cpus: dict[int, tuple[int, ...]] = {}
    for host_node in sorted(set(mapping)):
        usable = tuple(c for c in by_id[host_node].cpus if c in host.online_cpus)
        if not usable:
            notes.append(
                f"host node {host_node} has none of the host CPUs numalab may use "
                f"({format_cpulist(host.online_cpus)}): its guest nodes' vCPUs run on those instead"
            )
        node_cpus[host_node] = usable or tuple(host.online_cpus)
    demand: dict[int, int] = {}
    for node, host_node in zip(topo.nodes, mapping):
        demand[host_node] = demand.get(host_node, 0) + node.cpus
    crowded = sum(max(0, n - len(node_cpus[h])) for h, n in demand.items())
    mode = pinning if pinning != "auto" else ("node" if crowded else "cpu")
    pins = _pins(topo, mapping, node_cpus, mode)
    if mode == "cpu" and host.llcs:  # a guest LLC's vCPUs inside one host LLC where one has room
        pins = llc_pins(topo, mapping, node_cpus, host.llcs) or pins
    if one_thread:
        notes.append("the virtual clock: QEMU runs every vCPU in turn on one host thread, which is given the CPUs "
                     "its vCPUs are pinned to")  # fmt: skip
    else:
        warnings += _overcommit_warnings(topo, host, crowded)
    if crowded and mode == "node" and pinning == "auto":
        notes.append("vCPUs share host CPUs, so each is pinned to its host node's CPUs rather than to one CPU")
    dmap = distance_map(topo, host, mapping)
    notes += _unbacked_notes(dmap, len(host.nodes))
    lmap = llc_map(topo, pins, host.llcs)
    notes += unbacked_llc_notes(topo, lmap)
    return Placement(mapping, tuple(pins), backing, len(host.nodes), tuple(warnings), tuple(notes), mode, pinning,
                     tuple(dmap), tuple(lmap))  # fmt: skip


def distance_map(topo: Topology, host: HostInventory, mapping: tuple[int, ...]) -> list[dict]:
    """For each pair of guest nodes: the guest's SLIT distance, the host nodes that hold their memory and the
    host's distance between those (10 when they share one: the guest's remote memory is local there)."""
    out = []
    for i in range(topo.n_nodes):
        for j in range(i + 1, topo.n_nodes):
            a, b = mapping[i], mapping[j]
            out.append({"guest_nodes": [i, j], "guest_distance": topo.distances[i][j], "host_nodes": [a, b],
                        "host_distance": 10 if a == b else host.distance(a, b)})  # fmt: skip
    return out


def _unbacked_notes(dmap: list[dict], host_nodes: int) -> list[str]:
    """Which guest distances no host distance backs (pairs of guest nodes on one host node), when the host
    has several nodes (one host node: the note of _sharing_notes says it for all)."""
    if host_nodes < 2:
        return []
    shared = [d for d in dmap if d["host_distance"] == 10 and d["guest_distance"] > 10]
    if not shared:
        return []
    pairs = ", ".join(f"{d['guest_nodes'][0]}-{d['guest_nodes'][1]} (distance {d['guest_distance']}, "
                      f"host node {d['host_nodes'][0]})" for d in shared)  # fmt: skip
    return [f"guest node pairs on one host node: {pairs}; their remote memory is local on the host, so "
            "throughput between them is not the modelled machine's"]  # fmt: skip


def _sharing_notes(topo: Topology, host: HostInventory, mem_nodes: list) -> list[str]:
    """What the guest's distances are worth when guest nodes share host nodes."""
    if len(host.nodes) == 1:
        return [
            f"the host has one NUMA node: all {topo.n_nodes} guest nodes bind their memory to host node "
            f"{host.nodes[0].id}; the guest's distances are emulated, not backed by real remote memory"
        ]
    if len(mem_nodes) < topo.n_nodes:
        return [
            f"{topo.n_nodes} guest nodes share {len(mem_nodes)} host nodes (round-robin): "
            f"guest distances are only partly real"
        ]
    return []


def _memory_misfits(topo: Topology, mapping: tuple[int, ...], by_id: dict, backing: Backing) -> list[str]:
    """What each host node must hold against what it has (hugepages or available memory)."""
    need: dict[int, int] = {}
    for node, host_node in zip(topo.nodes, mapping):
        need[host_node] = need.get(host_node, 0) + node.memory_mib
    misfit: list[str] = []
    for host_node, mib in sorted(need.items()):
        hn = by_id[host_node]
        if backing.kind == "hugepages":
            page_mib = backing.hugepage_kib // 1024 or 1
            bad = [n.id for n in topo.nodes if n.memory_mib % page_mib]
            if bad:
                raise LabError(
                    f"memory: guest node {bad[0]} size is not a multiple of the {backing.hugepage_kib} KiB hugepage"
                )
            free = hn.hugepages_free.get(backing.hugepage_kib, 0)
            if free * page_mib < mib:
                misfit.append(
                    f"memory: hugepages on host node {host_node}: need {mib // page_mib} x {backing.hugepage_kib} KiB, "
                    f"{free} free (raise /sys/devices/system/node/node{host_node}/hugepages/"
                    f"hugepages-{backing.hugepage_kib}kB/nr_hugepages)"
                )
        elif mib + QEMU_OVERHEAD_MIB > hn.mem_available_mib:
            misfit.append(
                f"memory: guest needs {mib} MiB (+{QEMU_OVERHEAD_MIB} MiB overhead) on host node {host_node}, "
                f"only {hn.mem_available_mib} MiB is available"
            )
    return misfit


def _pins(
    topo: Topology, mapping: tuple[int, ...], node_cpus: dict[int, tuple[int, ...]], mode: str
) -> list[tuple[int, ...]]:
    """Each vCPU's host CPUs: one CPU of its node's host node in turn (cpu), or all of them (node)."""
    cursor: dict[int, int] = {}
    pins: list[tuple[int, ...]] = []
    for node, host_node in zip(topo.nodes, mapping):
        cpus = node_cpus[host_node]
        for _ in range(node.cpus):
            i = cursor.get(host_node, 0)
            pins.append((cpus[i % len(cpus)],) if mode == "cpu" else cpus)
            cursor[host_node] = i + 1
    return pins


def _overcommit_warnings(topo: Topology, host: HostInventory, crowded: int) -> list[str]:
    if topo.total_cpus > host.n_cpus:
        return [
            f"overcommit: {topo.total_cpus} vCPUs on {host.n_cpus} host CPUs; vCPUs share host CPUs, "
            f"so timings are slower and noisier"
        ]
    if crowded:
        return [
            f"overcommit: a guest node has more vCPUs than its host node has CPUs, so {crowded} "
            f"vCPUs share host CPUs with other vCPUs; timings are slower and noisier"
        ]
    return []
