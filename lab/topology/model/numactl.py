"""``numactl -H`` output -> :class:`~lab.topology.model.machine.Machine`: a real machine's nodes, CPUs, memory and
SLIT, before scaling.

Used by ``numalab topo import`` (lab.topology.importers.topo_import) and by the spec loader, which points a
user who gives numactl output to ``topo check`` at ``topo import``.
"""

from __future__ import annotations

import re

from lab.cpulist import parse_cpulist
from lab.errors import LabError
from lab.topology.model.machine import Machine, MachineNode, check_machine
from lab.topology.model.topology import LOCAL_DISTANCE, MAX_DISTANCE, MAX_NODES

_AVAILABLE_RE = re.compile(r"^available:\s+(\d+)\s+nodes?\s*\(([^)]*)\)\s*$")
_CPUS_RE = re.compile(r"^node\s+(\d+)\s+cpus:\s*(.*)$")
_SIZE_RE = re.compile(r"^node\s+(\d+)\s+size:\s*(\d+)\s*(KB|MB|GB|kB)\s*$", re.IGNORECASE)
_FREE_RE = re.compile(r"^node\s+(\d+)\s+free:\s*(\d+)\s*(KB|MB|GB|kB)\s*$", re.IGNORECASE)
_DIST_HEAD_RE = re.compile(r"^node\s+distances:\s*$")
_DIST_COLS_RE = re.compile(r"^node((?:\s+\d+)+)\s*$")
_DIST_ROW_RE = re.compile(r"^(\d+):((?:\s+\d+)*)\s*$")
_QUOTE_RE = re.compile(r"^(?:\s*>)+ ?")  # e-mail quoting ("> ", "> > ")
_UNIT_MIB = {"kb": 1 / 1024, "mb": 1, "gb": 1024}


def looks_like_numactl(text: str) -> bool:
    """Whether ``text`` has numactl -H's ``available: N nodes (...)`` line (a spec never does)."""
    return any(_AVAILABLE_RE.match(_QUOTE_RE.sub("", line).strip()) for line in text.splitlines())


def _expand_nodes(text: str, where: str) -> list[int]:
    """numactl's node list in ``available: 4 nodes (0-3)``: ranges and commas."""
    try:
        return parse_cpulist(text.strip())
    except (LabError, ValueError):
        raise LabError(f"{where}: cannot read the node list {text.strip()!r}") from None


def _available_line(lines: list[str], origin: str) -> int:
    """The index of the ``available: N nodes (LIST)`` line (an error if there is none or it is malformed)."""
    start = next((i for i, line in enumerate(lines) if _AVAILABLE_RE.match(line)), None)
    if start is None:
        avail = next((i for i, line in enumerate(lines) if line.startswith("available:")), None)
        if avail is not None:
            raise LabError(f"{origin}:{avail + 1}: expected 'available: N nodes (LIST)', got {lines[avail]!r}")
        raise LabError(f"{origin}: no 'available: N nodes (...)' line: not numactl -H output")
    return start


def _available_nodes(line: str, where: str) -> tuple[list[int], str]:
    """The node ids an ``available: N nodes (LIST)`` line lists (as many as N, at most MAX_NODES), and LIST."""
    m = _AVAILABLE_RE.match(line)
    assert m
    count = int(m.group(1))
    ids = _expand_nodes(m.group(2), where)
    if count != len(ids):
        raise LabError(f"{where}: says {count} nodes but lists {len(ids)} ({m.group(2)})")
    if count > MAX_NODES:
        raise LabError(f"{where}: {count} nodes, at most {MAX_NODES} are supported")
    return ids, m.group(2)


def _node_fact(line: str, where: str, ids: list[int], listed: str) -> tuple[str, int, re.Match[str]] | None:
    """A ``node N cpus:``, ``size:`` or ``free:`` line as (kind, N, match); None for a line that is not numactl's
    (an error for an unreadable ``node`` line or a node that ``available:`` does not list)."""
    kind, mm = next(
        ((k, hit) for k, rx in (("cpus", _CPUS_RE), ("size", _SIZE_RE), ("free", _FREE_RE)) if (hit := rx.match(line))),
        ("", None),
    )
    if mm is None:
        if line.startswith("node ") or line.startswith("node\t"):
            raise LabError(f"{where}: cannot read {line!r}")
        return None  # other lines (a shell prompt, a mail's text) are not numactl's
    node = int(mm.group(1))
    if node not in ids:
        raise LabError(f"{where}: node {node} is not in 'available:' ({listed})")
    return kind, node, mm


def _node_cpus(text: str, node: int, where: str) -> tuple[int, ...]:
    """The CPU ids of a ``node N cpus:`` line."""
    try:
        return tuple(int(x) for x in text.split())
    except ValueError:
        raise LabError(f"{where}: node {node}'s CPUs are not numbers: {text!r}") from None


def _node_size_mib(amount: str, unit: str, node: int, where: str) -> int:
    """The memory of a ``node N size:`` line in MiB (0: a memoryless node, if it has CPUs; the spec's check
    refuses a node with neither)."""
    return int(int(amount) * _UNIT_MIB[unit.lower()])


def _read_nodes(
    lines: list[str], start: int, ids: list[int], listed: str, origin: str
) -> tuple[dict[int, tuple[int, ...]], dict[int, int], int | None, int]:
    """The CPUs and memory (MiB) of the nodes from the lines after ``available:`` (at ``start``) up to
    ``node distances:``, the index of that line (None without one), and the index of the last numactl line read."""
    cpus: dict[int, tuple[int, ...]] = {}
    sizes: dict[int, int] = {}
    last = start
    for i in range(start + 1, len(lines)):
        line, where = lines[i], f"{origin}:{i + 1}"
        if not line:
            continue
        if _DIST_HEAD_RE.match(line):
            return cpus, sizes, i, i
        fact = _node_fact(line, where, ids, listed)
        if fact is None:
            continue
        kind, node, mm = fact
        if kind == "cpus":
            if node in cpus:
                raise LabError(f"{where}: a second 'cpus:' line for node {node}")
            cpus[node] = _node_cpus(mm.group(2), node, where)
        elif kind == "size":
            if node in sizes:
                raise LabError(f"{where}: a second 'size:' line for node {node}")
            sizes[node] = _node_size_mib(mm.group(2), mm.group(3), node, where)
        last = i
    return cpus, sizes, None, last


def _distance_header(line: str, where: str, ids: list[int]) -> list[int]:
    """The node ids of the distance table's header ``node 0 1 ...``, which must be those of ``available:``."""
    cols = _DIST_COLS_RE.match(line)
    if not cols:
        raise LabError(f"{where}: expected the distance table's header 'node 0 1 ...', got {line!r}")
    header = [int(x) for x in cols.group(1).split()]
    if header != ids:
        raise LabError(f"{where}: the distance table's columns {header} are not the nodes {ids}")
    return header


def _distance_row(
    row: re.Match[str], where: str, ids: list[int], rows: dict[int, tuple[int, ...]]
) -> tuple[int, tuple[int, ...]]:
    """A distance row ``N: D D ...`` as (N, distances): a listed node's first row, a distance per node, local
    distance to itself and a remote one (up to MAX_DISTANCE) to every other node."""
    node = int(row.group(1))
    values = tuple(int(x) for x in row.group(2).split())
    if node not in ids:
        raise LabError(f"{where}: distance row for node {node}, which 'available:' does not list")
    if node in rows:
        raise LabError(f"{where}: a second distance row for node {node}")
    if len(values) != len(ids):
        raise LabError(f"{where}: distance row for node {node} has {len(values)} values, expected {len(ids)}")
    for col, v in zip(ids, values):
        if col == node and v != LOCAL_DISTANCE:
            raise LabError(f"{where}: node {node}'s distance to itself is {v}, expected {LOCAL_DISTANCE}")
        if col != node and not LOCAL_DISTANCE < v <= MAX_DISTANCE:
            raise LabError(f"{where}: distance {node}->{col} is {v}, expected {LOCAL_DISTANCE + 1}..{MAX_DISTANCE}")
    return node, values


def _read_distances(
    lines: list[str], head: int, ids: list[int], origin: str
) -> tuple[list[int] | None, dict[int, tuple[int, ...]], int]:
    """The distance table after its ``node distances:`` line (at ``head``): its header's node ids (None without
    one), its rows by node, and the index of its last line read. It ends after the last node's row, or at a
    blank line or another paragraph after at least one row."""
    header: list[int] | None = None
    rows: dict[int, tuple[int, ...]] = {}
    last = head
    for i in range(head + 1, len(lines)):
        line, where = lines[i], f"{origin}:{i + 1}"
        if not line:
            if rows:
                break  # a blank line after the rows ends the table
            continue
        if header is None:
            header = _distance_header(line, where, ids)
            last = i
            continue
        row = _DIST_ROW_RE.match(line)
        if not row:
            if rows:
                break  # the table ended (the next paragraph of a mail)
            raise LabError(f"{where}: expected a distance row 'N: D D ...', got {line!r}")
        node, values = _distance_row(row, where, ids, rows)
        rows[node] = values
        last = i
        if len(rows) == len(ids):
            break
    return header, rows, last


def parse_numactl(text: str, origin: str = "-") -> Machine:
    """``numactl -H`` (``--hardware``) output -> :class:`Machine`.

    Text before the ``available:`` line and after the distance table is ignored, so a pasted
    mail or log works; e-mail quoting (``> ``) is stripped. Every node named by ``available:``
    needs its ``cpus:`` and ``size:`` lines and its row of the distance table."""
    lines = [_QUOTE_RE.sub("", raw).strip() for raw in text.splitlines()]
    start = _available_line(lines, origin)
    ids, listed = _available_nodes(lines[start], f"{origin}:{start + 1}")
    cpus, sizes, head, last = _read_nodes(lines, start, ids, listed, origin)
    header, rows = None, {}
    if head is not None:
        header, rows, last = _read_distances(lines, head, ids, origin)
    for node in ids:
        if node not in cpus:
            raise LabError(f"{origin}: node {node} has no 'node {node} cpus:' line (after line {start + 1})")
        if node not in sizes:
            raise LabError(f"{origin}: node {node} has no 'node {node} size:' line (after line {start + 1})")
    if head is None:
        raise LabError(f"{origin}: no 'node distances:' table after line {last + 1}")
    if header is None:
        raise LabError(f"{origin}:{last + 1}: the distance table has no header line 'node 0 1 ...'")
    missing = [node for node in ids if node not in rows]
    if missing:
        raise LabError(f"{origin}:{last + 1}: the distance table ends without a row for node {missing[0]}")
    machine = Machine(
        nodes=tuple(MachineNode(node, cpus[node], sizes[node]) for node in ids),
        distances=tuple(rows[node] for node in ids),
        origin=f"numactl -H output ({origin})",
    )
    check_machine(machine, lambda node, kind: origin)
    return machine
