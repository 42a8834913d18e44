"""A real machine with its CPU grid made a spec (issue #48): :func:`grid_spec` writes the spec of a
:class:`~lab.topology.model.machine.Machine` with its CPU groups and the grid fields
:func:`~lab.topology.importers.machine_grid.derive_grid` finds, scaled like every import (``--cpus-per-node``,
``--mem-per-node``; by default the fewest CPUs a node the kernel reads as this machine), as data and as YAML text
whose comments say what was decided (:class:`ImportedSpec`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from lab import schemas
from lab.datafile import parse_yaml
from lab.errors import LabError
from lab.topology.importers.machine_grid import GridFields, derive_grid, pick_cpus_per_node, plural
from lab.topology.model.machine import CpuGroups, Machine
from lab.topology.model.spec import load_spec
from lab.topology.model.tiers import parse_tiers
from lab.topology.model.topology import MAX_VCPUS, Node, Topology, check_name, validate
from lab.topology.predictions.kernel_warnings import layout_warnings


@dataclass(frozen=True)
class ImportedSpec:
    """A spec made from a real machine: its data (what ``text`` loads to), its YAML text with comments, and the
    comments on what was left out or decided."""

    data: dict
    text: str
    notes: tuple[str, ...]
    topology: Topology | None = None  # as numalab loads it (numactl -H and node-only imports; grid ones once the
    # schema knows the grid's fields)
    # what topo check will warn of the spec (lab.topology.predictions.kernel_warnings' layout ones)
    warnings: tuple[str, ...] = ()

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


def _mem_value(mib: int) -> int | str:
    if mib == 0:
        return 0
    return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"


def _description(m: Machine, grid: GridFields, cpn: int, mem_mib: int, renumbered: bool) -> str:
    g = m.groups or CpuGroups()
    per_node = "; ".join(f"node {n.id}: {plural(len(n.cpus), 'CPU')}, {n.memory_mib} MiB" for n in m.nodes)
    cpu_nodes = [n for n in m.nodes if n.cpus]
    real_cpn = sorted({len(n.cpus) for n in cpu_nodes})
    shape = []
    if g.packages:
        shape.append(plural(len(g.packages), "package"))
    if g.dies and len(g.dies) != len(g.packages):
        shape.append(plural(len(g.dies), "die"))
    shape.append(plural(len(m.nodes), "node"))
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
        + "".join(f"; {fact}" for fact in m.facts)
        + f". Scaled to {_scaled(grid, cpn)} and {_mem_value(mem_mib)} a node"
        + (" with memory." if memoryless else ".")
    )
    return text


def _scaled(grid: GridFields, cpn: int) -> str:
    """``4 CPUs a CPU node (2 L3s x 2 cores x 1 thread)``, or an uneven machine's CPUs node by node."""
    if not grid.node_llcs:
        return f"{cpn} CPUs a CPU node ({grid.layout(cpn)})"
    per_llc = cpn // grid.fewest_llcs
    sizes = " and ".join(f"{c} ({plural(n, 'L3')})" for c, n in sorted(set(zip(grid.node_cpus(cpn), grid.node_llcs))))
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
    m: Machine,
    name: str,
    cpus_per_node: int | None,
    mem_per_node_mib: int,
    slow_cpuless: bool = False,
) -> ImportedSpec:
    """The spec for ``m`` (a machine with its CPU groups): its nodes renumbered 0.. in order, every CPU node given
    ``cpus_per_node`` CPUs and every node with memory ``mem_per_node_mib``, the grid fields the machine fills evenly,
    its SLIT, and ``slow_cpuless``/the machine's own lower tiers as ``tiers:``. By default a CPU node gets the fewest
    CPUs the grid allows (at least 2) that the kernel reads as this machine
    (:func:`lab.topology.predictions.kernel_warnings.layout_warnings` says nothing of it), and a note says why when
    that is more than the grid's fewest; ``warnings`` are what remains (a ``cpus_per_node`` given, or no scale
    within QEMU's vCPUs)."""
    check_name(name, "--name")
    grid = derive_grid(m)
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
    data, topo = _scaled_spec(m, grid, name, least, mem_per_node_mib, slow)
    comments = dict(grid.comments)
    warned = layout_warnings(topo) if topo is not None else []
    if cpus_per_node is None and warned:
        readable = _readable_scale(m, grid, name, least, mem_per_node_mib, slow)
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
    m: Machine, grid: GridFields, name: str, least: int, mem_per_node_mib: int, slow: list[int]
) -> tuple[int, dict, Topology | None] | None:
    """The fewest CPUs a node above ``least``, in the grid's steps, whose spec the kernel reads as the machine
    (no layout warning), with that spec; None when none fits in QEMU's vCPUs."""
    cpn = least
    while True:
        cpn += grid.unit
        try:
            data, topo = _scaled_spec(m, grid, name, cpn, mem_per_node_mib, slow)
        except LabError:  # (more vCPUs than QEMU takes: the fewest the grid allows stays, with its warning)
            return None
        if topo is None or not layout_warnings(topo):
            return cpn, data, topo


def _scaled_spec(
    m: Machine, grid: GridFields, name: str, cpn: int, mem_per_node_mib: int, slow: list[int]
) -> tuple[dict, Topology | None]:
    """The spec's data with ``cpn`` CPUs a CPU node (of the fewest L3s), and the topology numalab loads from it."""
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
    data: dict = {"name": name, "description": _description(m, grid, cpn, mem_per_node_mib, renumbered)}
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
