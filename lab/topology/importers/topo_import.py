"""Real machines' topologies -> spec files: ``numactl -H`` output, a host's ``/sys/devices/system/{node,cpu}``,
and (lab.topology.importers.hwloc) ``lstopo --of xml`` files and hwloc synthetic descriptions.

Bug reports paste ``numactl -H``; a host can be read directly from sysfs. Both
give nodes (CPUs, memory) and the SLIT. :func:`to_spec_yaml` writes a spec the
rest of numalab loads (``lab.topology.model.spec``), scaled to sizes a laptop can boot
(``cpus_per_node``/``mem_per_node``) with the machine's own sizes kept in its
``description``. CPU-less nodes stay CPU-less; node ids that are not contiguous
(``available: 2 nodes (0,2)``) are renumbered 0.. in order, and the description
says so.

With ``cpu/`` beside ``node/``, sysfs also tells each CPU's package, die, core and
caches (lab.topology.model.sysfs_machine reads both), as hwloc does: those
imports go through lab.topology.importers.machine_grid, which adds the CPU grid's fields
(packages, llcs_per_node, cores_per_cluster, threads, cpu_vendor, cpu_model) and keeps
memoryless nodes (``memory: 0``).

Bad or partial input is a one-line :class:`LabError` naming the line (numactl)
or the file (sysfs, read by lab.topology.model.sysfs_machine under the STRICT trust; hwloc XML).
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
from lab.topology.model.machine import Machine
from lab.topology.model.numactl import parse_numactl
from lab.topology.model.spec import load_spec, parse_mib
from lab.topology.model.sysfs import Trust
from lab.topology.model.sysfs_machine import read_machine
from lab.topology.model.tiers import parse_tiers
from lab.topology.model.topology import Node, Topology, check_name, validate
from lab.topology.predictions.kernel_warnings import layout_warnings


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
    by content), a sysfs directory (lab.topology.model.sysfs_machine.sysfs_dirs) or an hwloc synthetic description
    -> the scaled spec.

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
        source, default_name = read_machine(Path(from_sysfs), Trust.STRICT), "host"
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
