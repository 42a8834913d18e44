"""A copy of /sys/devices/system (``node/``, and ``cpu/`` beside it) read into one :class:`Machine`, under an
explicit :class:`~lab.topology.model.sysfs.Trust` (:func:`read_machine`).

STRICT is ``numalab topo import --from-sysfs``: a bad or missing file is a one-line :class:`LabError` naming it, a
node without memory or a CPU in two nodes too. BEST_EFFORT is this host for placement
(lab.placement.host_inventory): what cannot be read is left out, never raised. Its choices: the nodes are the
``nodeN`` directories; a node whose cpulist cannot be read has no CPUs, one without a MemTotal no memory; a SLIT
that cannot be read whole (a row missing, or too short for the node ids) is ACPI's default, 10 local and 20
remote; without a node directory the machine has no nodes (the host's reader makes it one); a CPU's groups and
caches are those of its files it can read.

Per node: ``cpulist``, ``meminfo`` (MemTotal) and ``distance``, and the memory tiers of
``../virtual/memory_tiering`` when there (6.1+). Per CPU (:func:`read_sysfs_cpus`): ``topology/``
(physical_package_id, die_id, cluster_id, core_id, thread_siblings_list) and ``cache/index*`` (level, type,
shared_cpu_list, size); the CPU vendor and model from ``cpu/modalias``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from lab.errors import LabError
from lab.topology.model.machine import Cache, CpuGroups, Machine, MachineNode, check_machine
from lab.topology.model.sysfs import CpuFacts, NodeFacts, SysfsFiles, SysfsReader, Trust, read_cpu, read_node
from lab.topology.model.topology import LOCAL_DISTANCE, MAX_DISTANCE, MAX_NODES

SYSFS_ROOT = Path("/sys/devices/system")
SYSFS_NODE_ROOT = SYSFS_ROOT / "node"
_X86_VENDORS = {0: "GenuineIntel", 2: "AuthenticAMD", 9: "HygonGenuine"}  # the kernel's X86_VENDOR_* in modalias
ACPI_REMOTE = 20  # ACPI's distance between two nodes when there is no SLIT (and BEST_EFFORT's, when it can't be read)


def _reader(root: Path, trust: Trust) -> SysfsReader:
    return SysfsReader(SysfsFiles(root), trust)


def sysfs_dirs(root: Path) -> tuple[Path, Path | None]:
    """The node directory and the cpu directory (None without one) of ``--from-sysfs ROOT``: ROOT holding
    ``node/`` (and maybe ``cpu/``), as /sys/devices/system does, or a node directory itself, with ``cpu/``
    beside it when it is named ``node`` (a copy of /sys/devices/system/node alone reads as before)."""
    if (root / "node").is_dir():
        cpu = root / "cpu"
        return root / "node", cpu if cpu.is_dir() else None
    if root.name == "node" and (root.parent / "cpu").is_dir():
        return root, root.parent / "cpu"
    return root, None


def read_machine(root: Path = SYSFS_ROOT, trust: Trust = Trust.STRICT) -> Machine:
    """The machine of a sysfs copy (``root``: see :func:`sysfs_dirs`): its nodes, and with a ``cpu/`` directory
    the CPUs' groups and caches too (a copy of the node directory alone has no groups: ``groups`` None)."""
    node_root, cpu_root = sysfs_dirs(root)
    machine = read_sysfs(node_root, trust)
    if cpu_root is None:
        return machine
    cpus = sorted(c for n in machine.nodes for c in n.cpus)
    if not machine.nodes:  # (BEST_EFFORT, without NUMA sysfs: the CPUs the kernel has online)
        cpus = list(_reader(cpu_root, trust).value("online", "cpulist", required=False) or ())
    groups = read_sysfs_cpus(cpu_root, cpus, trust)
    return replace(machine, origin=f"sysfs ({node_root} and {cpu_root})", groups=groups)


# --- the nodes (/sys/devices/system/node) -----------------------------------------------------------------------


def _node_ids(reader: SysfsReader) -> list[int]:
    """The node ids under the reader's root: STRICT, its ``online`` list, else its ``nodeN`` directories, each of
    which must be there; BEST_EFFORT, its ``nodeN`` directories."""
    root = reader.files.root
    assert root is not None
    if reader.trust is not Trust.STRICT:
        return reader.files.numbered("", "node")
    online_file = root / "online"
    if online_file.exists():
        ids = list(reader.value("online", "nodelist"))
    else:
        ids = reader.files.numbered("", "node")
    if not ids:
        raise LabError(f"{root}: no node directories (node0, node1, ...)")
    if len(ids) > MAX_NODES:
        raise LabError(f"{root}: {len(ids)} nodes, at most {MAX_NODES} are supported")
    for node in ids:
        if not (root / f"node{node}").is_dir():
            raise LabError(f"{root / f'node{node}'}: missing, but {online_file.name} lists node {node}")
    return ids


def _node_mib(reader: SysfsReader, facts: NodeFacts, memoryless: bool) -> int:
    """The node's MemTotal in MiB from its ``meminfo`` (BEST_EFFORT: 0 when it does not say); STRICT, it must
    have memory unless ``memoryless``."""
    total = (facts.meminfo_kb or {}).get("MemTotal")
    if reader.trust is not Trust.STRICT:
        return (total or 0) // 1024
    meminfo = reader.files.where(f"node{facts.node}/meminfo")
    if total is None:
        raise LabError(f"{meminfo}: no 'MemTotal: N kB' line")
    mib = total // 1024
    if mib <= 0 and not memoryless:
        raise LabError(f"{meminfo}: node {facts.node} has no memory; memoryless nodes cannot be emulated")
    return mib


def _strict_distances(reader: SysfsReader, facts: NodeFacts, ids: list[int]) -> tuple[int, ...]:
    """The node's SLIT row from its ``distance``: one valid distance to each of ``ids``."""
    where = reader.files.where(f"node{facts.node}/distance")
    row = facts.distances
    assert row is not None  # (STRICT)
    if len(row) != len(ids):
        raise LabError(f"{where}: {len(row)} distances for {len(ids)} nodes")
    for col, v in zip(ids, row):
        ok = v == LOCAL_DISTANCE if col == facts.node else LOCAL_DISTANCE < v <= MAX_DISTANCE
        if not ok:
            raise LabError(f"{where}: distance {facts.node}->{col} is {v}")
    return row


def _best_effort_distances(rows: list[tuple[int, ...] | None], ids: list[int]) -> tuple[tuple[int, ...], ...]:
    """The SLIT from the rows read (None: not read), each row's column of a node at its id; ACPI's default (10
    local, 20 remote) when a row is missing or too short for the ids."""
    if ids and all(r is not None and len(r) > max(ids) for r in rows):
        return tuple(tuple(r[i] for i in ids) for r in rows if r is not None)
    return tuple(tuple(LOCAL_DISTANCE if a == b else ACPI_REMOTE for b in ids) for a in ids)


def read_sysfs(root: Path = SYSFS_NODE_ROOT, trust: Trust = Trust.STRICT) -> Machine:
    """A host's nodes from ``/sys/devices/system/node`` (or a copy of it under ``root``): ``online`` and per node
    ``cpulist``, ``meminfo`` (MemTotal) and ``distance``; a node with CPUs and no memory is read as a memoryless
    one (0 MiB). BEST_EFFORT: see the module's docstring."""
    strict = trust is Trust.STRICT
    if strict and not root.is_dir():
        raise LabError(f"{root}: not a directory (expected a copy of /sys/devices/system/node)")
    reader = _reader(root, trust)
    ids = _node_ids(reader) if root.is_dir() else []
    nodes = []
    rows = []
    for node in ids:
        facts = read_node(reader, node)
        cpus = facts.cpus or ()
        mib = _node_mib(reader, facts, bool(cpus))
        rows.append(_strict_distances(reader, facts, ids) if strict else facts.distances)
        nodes.append(MachineNode(node, cpus, mib))
    distances = tuple(r for r in rows if r is not None) if strict else _best_effort_distances(rows, ids)
    machine = Machine(
        nodes=tuple(nodes), distances=distances, origin=f"sysfs ({root})", slow_nodes=_slow_nodes(root, nodes, trust)
    )
    if strict:
        check_machine(machine, lambda node, kind: str(root / f"node{node}" / ("cpulist" if kind == "cpus" else kind)))
    return machine


def _slow_nodes(root: Path, nodes: list[MachineNode], trust: Trust) -> tuple[int, ...]:
    """CPU-less nodes in a memory tier below the top ones (6.1: the slowest tier that has a CPU node, and
    every faster one), from ``ROOT/../../virtual/memory_tiering`` when the host (6.1+) has it."""
    tiering = root.parent.parent / "virtual" / "memory_tiering"
    if not tiering.is_dir():
        return ()
    with_cpus = {n.id for n in nodes if n.cpus}
    reader = _reader(tiering, trust)
    numbers = reader.files.numbered("", "memory_tier")
    tiers = [(t, list(reader.value(f"memory_tier{t}/nodelist", "nodelist") or ())) for t in numbers]
    top = max((tier for tier, members in tiers if with_cpus & set(members)), default=None)
    if top is None:
        return ()
    known = {n.id for n in nodes}
    return tuple(sorted(n for tier, members in tiers if tier > top for n in members if n in known - with_cpus))


# --- the CPUs' packages, cores and caches (/sys/devices/system/cpu) ------------------------------------------


def _add_caches(
    reader: SysfsReader,
    facts: CpuFacts,
    levels: dict[int, set[frozenset[int]]],
    sizes: dict[tuple[int, frozenset[int]], int | None],
) -> bool:
    """Add the CPU's unified or data L2 and L3 to ``levels`` and (with their sizes) to ``sizes``; False without
    ``cache/``. A cache whose shared_cpu_list does not list the CPU itself: STRICT refuses it, BEST_EFFORT
    leaves it out (and takes one whose type it cannot read as unified)."""
    if facts.caches is None:
        return False
    for cache in facts.caches:
        if cache.level not in levels or cache.type not in ("Unified", "Data", None) or cache.shared_cpus is None:
            continue  # (a type not read, BEST_EFFORT's: an L2 or L3 is unified)
        shared = frozenset(cache.shared_cpus)
        if facts.cpu not in shared:
            if reader.trust is Trust.STRICT:
                where = reader.files.where(f"cpu{facts.cpu}/cache/index{cache.index}/shared_cpu_list")
                raise LabError(f"{where}: does not list CPU {facts.cpu} itself")
            continue
        levels[cache.level].add(shared)
        if sizes.get((cache.level, shared)) is None:  # (the first CPU that gives its size)
            sizes[cache.level, shared] = int(cache.size[:-1]) if cache.size else None  # ("32768K")
    return True


def _cache_order(item: tuple[tuple[int, frozenset[int]], int | None]) -> tuple[int, int]:
    (level, cpus), _ = item
    return level, min(cpus)


def _vendor(reader: SysfsReader) -> str:
    """The CPU vendor from ``cpu/modalias`` (x86: ``cpu:type:x86,venNNNN...``), "" if it does not say."""
    m = re.match(r"cpu:type:x86,ven(\d{4})", reader.text("modalias", required=False) or "")
    if not m:
        return ""
    return _X86_VENDORS.get(int(m.group(1)), f"x86 vendor {int(m.group(1))}")


def _cpu_models(reader: SysfsReader) -> tuple[tuple[int, int], ...]:
    """The CPU family and model from ``cpu/modalias`` (x86: ``...famFFFFmodMMMM:``, hex, as the kernel reads
    them), () if it does not say."""
    modalias = reader.text("modalias", required=False) or ""
    m = re.match(r"cpu:type:x86,ven[0-9A-Fa-f]{4}fam([0-9A-Fa-f]{4})mod([0-9A-Fa-f]{4})", modalias)
    return ((int(m.group(1), 16), int(m.group(2), 16)),) if m else ()


def read_sysfs_cpus(cpu_root: Path, cpus: list[int], trust: Trust = Trust.STRICT) -> CpuGroups:
    """How ``cpus`` group, from a copy of /sys/devices/system/cpu: per CPU ``topology/`` (physical_package_id,
    die_id, cluster_id, core_id, thread_siblings_list) and ``cache/index*`` (level, type, shared_cpu_list, size).
    STRICT wants each CPU's ``topology/``; BEST_EFFORT groups a CPU by the files of it that it can read."""
    packages: dict[int, set[int]] = {}
    dies: dict[tuple[int, int], set[int]] = {}
    cores: set[frozenset[int]] = set()
    by_id: dict[tuple[int, int, int], set[int]] = {}
    clusters: dict[tuple[int, int, int], set[int]] = {}
    levels: dict[int, set[frozenset[int]]] = {2: set(), 3: set()}
    sizes: dict[tuple[int, frozenset[int]], int | None] = {}  # (level, CPUs) -> KiB
    with_caches = 0
    reader = _reader(cpu_root, trust)
    for cpu in cpus:
        top = cpu_root / f"cpu{cpu}" / "topology"
        if trust is Trust.STRICT and not top.is_dir():
            raise LabError(f"{top}: missing (a node lists CPU {cpu})")
        facts = read_cpu(reader, cpu, cache_files=("shared_cpu_list", "size"))
        pkg, die = facts.package, 0 if facts.die is None else facts.die
        if pkg is not None:
            packages.setdefault(pkg, set()).add(cpu)
            dies.setdefault((pkg, die), set()).add(cpu)
        if facts.thread_siblings is not None:
            cores.add(frozenset(facts.thread_siblings))
        elif pkg is not None and facts.core is not None:  # (an older kernel: the core by its ids)
            by_id.setdefault((pkg, die, facts.core), set()).add(cpu)
        if pkg is not None and facts.cluster is not None and facts.cluster >= 0:
            clusters.setdefault((pkg, die, facts.cluster), set()).add(cpu)
        with_caches += _add_caches(reader, facts, levels, sizes)
    l2s = tuple(levels[2]) if with_caches else tuple(frozenset(c) for c in clusters.values())
    return CpuGroups(
        packages=tuple(frozenset(p) for p in packages.values()),
        cores=(*cores, *(frozenset(c) for c in by_id.values())),
        llcs=tuple(levels[3]),
        l2s=l2s,
        dies=tuple(frozenset(d) for d in dies.values()),
        vendor=_vendor(reader),
        cpu_models=_cpu_models(reader),
        caches=tuple(Cache(level, cpus, kib) for (level, cpus), kib in sorted(sizes.items(), key=_cache_order)),
    )
