"""``numactl -H`` output -> :class:`Machine`: a real machine's nodes, CPUs, memory and SLIT, before scaling.

Used by ``numalab topo import`` (lab.topology.importer) and by the spec loader, which points a
user who gives numactl output to ``topo check`` at ``topo import``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from lab.cpulist import parse_cpulist
from lab.errors import LabError
from lab.topology.model import LOCAL_DISTANCE, MAX_DISTANCE, MAX_NODES

_AVAILABLE_RE = re.compile(r"^available:\s+(\d+)\s+nodes?\s*\(([^)]*)\)\s*$")
_CPUS_RE = re.compile(r"^node\s+(\d+)\s+cpus:\s*(.*)$")
_SIZE_RE = re.compile(r"^node\s+(\d+)\s+size:\s*(\d+)\s*(KB|MB|GB|kB)\s*$", re.IGNORECASE)
_FREE_RE = re.compile(r"^node\s+(\d+)\s+free:\s*(\d+)\s*(KB|MB|GB|kB)\s*$", re.IGNORECASE)
_DIST_HEAD_RE = re.compile(r"^node\s+distances:\s*$")
_DIST_COLS_RE = re.compile(r"^node((?:\s+\d+)+)\s*$")
_DIST_ROW_RE = re.compile(r"^(\d+):((?:\s+\d+)*)\s*$")
_QUOTE_RE = re.compile(r"^(?:\s*>)+ ?")  # e-mail quoting ("> ", "> > ")
_UNIT_MIB = {"kb": 1 / 1024, "mb": 1, "gb": 1024}


@dataclass(frozen=True)
class MachineNode:
    """A node as the machine reported it (its own id, its CPU ids, its memory in MiB)."""

    id: int
    cpus: tuple[int, ...]
    memory_mib: int


@dataclass(frozen=True)
class Machine:
    """A real machine's NUMA layout, before any scaling."""

    nodes: tuple[MachineNode, ...]
    distances: tuple[tuple[int, ...], ...]
    origin: str  # "numactl -H output (FILE)" or "sysfs (ROOT)"
    slow_nodes: tuple[int, ...] = ()  # CPU-less nodes below the top memory tier (sysfs memory_tiering), own ids

    @property
    def total_cpus(self) -> int:
        return sum(len(n.cpus) for n in self.nodes)


def looks_like_numactl(text: str) -> bool:
    """Whether ``text`` has numactl -H's ``available: N nodes (...)`` line (a spec never does)."""
    return any(_AVAILABLE_RE.match(_QUOTE_RE.sub("", line).strip()) for line in text.splitlines())


def _expand_nodes(text: str, where: str) -> list[int]:
    """numactl's node list in ``available: 4 nodes (0-3)``: ranges and commas."""
    try:
        return parse_cpulist(text.strip())
    except (LabError, ValueError):
        raise LabError(f"{where}: cannot read the node list {text.strip()!r}") from None


def parse_numactl(text: str, origin: str = "-") -> Machine:  # noqa: C901
    """``numactl -H`` (``--hardware``) output -> :class:`Machine`.

    Text before the ``available:`` line and after the distance table is ignored, so a pasted
    mail or log works; e-mail quoting (``> ``) is stripped. Every node named by ``available:``
    needs its ``cpus:`` and ``size:`` lines and its row of the distance table."""
    lines = [_QUOTE_RE.sub("", raw).strip() for raw in text.splitlines()]
    start = next((i for i, line in enumerate(lines) if _AVAILABLE_RE.match(line)), None)
    if start is None:
        avail = next((i for i, line in enumerate(lines) if line.startswith("available:")), None)
        if avail is not None:
            raise LabError(f"{origin}:{avail + 1}: expected 'available: N nodes (LIST)', got {lines[avail]!r}")
        raise LabError(f"{origin}: no 'available: N nodes (...)' line: not numactl -H output")

    def at(i: int) -> str:
        return f"{origin}:{i + 1}"

    m = _AVAILABLE_RE.match(lines[start])
    assert m
    count = int(m.group(1))
    ids = _expand_nodes(m.group(2), at(start))
    if count != len(ids):
        raise LabError(f"{at(start)}: says {count} nodes but lists {len(ids)} ({m.group(2)})")
    if count > MAX_NODES:
        raise LabError(f"{at(start)}: {count} nodes, at most {MAX_NODES} are supported")
    cpus: dict[int, tuple[int, ...]] = {}
    sizes: dict[int, int] = {}
    header: list[int] | None = None
    rows: dict[int, tuple[int, ...]] = {}
    in_table = False
    last = start
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if not line:
            if in_table and rows:
                break  # a blank line after the rows ends the table
            continue
        if in_table:
            if header is None:
                cols = _DIST_COLS_RE.match(line)
                if not cols:
                    raise LabError(f"{at(i)}: expected the distance table's header 'node 0 1 ...', got {line!r}")
                header = [int(x) for x in cols.group(1).split()]
                if header != ids:
                    raise LabError(f"{at(i)}: the distance table's columns {header} are not the nodes {ids}")
                last = i
                continue
            row = _DIST_ROW_RE.match(line)
            if not row:
                if rows:
                    break  # the table ended (the next paragraph of a mail)
                raise LabError(f"{at(i)}: expected a distance row 'N: D D ...', got {line!r}")
            node = int(row.group(1))
            values = tuple(int(x) for x in row.group(2).split())
            if node not in ids:
                raise LabError(f"{at(i)}: distance row for node {node}, which 'available:' does not list")
            if node in rows:
                raise LabError(f"{at(i)}: a second distance row for node {node}")
            if len(values) != len(ids):
                raise LabError(f"{at(i)}: distance row for node {node} has {len(values)} values, expected {len(ids)}")
            for col, v in zip(ids, values):
                if col == node and v != LOCAL_DISTANCE:
                    raise LabError(f"{at(i)}: node {node}'s distance to itself is {v}, expected {LOCAL_DISTANCE}")
                if col != node and not LOCAL_DISTANCE < v <= MAX_DISTANCE:
                    raise LabError(
                        f"{at(i)}: distance {node}->{col} is {v}, expected {LOCAL_DISTANCE + 1}..{MAX_DISTANCE}"
                    )
            rows[node] = values
            last = i
            if len(rows) == len(ids):
                break
            continue
        if _DIST_HEAD_RE.match(line):
            in_table = True
            last = i
            continue
        kind, mm = next(
            (
                (k, hit)
                for k, rx in (("cpus", _CPUS_RE), ("size", _SIZE_RE), ("free", _FREE_RE))
                if (hit := rx.match(line))
            ),
            ("", None),
        )
        if mm is None:
            if line.startswith("node ") or line.startswith("node\t"):
                raise LabError(f"{at(i)}: cannot read {line!r}")
            continue  # other lines (a shell prompt, a mail's text) are not numactl's
        node = int(mm.group(1))
        if node not in ids:
            raise LabError(f"{at(i)}: node {node} is not in 'available:' ({m.group(2)})")
        if kind == "cpus":
            if node in cpus:
                raise LabError(f"{at(i)}: a second 'cpus:' line for node {node}")
            try:
                cpus[node] = tuple(int(x) for x in mm.group(2).split())
            except ValueError:
                raise LabError(f"{at(i)}: node {node}'s CPUs are not numbers: {mm.group(2)!r}") from None
        elif kind == "size":
            if node in sizes:
                raise LabError(f"{at(i)}: a second 'size:' line for node {node}")
            sizes[node] = int(int(mm.group(2)) * _UNIT_MIB[mm.group(3).lower()])
            if sizes[node] <= 0:
                raise LabError(
                    f"{at(i)}: node {node} has no memory; memoryless nodes cannot be emulated (QEMU needs memory "
                    "on every node numalab boots)"
                )
        last = i
    for node in ids:
        if node not in cpus:
            raise LabError(f"{origin}: node {node} has no 'node {node} cpus:' line (after line {start + 1})")
        if node not in sizes:
            raise LabError(f"{origin}: node {node} has no 'node {node} size:' line (after line {start + 1})")
    if not in_table:
        raise LabError(f"{origin}: no 'node distances:' table after line {last + 1}")
    if header is None:
        raise LabError(f"{at(last)}: the distance table has no header line 'node 0 1 ...'")
    missing = [node for node in ids if node not in rows]
    if missing:
        raise LabError(f"{at(last)}: the distance table ends without a row for node {missing[0]}")
    machine = Machine(
        nodes=tuple(MachineNode(node, cpus[node], sizes[node]) for node in ids),
        distances=tuple(rows[node] for node in ids),
        origin=f"numactl -H output ({origin})",
    )
    check_machine(machine, lambda node, kind: origin)
    return machine


def check_machine(machine: Machine, where: Callable[[int, str], str]) -> None:
    """What every reader of a real machine (numactl -H output, a sysfs node directory) refuses: a CPU
    listed for two nodes, and an asymmetric SLIT (the kernel itself complains of one; a spec can still
    give one in full, by hand). ``where(node, "cpus" | "distance")`` names the file (and line) it came from."""
    seen: dict[int, int] = {}
    for n in machine.nodes:
        for c in n.cpus:
            if c in seen:
                raise LabError(f"{where(n.id, 'cpus')}: CPU {c} is listed for node {seen[c]} and node {n.id}")
            seen[c] = n.id
    ids = [n.id for n in machine.nodes]
    for i, a in enumerate(ids):
        for j in range(i):
            b = ids[j]
            if machine.distances[i][j] != machine.distances[j][i]:
                raise LabError(
                    f"{where(a, 'distance')}: distance {a}->{b} is {machine.distances[i][j]} but {b}->{a} is "
                    f"{machine.distances[j][i]}; an imported SLIT must be symmetric (give an asymmetric one in a "
                    "spec, as a full distances matrix)"
                )
