"""Memory tiers: CPU-less memory nodes, ACPI HMAT latency/bandwidth, and what Linux 6.1 makes of them.

A spec declares them in two optional sections::

    tiers:
      slow_nodes: [2, 3]         # CPU-less nodes onlined as CXL-like memory (dax kmem): a lower tier
      initiators: {2: 0, 3: 1}   # CPU-less node -> the CPU node it is attached to (default: the nearest)
    hmat:                        # rows: the CPU nodes (initiators) in order; columns: every node
      latency_ns: [[100, 200, 250, 350], [200, 100, 350, 250]]
      bandwidth_mib: [[20480, 10240, 8192, 4096], [10240, 20480, 4096, 8192]]

What 6.1 does with them (``mm/memory-tiers.c``, ``drivers/dax/kmem.c``, ``drivers/acpi/numa/hmat.c``):

* Every node whose memory is present at boot goes into the default DRAM tier, abstract distance
  ``MEMTIER_ADISTANCE_DRAM`` = 576, i.e. ``memory_tier4`` (576 rounded down to 128-chunks, >> 7).
  6.1 does not use HMAT to place nodes in tiers (that came in 6.7), so a CPU-less node that is
  plain RAM in the SRAT is just more DRAM.
* Memory that dax kmem onlines gets ``MEMTIER_DEFAULT_DAX_ADISTANCE`` = 5 * 576 = 2880:
  ``memory_tier22``. From 6.7, with an HMAT, its abstract distance is the DRAM tier's scaled by its
  latency and bandwidth against the DRAM nodes' (:func:`dax_adistance`): tiered-2s-cxl's slow nodes
  are ``memory_tier28`` on 6.12 and 7.3. numalab gets there as a CXL expander would: the slow
  node's range is made soft-reserved (``memmap=SIZE%START-1+0xefffffff``), the HMEM driver makes it
  a dax device, and kmem onlines it (``memhp_default_state=online``; the guest init binds it where
  the kernel did not). The slow nodes lie above 4 GiB (q35's ``max-ram-below-4g`` at the first
  one's start: :func:`ram_below_4g`), away from the firmware's tables at the top of low RAM: 6.12
  and later give the dax device the node's whole SRAT range, which kmem must reserve whole.
* Demotion targets (``establish_demotion_targets``): each node of a tier demotes to the nodes of
  the next lower tier at the smallest distance from it (all of them on a tie). 6.1 does not show
  them in sysfs; they show as ``pgdemote_*`` when ``/sys/kernel/mm/numa/demotion_enabled`` is on.
* The top tiers are the slowest tier that has a CPU node and the ones faster than it; with
  ``kernel.numa_balancing=2`` only pages on nodes below it are scanned and promoted
  (``pgpromote_success``).
* HMAT (``CONFIG_HMEM_REPORTING``): each node's ``access0/initiators/`` has the best read/write
  latency (ns) and bandwidth (MiB/s) over the initiators, from QEMU's ``-numa hmat-lb``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lab.cpulist import checked_cpulist, format_cpulist
from lab.errors import LabError
from lab.untrusted import to_int

MEMTIER_CHUNK_BITS = 7
MEMTIER_ADISTANCE_DRAM = (4 << MEMTIER_CHUNK_BITS) + (1 << (MEMTIER_CHUNK_BITS - 1))  # 576
MEMTIER_DEFAULT_DAX_ADISTANCE = MEMTIER_ADISTANCE_DRAM * 5  # 2880
DRAM_TIER = MEMTIER_ADISTANCE_DRAM >> MEMTIER_CHUNK_BITS  # memory_tier4
DAX_TIER = MEMTIER_DEFAULT_DAX_ADISTANCE >> MEMTIER_CHUNK_BITS  # memory_tier22
HMAT_ADISTANCE_FROM = (6, 7)  # the kernel that first placed a dax node by the HMAT (mt_perf_to_adistance)
MEMORY_BLOCK_MIB = 128  # x86-64's memory block below 64 GiB: kmem onlines whole blocks
E820_SOFT_RESERVED = 0xEFFFFFFF
E820_RAM = 1
Q35_LOWMEM_SMALL = 0xB0000000 >> 20  # MiB: q35 keeps all RAM below 4 GiB up to 2.75 GiB
Q35_LOWMEM_LARGE = 0x80000000 >> 20  # ... and 2 GiB below 4 GiB beyond that
MAX_LATENCY_NS = 1 << 20
MAX_BANDWIDTH_MIB = 1 << 30


@dataclass(frozen=True)
class MemoryTiers:
    slow_nodes: tuple[int, ...] = ()
    initiators: tuple[tuple[int, int], ...] = ()  # (CPU-less node, initiator node)
    latency_ns: tuple[tuple[int, ...], ...] = ()  # [initiator index][target]
    bandwidth_mib: tuple[tuple[int, ...], ...] = ()

    @property
    def hmat(self) -> bool:
        return bool(self.latency_ns)

    def initiator_of(self, node: int) -> int | None:
        return dict(self.initiators).get(node)

    def to_dict(self) -> dict:
        return {
            "slow_nodes": list(self.slow_nodes),
            "initiators": {str(a): b for a, b in self.initiators},
            "latency_ns": [list(r) for r in self.latency_ns],
            "bandwidth_mib": [list(r) for r in self.bandwidth_mib],
        }

    def check(self, topo: Any, pre: str = "") -> None:
        """The rules QEMU and the guest impose, against the topology's nodes (one-line errors)."""
        self._check_slow_nodes(topo, pre)
        self._check_initiators(topo, pre)
        self._check_hmat(topo, pre)
        if self.slow_nodes:
            self._check_slow_ranges(topo, pre)

    def _check_slow_nodes(self, topo: Any, pre: str) -> None:
        """Each slow node exists, is CPU-less and is not node 0."""
        n = topo.n_nodes
        for node in self.slow_nodes:
            if not 0 <= node < n:
                raise LabError(f"{pre}tiers.slow_nodes: node {node} does not exist ({n} nodes)")
            if topo.nodes[node].cpus:
                raise LabError(f"{pre}tiers.slow_nodes: node {node} has CPUs; a slow (dax kmem) node must be CPU-less")
            if node == 0:
                raise LabError(f"{pre}tiers.slow_nodes: node 0 holds the low memory the kernel boots from")

    def _check_initiators(self, topo: Any, pre: str) -> None:
        """Each initiator pair maps a CPU-less node to a node with CPUs."""
        n = topo.n_nodes
        cpu_nodes = topo.cpu_nodes
        for node, init in self.initiators:
            if not 0 <= node < n or topo.nodes[node].cpus:
                raise LabError(f"{pre}tiers.initiators: node {node} is not a CPU-less node")
            if init not in cpu_nodes:
                raise LabError(f"{pre}tiers.initiators.{node}: initiator {init} is not a node with CPUs")

    def _check_hmat(self, topo: Any, pre: str) -> None:
        """The HMAT matrices: one row per CPU node of one value per node, both or neither given."""
        n = topo.n_nodes
        cpu_nodes = topo.cpu_nodes
        for name, matrix in (("latency_ns", self.latency_ns), ("bandwidth_mib", self.bandwidth_mib)):
            if not matrix:
                continue
            if len(matrix) != len(cpu_nodes) or any(len(r) != n for r in matrix):
                raise LabError(
                    f"{pre}hmat.{name}: expected {len(cpu_nodes)} rows (the CPU nodes {cpu_nodes}) of {n} values"
                )
        if bool(self.latency_ns) != bool(self.bandwidth_mib):
            raise LabError(f"{pre}hmat: give both latency_ns and bandwidth_mib")

    def _check_slow_ranges(self, topo: Any, pre: str) -> None:
        """Each slow node's guest-physical pieces are whole memory blocks (kmem onlines whole blocks)."""
        for node, start, size in slow_pieces(topo):
            if start % MEMORY_BLOCK_MIB or size % MEMORY_BLOCK_MIB:
                raise LabError(
                    f"{pre}tiers.slow_nodes: node {node}'s memory ({size} MiB at {start} MiB) is not in whole "
                    f"{MEMORY_BLOCK_MIB} MiB memory blocks, which dax kmem needs: make the node sizes "
                    f"multiples of {MEMORY_BLOCK_MIB}M"
                )


def _int(value: object, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise LabError(f"{field}: expected a whole number {lo}..{hi}, got {value!r}")
    return value


def _node_key(key: object, field: str) -> int:
    try:
        return int(str(key))
    except ValueError:
        raise LabError(f"{field}: {key!r} is not a node id") from None


def _matrix(raw: object, field: str, hi: int) -> tuple[tuple[int, ...], ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(r, list) for r in raw):
        raise LabError(f"{field}: expected a matrix, one row per CPU node")
    return tuple(tuple(_int(v, f"{field}[{i}][{j}]", 1, hi) for j, v in enumerate(r)) for i, r in enumerate(raw))


def parse_tiers(data: dict, cpus: list[int], distances: list[list[int]]) -> MemoryTiers | None:
    """The ``tiers:`` and ``hmat:`` sections of a spec (None if it has neither). ``cpus`` and
    ``distances`` are the spec's nodes, to default each CPU-less node's initiator to its nearest CPU node."""
    if "tiers" not in data and "hmat" not in data:
        return None
    tiers = data.get("tiers") or {}
    if not isinstance(tiers, dict):
        raise LabError("tiers: expected a mapping with slow_nodes and initiators")
    unknown = set(tiers) - {"slow_nodes", "initiators"}
    if unknown:
        raise LabError(f"tiers.{sorted(unknown)[0]}: unknown field")
    slow = tiers.get("slow_nodes", [])
    if not isinstance(slow, list):
        raise LabError("tiers.slow_nodes: expected a list of node ids")
    slow_nodes = tuple(sorted({_int(x, "tiers.slow_nodes", 0, 1 << 16) for x in slow}))
    given = tiers.get("initiators", {})
    if not isinstance(given, dict):
        raise LabError("tiers.initiators: expected a mapping CPU-less node -> initiator node")
    initiators = {
        _node_key(k, "tiers.initiators"): _int(v, f"tiers.initiators.{k}", 0, 1 << 16) for k, v in given.items()
    }
    cpu_nodes = [i for i, c in enumerate(cpus) if c]
    for node, c in enumerate(cpus):
        if not c and node not in initiators and cpu_nodes:
            initiators[node] = min(cpu_nodes, key=lambda i: (distances[node][i], i))
    hmat = data.get("hmat") or {}
    if not isinstance(hmat, dict):
        raise LabError("hmat: expected a mapping with latency_ns and bandwidth_mib")
    unknown = set(hmat) - {"latency_ns", "bandwidth_mib"}
    if unknown:
        raise LabError(f"hmat.{sorted(unknown)[0]}: unknown field")
    return MemoryTiers(
        slow_nodes=slow_nodes,
        initiators=tuple(sorted(initiators.items())),
        latency_ns=_matrix(hmat["latency_ns"], "hmat.latency_ns", MAX_LATENCY_NS) if "latency_ns" in hmat else (),
        bandwidth_mib=(
            _matrix(hmat["bandwidth_mib"], "hmat.bandwidth_mib", MAX_BANDWIDTH_MIB) if "bandwidth_mib" in hmat else ()
        ),
    )


def tiers_from_dict(d: dict | None) -> MemoryTiers | None:
    """Inverse of :meth:`MemoryTiers.to_dict` (as stored in a run manifest)."""
    if not d:
        return None
    return MemoryTiers(
        slow_nodes=tuple(d.get("slow_nodes", ())),
        initiators=tuple(sorted((int(k), v) for k, v in d.get("initiators", {}).items())),
        latency_ns=tuple(tuple(r) for r in d.get("latency_ns", ())),
        bandwidth_mib=tuple(tuple(r) for r in d.get("bandwidth_mib", ())),
    )


def _first_slow_start(topo: Any) -> int | None:
    """Where (MiB, in QEMU's order of the nodes' RAM) the first slow node's memory starts; None without one."""
    tiers = getattr(topo, "tiers", None)
    if not tiers or not tiers.slow_nodes:
        return None
    first = min(tiers.slow_nodes)
    return sum(n.memory_mib for n in topo.nodes if n.id < first)


def _q35_ram_below_4g(topo: Any) -> int:
    """QEMU's own q35 layout: all RAM below 4 GiB up to 2.75 GiB, 2 GiB of it if there is more (MiB)."""
    total = topo.total_memory_mib
    return min(total, Q35_LOWMEM_SMALL if total < Q35_LOWMEM_SMALL else Q35_LOWMEM_LARGE)


def ram_below_4g(topo: Any) -> int:
    """Where the guest's RAM below 4 GiB ends (MiB). QEMU's q35 keeps it all there up to 2.75 GiB (2 GiB if there is
    more); a topology with slow nodes ends it where the first slow node starts (:func:`max_ram_below_4g`), so that
    every slow node lies above 4 GiB, clear of the firmware's tables at the top of low RAM. Linux 6.12 and later
    give a slow node's dax device its whole SRAT range (the HMAT's), and kmem cannot reserve a range that holds
    the firmware's block: the node never comes online (6.1 took the soft-reserved piece alone)."""
    below = _q35_ram_below_4g(topo)
    first = _first_slow_start(topo)
    return first if first and first < below else below


def max_ram_below_4g(topo: Any) -> int | None:
    """q35's ``max-ram-below-4g`` (MiB) that :func:`ram_below_4g` asks of QEMU; None where QEMU's own layout is
    that (no slow node, or none below 4 GiB)."""
    below = ram_below_4g(topo)
    return below if below < _q35_ram_below_4g(topo) else None


def guest_phys_ranges(topo: Any) -> list[list[tuple[int, int]]]:
    """Each node's guest-physical RAM as (start MiB, size MiB) pieces, as QEMU's q35 lays it out: nodes
    in order from 0, RAM below 4 GiB up to :func:`ram_below_4g`, the rest from 4 GiB."""
    below = ram_below_4g(topo)
    out = []
    addr = 0
    for node in topo.nodes:
        pieces = []
        start, size = addr, node.memory_mib
        if start < below < start + size:
            pieces.append((start, below - start))
            pieces.append((4096, start + size - below))
        else:
            pieces.append((start + (4096 - below if start >= below else 0), size))
        out.append(pieces)
        addr += size
    return out


def slow_pieces(topo: Any) -> list[tuple[int, int, int]]:
    """(node, start MiB, size MiB) of every slow node's RAM: above 4 GiB (:func:`ram_below_4g`), so none holds the
    firmware's tables at the top of low RAM."""
    tiers = getattr(topo, "tiers", None)
    if not tiers:
        return []
    ranges = guest_phys_ranges(topo)
    return [(node, start, size) for node in tiers.slow_nodes for start, size in ranges[node]]


def kernel_args(topo: Any) -> list[str]:
    """The guest kernel arguments that make the slow nodes soft-reserved (for dax kmem) and online hot-added
    memory at once. With RAM above 4 GiB, x86 sets aside 64 MiB of bounce buffers below it (SWIOTLB), all from
    the fast node that holds the low RAM (tiered-1s-far's node 0: 175 of its 256 MiB left on 6.1); numalab's
    guests have no device that DMAs (virtio without ACCESS_PLATFORM uses physical addresses), so
    ``swiotlb=noforce`` keeps that memory."""
    pieces = slow_pieces(topo)
    if not pieces:
        return []
    args = [f"memmap={size}M%{start}M-{E820_RAM}+{E820_SOFT_RESERVED:#x}" for _, start, size in pieces]
    above = any(start >= 4096 for _, start, _ in pieces)
    return [*args, *(["swiotlb=noforce"] if above else []), "memhp_default_state=online"]


def _best(values: list[tuple[int, int]], lower_is_better: bool) -> tuple[int, list[int]]:
    """(best value, initiators with it) over (initiator, value) pairs."""
    best = min(v for _, v in values) if lower_is_better else max(v for _, v in values)
    return best, sorted(i for i, v in values if v == best)


def release_version(release: str | None) -> tuple[int, int] | None:
    """``6.12.117-numalab`` -> (6, 12); None when it does not say."""
    try:
        major, minor = (int(x) for x in (release or "").split("-")[0].split(".")[:2])
    except ValueError:
        return None
    return major, minor


def _best_cpu_access(tiers: MemoryTiers, cpu_nodes: list[int], target: int) -> tuple[int, int]:
    """A node's HMAT access from its best CPU initiator (the kernel's ACCESS_COORDINATE_CPU): the lowest latency
    and the highest bandwidth, each over the initiators."""
    lat = min(tiers.latency_ns[r][target] for r in range(len(cpu_nodes)))
    bw = max(tiers.bandwidth_mib[r][target] for r in range(len(cpu_nodes)))
    return lat, bw


def dax_adistance(topo: Any, node: int, release: str | None) -> int:
    """The abstract distance dax kmem gives a slow node. 6.1: ``MEMTIER_DEFAULT_DAX_ADISTANCE``. From 6.7 with an
    HMAT (``mt_calc_adistance`` -> ``mt_perf_to_adistance``, mm/memory-tiers.c): the DRAM tier's in proportion
    to the node's latency (read + write) and inversely to its bandwidth, against the first DRAM node's (memory and
    CPUs), in the kernel's integer order of operations; if another DRAM node's access differs from that one's by
    more than 10%, the kernel takes no HMAT figure and the default stands."""
    tiers: MemoryTiers = topo.tiers or MemoryTiers()
    version = release_version(release)
    if not tiers.hmat or version is None or version < HMAT_ADISTANCE_FROM:
        return MEMTIER_DEFAULT_DAX_ADISTANCE
    cpu_nodes = topo.cpu_nodes
    dram = [n.id for n in topo.nodes if n.cpus and n.memory_mib and n.id not in tiers.slow_nodes]
    if not dram:
        return MEMTIER_DEFAULT_DAX_ADISTANCE
    ref_lat, ref_bw = _best_cpu_access(tiers, cpu_nodes, dram[0])
    for other in dram[1:]:
        lat, bw = _best_cpu_access(tiers, cpu_nodes, other)
        if abs(lat - ref_lat) * 10 > ref_lat or abs(bw - ref_bw) * 10 > ref_bw:
            return MEMTIER_DEFAULT_DAX_ADISTANCE  # (memory-tiers: "the performance of DRAM node N mismatches")
    lat, bw = _best_cpu_access(tiers, cpu_nodes, node)
    return MEMTIER_ADISTANCE_DRAM * (2 * lat) // (2 * ref_lat) * (2 * ref_bw) // (2 * bw)


def predict_tiers(topo: Any, release: str | None = None) -> dict:
    """The memory tiers of ``topo`` as a kernel of ``release`` builds them (6.1's when None; JSON-ready): tiers and
    their nodes, the top tier, the demotion targets (predicted; 6.1 does not expose them), and each node's HMAT
    access0 values. From 6.7 a slow node's tier comes from the HMAT (:func:`dax_adistance`)."""
    tiers: MemoryTiers = topo.tiers or MemoryTiers()
    slow = set(tiers.slow_nodes)
    by_tier: dict[int, list[int]] = {}
    for node in topo.nodes:
        tier = dax_adistance(topo, node.id, release) >> MEMTIER_CHUNK_BITS if node.id in slow else DRAM_TIER
        by_tier.setdefault(tier, []).append(node.id)
    order = sorted(by_tier)
    # establish_demotion_targets(): the slowest tier with a CPU node, and every faster one, are the top tiers
    top = max(t for t in order if any(topo.nodes[i].cpus for i in by_tier[t]))
    demotion: dict[str, list[int]] = {}
    for idx, tier in enumerate(order):
        for node in by_tier[tier]:
            if idx + 1 < len(order):
                lower = by_tier[order[idx + 1]]
                best = min(topo.distances[node][t] for t in lower)
                demotion[str(node)] = [t for t in lower if topo.distances[node][t] == best]
            else:
                demotion[str(node)] = []
    hmat: dict[str, dict] = {}
    if tiers.hmat:
        cpu_nodes = topo.cpu_nodes
        for target in range(topo.n_nodes):
            lat, lat_init = _best([(i, tiers.latency_ns[r][target]) for r, i in enumerate(cpu_nodes)], True)
            bw, bw_init = _best([(i, tiers.bandwidth_mib[r][target]) for r, i in enumerate(cpu_nodes)], False)
            hmat[str(target)] = {
                "read_latency": lat,
                "write_latency": lat,
                "read_bandwidth": bw,
                "write_bandwidth": bw,
                # the kernel links the initiators that are best for every attribute it compared
                "initiators": sorted(set(lat_init) & set(bw_init)) or sorted(set(lat_init) | set(bw_init)),
            }
    return {
        "tiers": {f"memory_tier{t}": format_cpulist(by_tier[t]) for t in order},
        "slow_nodes": sorted(slow),
        "top_tier": f"memory_tier{top}",
        "promotion_sources": [i for t in order if t > top for i in by_tier[t]],
        "demotion_targets": demotion,
        "demotion_targets_exposed": False,
        "hmat_access0": hmat,
        "kernel_args": kernel_args(topo),
    }


def read_tiers(text: str) -> dict:
    """The guest's ``tiers.txt`` (``grep -H`` lines: path:value) -> tiers, demotion_enabled, hmat."""
    out: dict = {"tiers": {}, "demotion_enabled": None, "hmat_access0": {}}
    for line in text.splitlines():
        path, sep, value = line.partition(":")
        if not sep:
            continue
        parts = path.strip("/").split("/")
        value = value.strip()
        if len(parts) >= 2 and parts[-1] == "nodelist" and parts[-2].startswith("memory_tier"):
            out["tiers"][parts[-2]] = value
        elif parts[-1] == "demotion_enabled":
            out["demotion_enabled"] = value == "true"
        elif "access0" in parts and len(parts) >= 4:
            node = parts[parts.index("access0") - 1].removeprefix("node")
            entry = out["hmat_access0"].setdefault(node, {})
            if (n := to_int(value)) is not None and n >= 0:
                entry[parts[-1]] = n
    return out


def check_tiers(predicted: dict, readback: dict) -> list[str]:
    """Problems where the guest's memory tiers or HMAT values differ from the prediction."""
    problems = []
    got = {k: format_cpulist(checked_cpulist(v) or []) if checked_cpulist(v) is not None else v
           for k, v in readback.get("tiers", {}).items()}  # fmt: skip
    if got != predicted["tiers"]:
        problems.append(f"memory tiers: predicted {predicted['tiers']}, the guest has {got}")
    for node, want in predicted.get("hmat_access0", {}).items():
        seen = readback.get("hmat_access0", {}).get(node, {})
        for key in ("read_latency", "write_latency", "read_bandwidth", "write_bandwidth"):
            if seen.get(key) != want[key]:
                problems.append(f"node {node} access0 {key}: predicted {want[key]}, the guest has {seen.get(key)}")
    return problems


def describe(view: dict) -> str:
    """:func:`predict_tiers` as text (``numalab topo show``)."""
    lines = ["memory tiers (Linux 6.1):"]
    for tier, nodes in view["tiers"].items():
        top = "  (top tier)" if tier == view["top_tier"] else ""
        lines.append(f"  {tier}: nodes {nodes}{top}")
    for node, targets in view["demotion_targets"].items():
        if targets:
            lines.append(f"  node {node} demotes to {format_cpulist(targets)} (predicted; 6.1 does not show it)")
    if view["promotion_sources"]:
        lines.append(f"  numa_balancing=2 promotes from nodes {format_cpulist(view['promotion_sources'])}")
    for node, h in view["hmat_access0"].items():
        lines.append(
            f"  node {node} HMAT access0: {h['read_latency']} ns, {h['read_bandwidth']} MiB/s "
            f"from initiator {format_cpulist(h['initiators'])}"
        )
    if view["kernel_args"]:
        lines.append(f"  kernel args: {' '.join(view['kernel_args'])}")
    return "\n".join(lines)
