"""A real machine's CPUs grouped into packages, L3s, L2s and cores -> a spec with the CPU grid (issue #48).

hwloc (lab.topology.hwloc: ``lstopo --of xml`` files and synthetic descriptions) and a copy of
``/sys/devices/system/{cpu,node}`` (lab.topology.importer) tell more than ``numactl -H``: which CPUs share a
package, an L3, an L2 and a core. :func:`derive_grid` turns that into the spec's optional fields::

    packages: 2           # the CPU nodes, in id order, split evenly among them
    llcs_per_node: 2      # L3s a node, each an equal share of its cores
    cores_per_cluster: 2  # cores sharing one L2 (left out when each core has its own)
    threads: 2
    cpu_vendor: amd
    cpu_model: {family: 25, model: 17}  # the packages' CPUID family and model, when the source gives them

and :func:`grid_spec` writes the spec, scaled like every import (``--cpus-per-node``, ``--mem-per-node``; by
default the fewest CPUs a node the kernel reads as this machine), as data and as YAML text whose comments say
what was decided. Nodes that hold different numbers of L3s (2 in one
node and 1 in another: an uneven machine) give each CPU node its own ``llcs:``, every L3 the same CPUs, when the
packages hold the same number of L3s each (QEMU's one grid); a field the machine does not fill evenly otherwise
(nodes in packages of different sizes, L2s shared by 1 or 2 cores) is left out, and a comment in the YAML says
what and why; an L3 that spans several nodes (Intel SNC, where CPUID's LLC is the package's) becomes
``llcs_per_node: 1`` with a comment, as the kernel splits it at the node.

Memoryless nodes (CPUs, no memory) stay memoryless (``memory: 0``), CPU-less ones CPU-less.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from lab import schemas
from lab.cpulist import format_cpulist
from lab.datafile import parse_yaml
from lab.errors import LabError
from lab.topology.kernel_warnings import layout_warnings
from lab.topology.model import MAX_VCPUS, Node, Topology, check_name, validate
from lab.topology.numactl import Machine
from lab.topology.spec import load_spec
from lab.topology.tiers import parse_tiers

Group = frozenset[int]
VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}  # CPUID vendor strings -> cpu_vendor


@dataclass(frozen=True)
class CpuGroups:
    """How a machine's CPUs (its own CPU ids) group; each a partition of the CPUs, () where not known."""

    packages: tuple[Group, ...] = ()
    cores: tuple[Group, ...] = ()  # (): each CPU a core of its own
    llcs: tuple[Group, ...] = ()  # the L3s
    l2s: tuple[Group, ...] = ()
    dies: tuple[Group, ...] = ()  # (said in the description only: the grid's dies are its LLCs)
    vendor: str = ""  # the CPUID vendor string (GenuineIntel, AuthenticAMD, ...), "" if not known
    cpu_models: tuple[tuple[int, int], ...] = ()  # the (family, model) pairs the source gives; () if not known


@dataclass(frozen=True)
class GridMachine:
    """A real machine with its CPU groups, before any scaling."""

    machine: Machine
    groups: CpuGroups
    facts: tuple[str, ...] = ()  # what the reader decided (default distances, a node given CPUs), for the description


@dataclass(frozen=True)
class GridFields:
    """The grid fields a machine fills evenly (None: left out), and a comment per field on what was decided."""

    threads: int
    packages: int | None
    llcs_per_node: int | None
    cores_per_cluster: int | None
    cpu_vendor: str | None
    comments: dict[str, str] = field(default_factory=dict)  # spec field -> one line
    node_llcs: tuple[int, ...] = ()  # an uneven machine's L3s of each CPU node (llcs_per_node then None)
    cpu_model: tuple[int, int] | None = None  # (family, model), with cpu_vendor only

    @property
    def fewest_llcs(self) -> int:
        """The L3s of the nodes with the fewest (every node's, on an even machine)."""
        return min(self.node_llcs) if self.node_llcs else self.llcs_per_node or 1

    @property
    def unit(self) -> int:
        """The fewest CPUs a node of the fewest L3s can have in this grid: an LLC each of one cluster of one
        core's threads."""
        return self.fewest_llcs * (self.cores_per_cluster or 1) * self.threads

    def node_cpus(self, cpus_per_node: int) -> list[int]:
        """The CPUs of each CPU node when the nodes of the fewest L3s have ``cpus_per_node``: the others in
        proportion to their L3s (all alike on an even machine)."""
        if not self.node_llcs:
            return []
        return [cpus_per_node // self.fewest_llcs * n for n in self.node_llcs]

    def layout(self, cpus: int, llcs: int | None = None) -> str:
        """``2 L3s x 2 clusters x 2 cores x 2 threads`` for a node of ``cpus`` CPUs in ``llcs`` L3s (default: the
        grid's L3s a node; ``N CPUs`` if they do not divide so)."""
        shown = llcs is not None or self.llcs_per_node is not None
        llcs = llcs or self.llcs_per_node or 1
        cluster = self.cores_per_cluster or 1
        if cpus % (llcs * cluster * self.threads):
            return _plural(cpus, "CPU")
        cores = cpus // (llcs * self.threads)
        parts = [_plural(llcs, "L3")] if shown else []
        if self.cores_per_cluster:
            parts += [_plural(cores // cluster, "cluster"), _plural(cluster, "core")]
        else:
            parts.append(_plural(cores, "core"))
        return " x ".join([*parts, _plural(self.threads, "thread")])


@dataclass(frozen=True)
class ImportedSpec:
    """A spec made from a real machine: its data (what ``text`` loads to), its YAML text with comments, and the
    comments on what was left out or decided."""

    data: dict
    text: str
    notes: tuple[str, ...]
    topology: Topology | None = None  # as numalab loads it (numactl -H and node-only imports; grid ones once the
    # schema knows the grid's fields)
    warnings: tuple[str, ...] = ()  # what topo check will warn of the spec (lab.topology.kernel_warnings' layout ones)

    @property
    def total_cpus(self) -> int:
        return sum(c for c, _ in self.node_sizes())

    @property
    def total_memory_mib(self) -> int:
        return sum(m for _, m in self.node_sizes())

    @property
    def n_nodes(self) -> int:
        nodes = self.data["nodes"]
        return nodes if isinstance(nodes, int) else len(nodes)

    def node_sizes(self) -> list[tuple[int, int]]:
        """(CPUs, MiB) of every node."""
        nodes = self.data["nodes"]
        if isinstance(nodes, int):
            return [(self.data["cpus_per_node"], _mib(self.data["memory_per_node"]))] * nodes
        return [(n["cpus"], _mib(n["memory"])) for n in nodes]


def _mib(value: object) -> int:
    if isinstance(value, int):
        return value
    text = str(value)
    return int(text[:-1]) * (1024 if text.endswith("G") else 1)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _ids(nodes: list[int]) -> str:
    return ", ".join(map(str, nodes))


# --- the machine's groups -> the grid fields -------------------------------------------------------------------


def _partition(groups: tuple[Group, ...], cpus: Group, what: str, origin: str) -> tuple[list[Group], Group]:
    """``groups`` cut to ``cpus`` (empty ones dropped), and the CPUs in none of them; a CPU in two is an error."""
    seen: dict[int, Group] = {}
    out = []
    for g in groups:
        g = g & cpus
        if not g:
            continue
        for c in g:
            if c in seen:
                raise LabError(f"{origin}: CPU {c} is in two {what}s ({_cpus(seen[c])} and {_cpus(g)})")
            seen[c] = g
        out.append(g)
    return out, cpus - seen.keys()


def _cpus(g: Group) -> str:
    return "CPUs " + format_cpulist(sorted(g))


def _threads(cores: list[Group], comments: dict[str, str]) -> int:
    sizes = sorted({len(c) for c in cores})
    if len(sizes) == 1:
        return sizes[0]
    comments["threads"] = (
        f"threads left out (1): cores have {' or '.join(map(str, sizes))} threads (SMT off on some cores?)"
    )
    return 1


def _packages(
    cpu_nodes: list[tuple[int, Group]],
    packages: list[Group],
    loose: Group,
    comments: dict[str, str],
    node_llcs: tuple[int, ...] = (),
) -> int | None:
    """The number of packages the CPU nodes split evenly into, in id order (on an uneven machine, ``node_llcs``:
    the same L3s in each), or None (with a comment)."""
    if not packages:
        comments["packages"] = "packages left out: the source has no packages (numalab's default, a package a node)"
        return None
    if loose:
        comments["packages"] = f"packages left out: {_cpus(loose)} are in no package"
        return None
    order: list[int] = []
    for node, cpus in cpu_nodes:
        holders = [i for i, p in enumerate(packages) if p & cpus]
        if len(holders) > 1:
            comments["packages"] = f"packages left out: node {node}'s CPUs are in {len(holders)} packages"
            return None
        order.append(holders[0])
    runs: list[tuple[int, list[int]]] = []
    for (node, _), pkg in zip(cpu_nodes, order):
        if runs and runs[-1][0] == pkg:
            runs[-1][1].append(node)
        elif any(p == pkg for p, _ in runs):
            first = next(nodes for p, nodes in runs if p == pkg)
            comments["packages"] = (
                f"packages left out: the nodes of one package ({_ids(first)} and {node}) are not consecutive ids"
            )
            return None
        else:
            runs.append((pkg, [node]))
    if node_llcs:
        llcs = dict(zip((node for node, _ in cpu_nodes), node_llcs))
        counts = sorted({sum(llcs[n] for n in nodes) for _, nodes in runs})
        what = "L3s (QEMU gives every package the same dies)"
    else:
        counts = sorted({len(nodes) for _, nodes in runs})
        what = "CPU nodes (not one count)"
    if len(counts) > 1:
        comments["packages"] = f"packages left out: packages hold {' or '.join(map(str, counts))} {what}"
        return None
    return len(runs)


def _llcs(
    cpu_nodes: list[tuple[int, Group]], llcs: list[Group], loose: Group, cores: list[Group], comments: dict[str, str]
) -> int | tuple[int, ...] | None:
    """L3s a node (1 when an L3 spans nodes, as on SNC), each CPU node's L3s where nodes hold different numbers
    (an uneven machine), or None (with a comment)."""
    if not llcs:
        comments["llcs_per_node"] = "llcs_per_node left out (1): the source has no L3"
        return None
    if loose:
        comments["llcs_per_node"] = f"llcs_per_node left out (1): {_cpus(loose)} share no L3"
        return None
    inside = {node: [g for g in llcs if g & cpus] for node, cpus in cpu_nodes}
    if all(g <= cpus for node, cpus in cpu_nodes for g in inside[node]):
        counts = sorted({len(v) for v in inside.values()})
        sizes = sorted({sum(1 for c in cores if c <= g) for g in llcs})
        if len(counts) > 1:
            comments["llcs_per_node"] = (
                f"nodes have {' or '.join(map(str, counts))} L3s: each CPU node's own llcs: (an uneven machine)"
            )
        if len(sizes) > 1:
            comments["llcs_per_node"] = (
                comments.get("llcs_per_node", "") + ("; " if len(counts) > 1 else "")
                + f"the machine's L3s hold {' or '.join(map(str, sizes))} cores; the spec gives each an equal share"
            )  # fmt: skip
        return tuple(len(v) for v in inside.values()) if len(counts) > 1 else counts[0]
    if all(len(v) == 1 and cpus <= v[0] for (node, cpus), v in zip(cpu_nodes, inside.values())):
        spans = sorted({sum(1 for _, cpus in cpu_nodes if cpus <= g) for g in llcs})
        comments["llcs_per_node"] = (
            f"each of the machine's L3s spans {' or '.join(map(str, spans))} nodes (as on Intel SNC, where CPUID's "
            "L3 is the package's); the kernel splits it per node as on SNC, so one LLC a node"
        )
        return 1
    node = next((n for n, cpus in cpu_nodes if any(not g <= cpus for g in inside[n]) and len(inside[n]) > 1), None)
    comments["llcs_per_node"] = (
        f"llcs_per_node left out (1): node {node} holds parts of {len(inside[node])} L3s"
        if node is not None
        else "llcs_per_node left out (1): some L3s span nodes while other nodes hold several L3s"
    )
    return None


def _clusters(
    cpu_nodes: list[tuple[int, Group]],
    l2s: list[Group],
    loose: Group,
    cores: list[Group],
    llcs: list[Group],
    comments: dict[str, str],
) -> int | None:
    """Cores a shared L2 (None when each core has its own, or when the L2s are uneven: with a comment)."""
    if not l2s:
        comments["cores_per_cluster"] = "cores_per_cluster left out: the source has no L2 (each core its own)"
        return None
    if loose:
        comments["cores_per_cluster"] = f"cores_per_cluster left out: {_cpus(loose)} share no L2"
        return None
    if any(not (c <= g or not c & g) for g in l2s for c in cores):
        comments["cores_per_cluster"] = "cores_per_cluster left out: an L2 holds part of a core"
        return None
    sizes = sorted({sum(1 for c in cores if c <= g) for g in l2s})
    if len(sizes) > 1:
        comments["cores_per_cluster"] = (
            f"cores_per_cluster left out: L2s are shared by {' or '.join(map(str, sizes))} cores (not one count)"
        )
        return None
    if llcs and any(not any(g <= llc for llc in llcs) for g in l2s):
        comments["cores_per_cluster"] = "cores_per_cluster left out: an L2 spans two L3s"
        return None
    if any(not any(g <= cpus for _, cpus in cpu_nodes) for g in l2s):
        comments["cores_per_cluster"] = "cores_per_cluster left out: an L2 spans two nodes"
        return None
    return sizes[0] if sizes[0] > 1 else None


def derive_grid(gm: GridMachine) -> GridFields:
    """The grid fields ``gm``'s CPU groups fill evenly (see the module's docstring)."""
    m, g = gm.machine, gm.groups
    cpu_nodes = [(n.id, frozenset(n.cpus)) for n in m.nodes if n.cpus]
    if not cpu_nodes:
        raise LabError(f"{m.origin}: no node has CPUs")
    cpus = frozenset().union(*(c for _, c in cpu_nodes))
    comments: dict[str, str] = {}
    cores, alone = _partition(g.cores, cpus, "core", m.origin)
    cores += [frozenset({c}) for c in sorted(alone)]
    for core in cores:
        if sum(1 for _, node_cpus in cpu_nodes if core & node_cpus) > 1:
            raise LabError(f"{m.origin}: a core ({_cpus(core)}) is in two nodes")
    threads = _threads(cores, comments)
    packages, loose_p = _partition(g.packages, cpus, "package", m.origin)
    llcs, loose_l = _partition(g.llcs, cpus, "L3", m.origin)
    l2s, loose_2 = _partition(g.l2s, cpus, "L2", m.origin)
    per_node = _llcs(cpu_nodes, llcs, loose_l, cores, comments)
    node_llcs = per_node if isinstance(per_node, tuple) else ()
    n_packages = _packages(cpu_nodes, packages, loose_p, comments, node_llcs)
    if node_llcs and n_packages is None:
        comments["llcs_per_node"] = (
            f"llcs left out (1 a node): nodes have {' or '.join(map(str, sorted(set(node_llcs))))} L3s, and a node's "
            "own llcs: need the packages (see packages)"
        )
        node_llcs = ()
    clusters = _clusters(cpu_nodes, l2s, loose_2, cores, llcs, comments)
    vendor = VENDORS.get(g.vendor)
    if g.vendor and vendor is None:
        comments["cpu_vendor"] = f"cpu_vendor left out: the machine's CPU vendor {g.vendor!r} is not Intel's or AMD's"
    cpu_model = _cpu_model(g, vendor, comments)
    return GridFields(
        threads=threads,
        packages=n_packages,
        llcs_per_node=per_node if isinstance(per_node, int) else None,
        cores_per_cluster=clusters,
        cpu_vendor=vendor,
        comments=comments,
        node_llcs=node_llcs,
        cpu_model=cpu_model,
    )


def _cpu_model(g: CpuGroups, vendor: str | None, comments: dict[str, str]) -> tuple[int, int] | None:
    """The machine's one (family, model) for ``cpu_model``, or None with a comment when it has several, or no
    vendor to go with it (the numbers are a vendor's)."""
    if not g.cpu_models:
        return None
    if len(g.cpu_models) > 1:
        seen = ", ".join(f"{f}/{m}" for f, m in g.cpu_models)
        comments["cpu_model"] = f"cpu_model left out: the machine's packages give several families/models ({seen})"
        return None
    if vendor is None:
        comments["cpu_model"] = "cpu_model left out: no Intel or AMD vendor to go with it"
        return None
    return g.cpu_models[0]


# --- the spec ---------------------------------------------------------------------------------------------------


def pick_cpus_per_node(grid: GridFields, cpus_per_node: int | None) -> int:
    """``cpus_per_node`` if the grid divides it (else a one-line error saying what to pick), or by default the
    smallest multiple of the grid's unit that is at least 2 (:func:`grid_spec` goes on to the fewest the kernel
    reads as the machine); on an uneven machine, the CPUs of its nodes of the fewest L3s."""
    unit = grid.unit
    if cpus_per_node is None:
        return unit * -(-2 // unit)
    if cpus_per_node < 1:
        raise LabError(f"--cpus-per-node: must be >= 1, got {cpus_per_node}")
    if cpus_per_node % unit:
        parts = [f"{grid.fewest_llcs} LLC(s)"]
        if grid.cores_per_cluster:
            parts.append(f"clusters of {grid.cores_per_cluster} cores")
        parts.append(f"{grid.threads} thread(s) a core")
        which = "a node of the fewest L3s (the others in proportion)" if grid.node_llcs else "a node"
        raise LabError(
            f"--cpus-per-node {cpus_per_node}: {which} of this machine is {' x '.join(parts)}, so its CPUs come in "
            f"multiples of {unit}; pick {unit}, {2 * unit}, {3 * unit}, ..."
        )
    return cpus_per_node


def _mem_value(mib: int) -> int | str:
    if mib == 0:
        return 0
    return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"


def _description(gm: GridMachine, grid: GridFields, cpn: int, mem_mib: int, renumbered: bool) -> str:
    m, g = gm.machine, gm.groups
    per_node = "; ".join(f"node {n.id}: {_plural(len(n.cpus), 'CPU')}, {n.memory_mib} MiB" for n in m.nodes)
    cpu_nodes = [n for n in m.nodes if n.cpus]
    real_cpn = sorted({len(n.cpus) for n in cpu_nodes})
    shape = []
    if g.packages:
        shape.append(_plural(len(g.packages), "package"))
    if g.dies and len(g.dies) != len(g.packages):
        shape.append(_plural(len(g.dies), "die"))
    shape.append(_plural(len(m.nodes), "node"))
    shape.append(f"{m.total_cpus} CPUs")
    layout = f"a CPU node {grid.layout(real_cpn[0])}" if len(real_cpn) == 1 else "CPU nodes of different sizes"
    if grid.node_llcs:
        layout = f"CPU nodes of {' or '.join(map(str, sorted(set(grid.node_llcs))))} L3s"
    memoryless = [n.id for n in m.nodes if n.cpus and not n.memory_mib]
    text = (
        f"Imported from {m.origin}: {', '.join(shape)} ({layout}; {per_node})"
        + (f"; node ids {[n.id for n in m.nodes]} renumbered 0..{len(m.nodes) - 1}" if renumbered else "")
        + (f"; nodes {list(m.slow_nodes)} are in a lower memory tier" if m.slow_nodes else "")
        + (f"; memoryless nodes {memoryless}" if memoryless else "")
        + "".join(f"; {fact}" for fact in gm.facts)
        + f". Scaled to {_scaled(grid, cpn)} and {_mem_value(mem_mib)} a node"
        + (" with memory." if memoryless else ".")
    )
    return text


def _scaled(grid: GridFields, cpn: int) -> str:
    """``4 CPUs a CPU node (2 L3s x 2 cores x 1 thread)``, or an uneven machine's CPUs node by node."""
    if not grid.node_llcs:
        return f"{cpn} CPUs a CPU node ({grid.layout(cpn)})"
    per_llc = cpn // grid.fewest_llcs
    sizes = " and ".join(f"{c} ({_plural(n, 'L3')})" for c, n in sorted(set(zip(grid.node_cpus(cpn), grid.node_llcs))))
    return f"{per_llc} CPUs an L3 ({grid.layout(per_llc)}), CPU nodes of {sizes} CPUs"


def _check_topology(data: dict, nodes: list[Node], matrix: list[list[int]], mem_mib: int) -> Topology | None:
    """What numalab's loader checks of the spec. While the schema does not know the grid fields (issue #48's
    model change), the nodes, threads, SLIT and tiers are checked without them, a memoryless node given the
    others' memory (a memoryless node is the new model's to check)."""
    if "llcs_per_node" in schemas.load_schema("topology").get("properties", {}):
        return load_spec(data, "the imported spec")
    topo = Topology(
        name=data["name"],
        nodes=tuple(n if n.memory_mib else replace(n, memory_mib=mem_mib) for n in nodes),
        distances=tuple(tuple(r) for r in matrix),
        threads=data.get("threads", 1),
        tiers=parse_tiers(data, [n.cpus for n in nodes], matrix),
    )
    validate(topo, "the imported spec")
    return None


def grid_spec(
    gm: GridMachine,
    name: str,
    cpus_per_node: int | None,
    mem_per_node_mib: int,
    slow_cpuless: bool = False,
) -> ImportedSpec:
    """The spec for ``gm``: its nodes renumbered 0.. in order, every CPU node given ``cpus_per_node`` CPUs and every
    node with memory ``mem_per_node_mib``, the grid fields the machine fills evenly, its SLIT, and
    ``slow_cpuless``/the machine's own lower tiers as ``tiers:``. By default a CPU node gets the fewest CPUs the grid
    allows (at least 2) that the kernel reads as this machine (:func:`lab.topology.kernel_warnings.layout_warnings`
    says nothing of it), and a note says why when that is more than the grid's fewest; ``warnings`` are what
    remains (a ``cpus_per_node`` given, or no scale within QEMU's vCPUs)."""
    check_name(name, "--name")
    m = gm.machine
    grid = derive_grid(gm)
    least = pick_cpus_per_node(grid, cpus_per_node)
    for n in m.nodes:
        if not n.cpus and not n.memory_mib:
            raise LabError(f"{m.origin}: node {n.id} has neither CPUs nor memory")
    if not any(n.memory_mib for n in m.nodes):
        raise LabError(f"{m.origin}: no node has memory")
    cpuless = [i for i, n in enumerate(m.nodes) if not n.cpus]
    if slow_cpuless and not cpuless:
        raise LabError("--slow-cpuless: the machine has no CPU-less nodes")
    slow = cpuless if slow_cpuless else [i for i, n in enumerate(m.nodes) if n.id in m.slow_nodes]
    data, topo = _scaled_spec(gm, grid, name, least, mem_per_node_mib, slow)
    comments = dict(grid.comments)
    warned = layout_warnings(topo) if topo is not None else []
    if cpus_per_node is None and warned:
        readable = _readable_scale(gm, grid, name, least, mem_per_node_mib, slow)
        if readable is not None:
            cpn, data, topo = readable
            comments["cpus_per_node"] = (
                f"cpus_per_node {cpn} (the default): the fewest CPUs a node that the kernel reads as this machine; "
                f"{least}, the fewest the grid allows, would make topo check warn: {warned[0]}"
            )
    text = _yaml(data, comments, m.origin)
    loaded = parse_yaml(text, "the imported spec")
    assert loaded == data, "the spec's YAML does not load back as its data"
    warnings = tuple(layout_warnings(topo)) if topo is not None else ()
    return ImportedSpec(data=data, text=text, notes=tuple(comments.values()), topology=topo, warnings=warnings)


def _readable_scale(
    gm: GridMachine, grid: GridFields, name: str, least: int, mem_per_node_mib: int, slow: list[int]
) -> tuple[int, dict, Topology | None] | None:
    """The fewest CPUs a node above ``least``, in the grid's steps, whose spec the kernel reads as the machine
    (no layout warning), with that spec; None when none fits in QEMU's vCPUs."""
    cpn = least
    while True:
        cpn += grid.unit
        try:
            data, topo = _scaled_spec(gm, grid, name, cpn, mem_per_node_mib, slow)
        except LabError:  # (more vCPUs than QEMU takes: the fewest the grid allows stays, with its warning)
            return None
        if topo is None or not layout_warnings(topo):
            return cpn, data, topo


def _scaled_spec(
    gm: GridMachine, grid: GridFields, name: str, cpn: int, mem_per_node_mib: int, slow: list[int]
) -> tuple[dict, Topology | None]:
    """The spec's data with ``cpn`` CPUs a CPU node (of the fewest L3s), and the topology numalab loads from it."""
    m = gm.machine
    cpus = iter(grid.node_cpus(cpn))
    nodes = [
        Node(i, next(cpus, cpn) if n.cpus else 0, mem_per_node_mib if n.memory_mib else 0)
        for i, n in enumerate(m.nodes)
    ]
    total = sum(n.cpus for n in nodes)
    if total > MAX_VCPUS:
        raise LabError(
            f"--cpus-per-node {cpn}: {total} vCPUs in all, more than QEMU's {MAX_VCPUS}; pick fewer CPUs a node"
        )
    renumbered = [n.id for n in m.nodes] != list(range(len(m.nodes)))
    data: dict = {"name": name, "description": _description(gm, grid, cpn, mem_per_node_mib, renumbered)}
    if len({(n.cpus, n.memory_mib) for n in nodes}) == 1 and not grid.node_llcs:
        data |= {"nodes": len(nodes), "cpus_per_node": cpn, "memory_per_node": _mem_value(mem_per_node_mib)}
    else:
        llcs = iter(grid.node_llcs)
        data["nodes"] = [
            {"id": n.id, "cpus": n.cpus, "memory": _mem_value(n.memory_mib)}
            | ({"llcs": next(llcs)} if grid.node_llcs and n.cpus else {})
            for n in nodes
        ]
    if grid.threads != 1:
        data["threads"] = grid.threads
    for key, value in (
        ("packages", grid.packages),
        ("llcs_per_node", grid.llcs_per_node),
        ("cores_per_cluster", grid.cores_per_cluster),
        ("cpu_vendor", grid.cpu_vendor),
        ("cpu_model", {"family": grid.cpu_model[0], "model": grid.cpu_model[1]} if grid.cpu_model else None),
    ):
        if value is not None:
            data[key] = value
    if slow:
        data["tiers"] = {"slow_nodes": slow}
    matrix = [list(r) for r in m.distances]
    data["distances"] = matrix
    return data, _check_topology(data, nodes, matrix, mem_per_node_mib)


_FIELD_ORDER = ("threads", "packages", "llcs_per_node", "cores_per_cluster", "cpu_vendor", "cpu_model")


def _yaml(data: dict, comments: dict[str, str], origin: str) -> str:
    """``data`` as YAML in the order of a hand-written spec, each grid field (or the place of a left-out one)
    under its comment."""
    lines = [
        f"# numalab topo import: {' '.join(origin.split())}",
        f"name: {_yaml_name(data['name'])}",
        f"description: {json.dumps(data['description'])}",  # (JSON's string is a YAML double-quoted scalar)
    ]
    scale = [f"# {comments['cpus_per_node']}"] if "cpus_per_node" in comments else []  # (why this many CPUs a node)
    if isinstance(data["nodes"], int):
        lines += [f"nodes: {data['nodes']}", *scale, f"cpus_per_node: {data['cpus_per_node']}"]
        lines.append(f"memory_per_node: {data['memory_per_node']}")
    else:
        lines += [*scale, "nodes:"]
        lines += [
            f"  - {{id: {n['id']}, cpus: {n['cpus']}, memory: {n['memory']}"
            + (f", llcs: {n['llcs']}}}" if "llcs" in n else "}")
            for n in data["nodes"]
        ]
    for key in _FIELD_ORDER:
        if key in comments:
            lines.append(f"# {comments[key]}")
        if key == "cpu_model" and key in data:
            lines.append(f"cpu_model: {{family: {data[key]['family']}, model: {data[key]['model']}}}")
        elif key in data:
            lines.append(f"{key}: {data[key]}")
    if "tiers" in data:
        lines += ["tiers:", f"  slow_nodes: [{', '.join(map(str, data['tiers']['slow_nodes']))}]"]
    width = max(len(str(v)) for row in data["distances"] for v in row)
    lines.append("distances:")
    lines += ["  - [" + ", ".join(str(v).rjust(width) for v in row) + "]" for row in data["distances"]]
    return "\n".join(lines) + "\n"


_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def _yaml_name(name: str) -> str:
    """A spec name as a YAML string: quoted unless it starts with a letter and is no YAML 1.1 keyword."""
    plain = name[0].isalpha() and name.lower() not in _YAML_WORDS
    return name if plain else json.dumps(name)
