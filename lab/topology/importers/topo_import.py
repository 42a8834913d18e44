"""Real machines' topologies -> spec files: ``numactl -H`` output, a host's ``/sys/devices/system/{node,cpu}``,
and (lab.topology.importers.hwloc) ``lstopo --of xml`` files and hwloc synthetic descriptions.

Bug reports paste ``numactl -H``; a host can be read directly from sysfs. Both
give nodes (CPUs, memory) and the SLIT. :func:`to_spec_yaml` writes a spec the
rest of numalab loads (``lab.topology.model.spec``), scaled to sizes a laptop can boot
(``cpus_per_node``/``mem_per_node``) with the machine's own sizes kept in its
``description``. CPU-less nodes stay CPU-less; node ids that are not contiguous
(``available: 2 nodes (0,2)``) are renumbered 0.. in order, and the description
says so.

With ``cpu/`` beside ``node/`` (:func:`sysfs_dirs`), sysfs also tells each CPU's
package, die, core and caches (:func:`read_sysfs_cpus`), as hwloc does: those
imports go through lab.topology.importers.machine_grid, which adds the CPU grid's fields
(packages, llcs_per_node, cores_per_cluster, threads, cpu_vendor, cpu_model) and keeps
memoryless nodes (``memory: 0``).

Bad or partial input is a one-line :class:`LabError` naming the line (numactl)
or the file (sysfs, read by lab.topology.model.sysfs under its STRICT trust; hwloc XML).
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

from lab.datafile import MAX_SPEC_BYTES, parse_yaml, read_bytes, text_of
from lab.errors import LabError
from lab.topology.importers.hwloc import MAX_XML_BYTES, looks_like_xml, parse_hwloc_xml, parse_synthetic
from lab.topology.importers.imported_spec import ImportedSpec, grid_spec
from lab.topology.model.machine import CpuGroups, Machine, MachineNode, check_machine
from lab.topology.model.numactl import parse_numactl
from lab.topology.model.spec import load_spec, parse_mib
from lab.topology.model.sysfs import CpuFacts, NodeFacts, SysfsFiles, SysfsReader, Trust, read_cpu, read_node
from lab.topology.model.tiers import parse_tiers
from lab.topology.model.topology import LOCAL_DISTANCE, MAX_DISTANCE, MAX_NODES, Node, Topology, check_name, validate
from lab.topology.predictions.kernel_warnings import layout_warnings

SYSFS_NODE_ROOT = Path("/sys/devices/system/node")


def _strict(root: Path) -> SysfsReader:
    return SysfsReader(SysfsFiles(root), Trust.STRICT)


def _sysfs_node_ids(reader: SysfsReader) -> list[int]:
    """The node ids under the reader's root: its ``online`` list, else its ``nodeN`` directories; each must be
    there."""
    root = reader.files.root
    assert root is not None
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


def _sysfs_mib(reader: SysfsReader, facts: NodeFacts, memoryless: bool = False) -> int:
    """The node's MemTotal in MiB from its ``meminfo``; it must have memory unless ``memoryless``."""
    meminfo = reader.files.where(f"node{facts.node}/meminfo")
    if facts.meminfo_kb is None or "MemTotal" not in facts.meminfo_kb:
        raise LabError(f"{meminfo}: no 'MemTotal: N kB' line")
    mib = facts.meminfo_kb["MemTotal"] // 1024
    if mib <= 0 and not memoryless:
        raise LabError(f"{meminfo}: node {facts.node} has no memory; memoryless nodes cannot be emulated")
    return mib


def _sysfs_distances(reader: SysfsReader, facts: NodeFacts, ids: list[int]) -> tuple[int, ...]:
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


def read_sysfs(root: Path = SYSFS_NODE_ROOT, memoryless: bool = True) -> Machine:
    """A host's nodes from ``/sys/devices/system/node`` (or a copy of it under ``root``):
    ``has_memory``/``online``, and per node ``cpulist``, ``meminfo`` (MemTotal) and ``distance``.
    ``memoryless``: a node with CPUs and no memory is read as one (0 MiB), not refused."""
    if not root.is_dir():
        raise LabError(f"{root}: not a directory (expected a copy of /sys/devices/system/node)")
    reader = _strict(root)
    ids = _sysfs_node_ids(reader)
    nodes = []
    rows = []
    for node in ids:
        facts = read_node(reader, node)
        cpus = facts.cpus
        assert cpus is not None  # (STRICT)
        mib = _sysfs_mib(reader, facts, memoryless and bool(cpus))
        rows.append(_sysfs_distances(reader, facts, ids))
        nodes.append(MachineNode(node, cpus, mib))
    machine = Machine(
        nodes=tuple(nodes), distances=tuple(rows), origin=f"sysfs ({root})", slow_nodes=_sysfs_slow_nodes(root, nodes)
    )
    check_machine(machine, lambda node, kind: str(root / f"node{node}" / ("cpulist" if kind == "cpus" else kind)))
    return machine


def _sysfs_slow_nodes(root: Path, nodes: list[MachineNode]) -> tuple[int, ...]:
    """CPU-less nodes in a memory tier below the top ones (6.1: the slowest tier that has a CPU node, and
    every faster one), from ``ROOT/../../virtual/memory_tiering`` when the host (6.1+) has it."""
    tiering = root.parent.parent / "virtual" / "memory_tiering"
    if not tiering.is_dir():
        return ()
    with_cpus = {n.id for n in nodes if n.cpus}
    reader = _strict(tiering)
    numbers = reader.files.numbered("", "memory_tier")
    tiers = [(t, list(reader.value(f"memory_tier{t}/nodelist", "nodelist"))) for t in numbers]
    top = max((tier for tier, members in tiers if with_cpus & set(members)), default=None)
    if top is None:
        return ()
    known = {n.id for n in nodes}
    return tuple(sorted(n for tier, members in tiers if tier > top for n in members if n in known - with_cpus))


# --- sysfs: the CPUs' packages, cores and caches (/sys/devices/system/cpu) ------------------------------------

SYSFS_ROOT = Path("/sys/devices/system")
_X86_VENDORS = {0: "GenuineIntel", 2: "AuthenticAMD", 9: "HygonGenuine"}  # the kernel's X86_VENDOR_* in modalias


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


def _sysfs_caches(reader: SysfsReader, facts: CpuFacts, levels: dict[int, set[frozenset[int]]]) -> bool:
    """Add the CPU's unified or data L2 and L3 to ``levels``; False without ``cache/``."""
    if facts.caches is None:
        return False
    for cache in facts.caches:
        if cache.level in levels and cache.type in ("Unified", "Data"):
            assert cache.shared_cpus is not None  # (STRICT)
            shared = frozenset(cache.shared_cpus)
            if facts.cpu not in shared:
                where = reader.files.where(f"cpu{facts.cpu}/cache/index{cache.index}/shared_cpu_list")
                raise LabError(f"{where}: does not list CPU {facts.cpu} itself")
            levels[cache.level].add(shared)
    return True


def _sysfs_vendor(reader: SysfsReader) -> str:
    """The CPU vendor from ``cpu/modalias`` (x86: ``cpu:type:x86,venNNNN...``), "" if it does not say."""
    m = re.match(r"cpu:type:x86,ven(\d{4})", reader.text("modalias", required=False) or "")
    if not m:
        return ""
    return _X86_VENDORS.get(int(m.group(1)), f"x86 vendor {int(m.group(1))}")


def _sysfs_cpu_models(reader: SysfsReader) -> tuple[tuple[int, int], ...]:
    """The CPU family and model from ``cpu/modalias`` (x86: ``...famFFFFmodMMMM:``, hex, as the kernel reads
    them), () if it does not say."""
    modalias = reader.text("modalias", required=False) or ""
    m = re.match(r"cpu:type:x86,ven[0-9A-Fa-f]{4}fam([0-9A-Fa-f]{4})mod([0-9A-Fa-f]{4})", modalias)
    return ((int(m.group(1), 16), int(m.group(2), 16)),) if m else ()


def read_sysfs_cpus(cpu_root: Path, cpus: list[int]) -> CpuGroups:
    """How ``cpus`` group, from a copy of /sys/devices/system/cpu: per CPU ``topology/`` (physical_package_id,
    die_id, cluster_id, core_id, thread_siblings_list) and ``cache/index*`` (level, type, shared_cpu_list)."""
    packages: dict[int, set[int]] = {}
    dies: dict[tuple[int, int], set[int]] = {}
    cores: set[frozenset[int]] = set()
    by_id: dict[tuple[int, int, int], set[int]] = {}
    clusters: dict[tuple[int, int, int], set[int]] = {}
    levels: dict[int, set[frozenset[int]]] = {2: set(), 3: set()}
    with_caches = 0
    reader = _strict(cpu_root)
    for cpu in cpus:
        top = cpu_root / f"cpu{cpu}" / "topology"
        if not top.is_dir():
            raise LabError(f"{top}: missing (a node lists CPU {cpu})")
        facts = read_cpu(reader, cpu, cache_files=("shared_cpu_list",))
        pkg, die = facts.package, 0 if facts.die is None else facts.die
        packages.setdefault(pkg, set()).add(cpu)
        dies.setdefault((pkg, die), set()).add(cpu)
        if facts.thread_siblings is not None:
            cores.add(frozenset(facts.thread_siblings))
        else:  # (an older kernel: the core by its ids)
            by_id.setdefault((pkg, die, facts.core), set()).add(cpu)
        if facts.cluster is not None and facts.cluster >= 0:
            clusters.setdefault((pkg, die, facts.cluster), set()).add(cpu)
        with_caches += _sysfs_caches(reader, facts, levels)
    l2s = tuple(levels[2]) if with_caches else tuple(frozenset(c) for c in clusters.values())
    return CpuGroups(
        packages=tuple(frozenset(p) for p in packages.values()),
        cores=(*cores, *(frozenset(c) for c in by_id.values())),
        llcs=tuple(levels[3]),
        l2s=l2s,
        dies=tuple(frozenset(d) for d in dies.values()),
        vendor=_sysfs_vendor(reader),
        cpu_models=_sysfs_cpu_models(reader),
    )


def read_sysfs_grid(root: Path) -> Machine:
    """``--from-sysfs ROOT``: the nodes, and with a ``cpu/`` directory (see :func:`sysfs_dirs`) the CPUs' groups
    too; a memoryless node (CPUs, no memory) is read as one only then, when the spec has the new model's fields."""
    node_root, cpu_root = sysfs_dirs(root)
    if cpu_root is None:
        return read_sysfs(node_root)
    machine = read_sysfs(node_root, memoryless=True)
    cpus = sorted(c for n in machine.nodes for c in n.cpus)
    groups = read_sysfs_cpus(cpu_root, cpus)
    return replace(machine, origin=f"sysfs ({node_root} and {cpu_root})", groups=groups)


def _mem_text(mib: int) -> str:
    return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"


def scaled_topology(
    machine: Machine, name: str, cpus_per_node: int, mem_per_node_mib: int, slow_cpuless: bool = False
) -> Topology:
    """The machine with every CPU node given ``cpus_per_node`` CPUs and every node ``mem_per_node_mib``
    (CPU-less nodes stay CPU-less), described with its original sizes; validated. ``slow_cpuless`` makes
    the CPU-less nodes a slower memory tier (lab.topology.model.tiers: dax kmem, as CXL memory comes up)."""
    check_name(name, "--name")
    real = "; ".join(f"node {n.id}: {len(n.cpus)} CPUs, {n.memory_mib} MiB" for n in machine.nodes)
    renumbered = [n.id for n in machine.nodes] != list(range(len(machine.nodes)))
    plural = "s" if len(machine.nodes) > 1 else ""
    description = (
        f"Imported from {machine.origin}: {len(machine.nodes)} node{plural}, {machine.total_cpus} CPUs ({real})"
        + (f"; node ids {[n.id for n in machine.nodes]} renumbered 0..{len(machine.nodes) - 1}" if renumbered else "")
        + (f"; nodes {list(machine.slow_nodes)} are in a lower memory tier" if machine.slow_nodes else "")
        + f". Scaled to {cpus_per_node} CPUs and {_mem_text(mem_per_node_mib)} per node."
    )
    topo = Topology(
        name=name,
        nodes=tuple(
            Node(i, cpus_per_node if n.cpus else 0, mem_per_node_mib if n.memory_mib else 0)
            for i, n in enumerate(machine.nodes)
        ),
        distances=machine.distances,
        description=description,
    )
    cpuless = [i for i, n in enumerate(machine.nodes) if not n.cpus]
    if slow_cpuless and not cpuless:
        raise LabError("--slow-cpuless: the machine has no CPU-less nodes")
    # the machine's own lower tiers (sysfs), or every CPU-less node with --slow-cpuless
    slow = cpuless if slow_cpuless else [i for i, n in enumerate(machine.nodes) if n.id in machine.slow_nodes]
    if slow:
        tiers = parse_tiers(
            {"tiers": {"slow_nodes": slow}}, [n.cpus for n in topo.nodes], [list(r) for r in topo.distances]
        )
        topo = replace(topo, tiers=tiers)
    try:
        validate(topo)
    except LabError as err:
        raise LabError(f"{machine.origin} scaled to {cpus_per_node} CPUs per node: {err}") from None
    return topo


def to_spec_yaml(topo: Topology) -> str:
    """A spec file (the format of ``topologies/*.yaml``) for ``topo``: explicit nodes and SLIT. The name is
    quoted: a file stem such as ``123`` would read back as a number."""
    lines = [f"name: {_yaml_str(topo.name)}", f"description: {_yaml_str(topo.description)}"]
    cpus = {n.cpus for n in topo.nodes}
    mems = {n.memory_mib for n in topo.nodes}
    if len(cpus) == 1 and len(mems) == 1:
        lines += [
            f"nodes: {topo.n_nodes}",
            f"cpus_per_node: {cpus.pop()}",
            f"memory_per_node: {_mem_text(mems.pop())}",
        ]
    else:
        lines.append("nodes:")
        lines += [f"  - {{id: {n.id}, cpus: {n.cpus}, memory: {_mem_text(n.memory_mib)}}}" for n in topo.nodes]
    if topo.threads != 1:
        lines.append(f"threads: {topo.threads}")
    if topo.tiers and topo.tiers.slow_nodes:
        slow = ", ".join(map(str, topo.tiers.slow_nodes))
        lines += ["tiers:", f"  slow_nodes: [{slow}]"]
    width = max(len(str(v)) for row in topo.distances for v in row)
    lines.append("distances:")
    lines += ["  - [" + ", ".join(str(v).rjust(width) for v in row) + "]" for row in topo.distances]
    return "\n".join(lines) + "\n"


def _yaml_str(text: str) -> str:
    """A double-quoted YAML scalar (the description has ':' and ';')."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def safe_name(stem: str) -> str:
    """A file's stem made into a spec name (letters, digits and ._+-, at most 64)."""
    name = re.sub(r"[^A-Za-z0-9._+-]+", "-", stem).strip("-._+")[:64]
    return name or "imported"


def yaml_data(text: str) -> object:
    """Parse a spec text written by :func:`to_spec_yaml` (to check that it loads back)."""
    return parse_yaml(text, "the imported spec")


def _read_file(file: str) -> tuple[bytes, str]:
    """A file's bytes (``-``: standard input), at most what an hwloc XML file may have, and its name."""
    if file != "-":
        return read_bytes(Path(file), limit=MAX_XML_BYTES), file
    data = sys.stdin.buffer.read(MAX_XML_BYTES + 1)
    if len(data) > MAX_XML_BYTES:
        raise LabError(f"-: standard input: more than the {MAX_XML_BYTES >> 20} MiB an import may read")
    return data, "-"


def _numactl_text(data: bytes, file: str) -> str:
    where = "-: standard input" if file == "-" else file
    if len(data) > MAX_SPEC_BYTES:
        raise LabError(f"{where}: more than the {MAX_SPEC_BYTES >> 20} MiB numactl -H output may be")
    return text_of(data, where)


def import_spec(
    file: str | None,
    from_sysfs: str | None,
    name: str | None,
    cpus_per_node: int | None,
    mem_per_node: str,
    slow_cpuless: bool = False,
    hwloc_synthetic: str | None = None,
) -> ImportedSpec:
    """``numalab topo import``: a file (``-`` for standard input) of numactl -H output or hwloc XML (told apart
    by content), a sysfs directory (:func:`sysfs_dirs`) or an hwloc synthetic description -> the scaled spec.

    numactl -H output and a node directory alone give nodes and a SLIT, as before (``cpus_per_node`` None: 2),
    checked to load back (``topology``). hwloc and sysfs with ``cpu/`` give the CPU grid too
    (lab.topology.importers.machine_grid; ``cpus_per_node`` None: the fewest the grid allows, at least 2, that the
    kernel reads as the machine). ``warnings``: what ``topo check`` will warn of the scale (a ``cpus_per_node``
    given)."""
    given = [x for x in (file, from_sysfs, hwloc_synthetic) if x is not None]
    if len(given) != 1:
        raise LabError(
            "topo import: give one of a file (numactl -H output or hwloc XML, - for stdin), --from-sysfs [ROOT] "
            "or --hwloc-synthetic DESC"
        )
    if name is not None:  # (--name "" is a name given empty, refused, not the file's)
        check_name(name, "--name")
    mem = parse_mib(mem_per_node, "--mem-per-node")
    source: Machine
    if from_sysfs is not None:
        source, default_name = read_sysfs_grid(Path(from_sysfs)), "host"
    elif hwloc_synthetic is not None:
        source, default_name = parse_synthetic(hwloc_synthetic), "synthetic"
    else:
        assert file is not None
        data, label = _read_file(file)
        default_name = "imported" if file == "-" else Path(file).stem
        if looks_like_xml(data):
            source = parse_hwloc_xml(data, label)
        else:
            source = parse_numactl(_numactl_text(data, label), file)
    name = safe_name(default_name) if name is None else name
    if source.groups is not None:
        return grid_spec(source, name, cpus_per_node, mem, slow_cpuless)
    cpn = 2 if cpus_per_node is None else cpus_per_node
    if cpn < 1:
        raise LabError(f"--cpus-per-node: must be >= 1, got {cpn}")
    topo = scaled_topology(source, name, cpn, mem, slow_cpuless)
    spec = to_spec_yaml(topo)
    loaded = load_spec(yaml_data(spec), "the imported spec")
    assert loaded.distances == topo.distances and loaded.nodes == topo.nodes
    data = yaml_data(spec)
    assert isinstance(data, dict)
    return ImportedSpec(data=data, text=spec, notes=(), topology=topo, warnings=tuple(layout_warnings(topo)))
