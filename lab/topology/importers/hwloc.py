"""hwloc's view of a machine -> :class:`~lab.topology.model.machine.Machine` with its CPU groups: ``lstopo --of xml``
files and synthetic descriptions (``pack:2 numa:3 l3:1 core:2 pu:2``, what ``lstopo --input`` takes).

**XML** (hwloc 2.x: ``<topology version="2.0">``). The file is untrusted input: it is read up to
:data:`MAX_XML_BYTES`, parsed by expat as a stream (no tree, so no recursion), and a DTD with an internal subset,
an entity declaration or an external entity is refused; lstopo's own ``<!DOCTYPE topology SYSTEM "hwloc2.dtd">``
is accepted (expat never fetches it). Every problem is one :class:`LabError` line naming the file. What is read:
``PU``, ``Core``, ``Package``, ``Die``, ``L3Cache`` and ``L2Cache`` (unified or data) objects by their
``cpuset`` (the caches with their ``cache_size``), ``NUMANode`` objects by ``os_index``, ``cpuset`` and
``local_memory``, the packages' ``CPUVendor`` info, and the ``<distances2 type="NUMANode">`` matrix
(``NUMALatency``, else the first of latency kind).

**Synthetic descriptions**: levels ``pack``/``package``/``socket``, ``group``, ``numa``/``node``/``numanode``,
``die``, ``l3``/``l2``/``l1`` (``l3cache``, ``l3u``, ``l3d``, ...), ``core`` and ``pu``, each ``TYPE:N`` with
optional attributes in parentheses (``numa:2(memory=1GB)``, ``l3:2(size=32MB)``: the size is read and not
used), and NUMA nodes attached to a level's objects (``pack:2 [numa(memory=16GiB)] core:4 pu:2``) as hwloc
does. hwloc's sizes: ``kB``, ``MB``, ``GB``, ``TB`` are powers of 1000, ``KiB``... of 1024, a bare number bytes;
a NUMA node is 1 GiB unless given, an attached one (``[numa]``) has no memory, as in hwloc. Without a NUMA level
the machine is one node (as hwloc inserts one). Anything else is a one-line error naming the token.

In hwloc 2 a NUMA node's cpuset is its locality: the CPUs of the object it is attached to, which for a CPU-less
node (CXL memory, HBM) are another node's too. A CPU belongs to the node of smallest cpuset holding it (the
lowest ``os_index`` on a tie, which the description then names): how Linux's nodes come out in hwloc.

hwloc's synthetic descriptions have no distances, nor does lstopo's XML of one: without a ``distances2``
matrix, numalab's default is 10 local, 20 within a package and 30 across packages, and the spec's description
says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from xml.parsers import expat

from lab.datafile import read_bytes
from lab.errors import LabError
from lab.topology.model.machine import Cache, CpuGroups, Group, Machine, MachineNode, check_machine
from lab.topology.model.topology import LOCAL_DISTANCE, MAX_DISTANCE, MAX_NODES

MAX_XML_BYTES = 32 << 20  # lstopo's XML of a 2-socket, 384-thread machine with its PCI devices is ~2 MiB
MAX_DEPTH = 256  # nested elements (lstopo's deepest, under PCI bridges, are ~20)
MAX_PU = 8192  # CPU ids 0..8191 (Linux's NR_CPUS is at most 8192)
SYNTHETIC_NUMA_BYTES = 1 << 30  # hwloc's NUMA node in a synthetic description without memory=
DEFAULT_DISTANCES = "10 local, 20 within a package, 30 across packages"


class _Refused(Exception):
    """What is wrong with the XML (turned into a LabError naming the file and the line)."""


@dataclass
class _Numa:
    os_index: int
    locality: Group
    memory_bytes: int
    gp_index: int = -1


@dataclass
class _Found:
    """What the XML (or a synthetic description) gives, before it is made a machine."""

    pus: set[int] = field(default_factory=set)
    numa: list[_Numa] = field(default_factory=list)
    groups: dict[str, list[Group]] = field(default_factory=dict)  # package, core, l3, l2, die
    vendors: set[str] = field(default_factory=set)
    cpuid: dict[str, set[str]] = field(default_factory=dict)  # CPUFamilyNumber, CPUModelNumber -> values seen
    distances: list[dict] = field(default_factory=list)  # {name, kind, indexing, n, indexes, values}
    cache_kib: dict[tuple[str, Group], int | None] = field(default_factory=dict)  # (l3 or l2, CPUs) -> its size

    def add(self, kind: str, cpus: Group) -> None:
        self.groups.setdefault(kind, []).append(cpus)


# --- XML ----------------------------------------------------------------------------------------------------


def looks_like_xml(data: bytes) -> bool:
    """Whether a file's first bytes are XML's (``<?xml``, ``<!DOCTYPE``, ``<topology``): hwloc's, not numactl's."""
    head = data[:512].lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith((b"<?xml", b"<!DOCTYPE", b"<topology"))


def _cpuset(text: str | None, what: str) -> Group:
    """hwloc's bitmap text (``0x000000ff,0xffffffff``: 32-bit words, most significant first, an empty word 0)."""
    if text is None:
        raise _Refused(f"{what} has no cpuset")
    words = text.strip().split(",")
    if len(words) > MAX_PU // 32 or words[0].lower().startswith("0xf...f"):
        raise _Refused(f"{what}: cpuset {text[:40]!r} has CPUs beyond {MAX_PU - 1}")
    value = 0
    for w in words:
        if w and not re.fullmatch(r"0x[0-9a-fA-F]{1,8}", w):
            raise _Refused(f"{what}: cannot read the cpuset {text[:40]!r}")
        value = (value << 32) | (int(w, 16) if w else 0)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def _int_attr(attrs: dict[str, str], name: str, what: str, default: int | None = None) -> int:
    text = attrs.get(name)
    if text is None:
        if default is None:
            raise _Refused(f"{what} has no {name}")
        return default
    if not re.fullmatch(r"\d{1,20}", text.strip()):
        raise _Refused(f"{what}: {name}={text[:40]!r} is not a whole number")
    return int(text)


_CPUID_INFOS = ("CPUFamilyNumber", "CPUModelNumber")  # a Package's info, as the kernel reads them (decimal)
_CACHES = {"L3Cache": "l3", "L2Cache": "l2"}  # (hwloc 2's cache types; cache_type 2 is an instruction cache)
_GROUPED = {"Package": "package", "Core": "core", "Die": "die"}


class _XmlReader:
    """expat's callbacks: the objects and distances of an hwloc 2 XML file, read as a stream."""

    def __init__(self) -> None:
        self.found = _Found()
        self.stack: list[str] = []
        self.objects: list[str] = []  # the enclosing objects' types
        self.root_seen = False
        self.dist: dict | None = None
        self.text: list[str] = []

    def doctype(self, name: str, sysid: str | None, pubid: str | None, internal: int) -> None:
        if internal:
            raise _Refused("a DTD with an internal subset (<!DOCTYPE ... [ ... ]>) is refused")

    def entity(self, *_args) -> None:
        raise _Refused("an entity declaration is refused")

    def external(self, *_args) -> int:
        raise _Refused("an external entity is refused")

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        if len(self.stack) >= MAX_DEPTH:
            raise _Refused(f"elements nested more than {MAX_DEPTH} deep")
        if not self.stack:
            self._root(tag, attrs)
        self.stack.append(tag)
        if tag == "object":
            self._object(attrs)
            self.objects.append(attrs.get("type", ""))
        elif tag == "info" and self.objects and attrs.get("name") == "CPUVendor":
            self.found.vendors.add(attrs.get("value", ""))
        elif tag == "info" and self.objects and attrs.get("name") in _CPUID_INFOS:
            self.found.cpuid.setdefault(attrs["name"], set()).add(attrs.get("value", "")[:20])
        elif tag == "distances2" and len(self.stack) == 2:
            self._distances(attrs)
        elif tag in ("indexes", "u64values") and self.dist is not None:
            self.text = []

    def _root(self, tag: str, attrs: dict[str, str]) -> None:
        if tag != "topology":
            raise _Refused(f"not an hwloc topology (the root element is <{tag[:40]}>, not <topology>)")
        version = attrs.get("version", "")
        if not re.fullmatch(r"[2-9]\.\d+", version):
            raise _Refused(
                'an hwloc 1.x XML file (no version="2.0"); export it again with hwloc 2: '
                "lstopo --input OLD.xml --of xml NEW.xml"
                if not version
                else f"hwloc XML version {version[:20]!r}, expected 2.x"
            )
        self.root_seen = True

    def _object(self, attrs: dict[str, str]) -> None:
        kind = attrs.get("type", "")
        what = f"a {kind[:40]} object" if kind else "an object without a type"
        f = self.found
        if kind == "PU":
            index = _int_attr(attrs, "os_index", what)
            if index >= MAX_PU:
                raise _Refused(f"PU os_index {index}: CPU ids above {MAX_PU - 1} are not supported")
            f.pus |= _cpuset(attrs.get("cpuset"), what) or {index}
        elif kind == "NUMANode":
            index = _int_attr(attrs, "os_index", what)
            f.numa.append(
                _Numa(
                    index,
                    _cpuset(attrs.get("cpuset"), f"NUMANode {index}"),
                    _int_attr(attrs, "local_memory", f"NUMANode {index}", 0),
                    _int_attr(attrs, "gp_index", f"NUMANode {index}", -1),
                )
            )
            if len(f.numa) > MAX_NODES:
                raise _Refused(f"more than {MAX_NODES} NUMA nodes")
        elif kind in _GROUPED:
            f.add(_GROUPED[kind], _cpuset(attrs.get("cpuset"), what))
        elif kind in _CACHES and attrs.get("cache_type", "0") in ("0", "1"):
            cpus = _cpuset(attrs.get("cpuset"), what)
            f.add(_CACHES[kind], cpus)
            size = attrs.get("cache_size", "").strip()  # (bytes; a size it cannot read is left out, not refused)
            f.cache_kib.setdefault(
                (_CACHES[kind], cpus), int(size) // 1024 if size.isdigit() and len(size) <= 20 else None
            )

    def _distances(self, attrs: dict[str, str]) -> None:
        if attrs.get("type") != "NUMANode":
            return
        n = _int_attr(attrs, "nbobjs", "<distances2>")
        if not 1 <= n <= MAX_NODES:
            raise _Refused(f"<distances2> for {n} NUMA nodes")
        self.dist = {
            "name": attrs.get("name", ""),
            "kind": _int_attr(attrs, "kind", "<distances2>", 0),
            "indexing": attrs.get("indexing", "os"),
            "n": n,
            "indexes": [],
            "values": [],
        }

    def chars(self, data: str) -> None:
        if self.dist is not None and self.stack and self.stack[-1] in ("indexes", "u64values"):
            self.text.append(data)
            if sum(map(len, self.text)) > 64 * MAX_NODES * MAX_NODES:
                raise _Refused("a <distances2> list longer than its nodes need")

    def end(self, tag: str) -> None:
        self.stack.pop()
        if tag == "object":
            self.objects.pop()
        elif tag in ("indexes", "u64values") and self.dist is not None:
            key = "indexes" if tag == "indexes" else "values"
            words = "".join(self.text).split()
            if not all(w.isdigit() and len(w) <= 20 for w in words):
                raise _Refused(f"<distances2 name={self.dist['name']!r}>: <{tag}> holds more than whole numbers")
            self.dist[key] += [int(w) for w in words]
        elif tag == "distances2" and self.dist is not None:
            self.found.distances.append(self.dist)
            self.dist = None


def parse_hwloc_xml(data: bytes, origin: str) -> Machine:
    """hwloc 2 XML (``lstopo --of xml``) -> the machine, or a one-line LabError naming ``origin``."""
    reader = _XmlReader()
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = reader.doctype
    parser.EntityDeclHandler = reader.entity
    parser.UnparsedEntityDeclHandler = reader.entity
    parser.ExternalEntityRefHandler = reader.external
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.CharacterDataHandler = reader.chars
    try:
        parser.Parse(data, True)
    except _Refused as err:
        raise LabError(f"{origin}:{parser.CurrentLineNumber}: {err}") from None
    except expat.ExpatError as err:
        raise LabError(f"{origin}:{err.lineno}: not well-formed XML: {expat.ErrorString(err.code)}") from None
    except (ValueError, RecursionError, MemoryError) as err:
        raise LabError(f"{origin}: cannot read the XML: {str(err)[:80]}") from None
    if not reader.root_seen:
        raise LabError(f"{origin}: no <topology> element: not hwloc XML")
    found = reader.found
    return _machine(found, f"hwloc XML ({origin})", origin, _xml_distances(found, origin))


def read_hwloc_xml(path: Path) -> Machine:
    """:func:`parse_hwloc_xml` of a file (at most :data:`MAX_XML_BYTES`)."""
    return parse_hwloc_xml(read_bytes(path, limit=MAX_XML_BYTES), str(path))


def _xml_distances(found: _Found, origin: str) -> list[list[int]] | None:
    """The NUMA nodes' SLIT in ``os_index`` order from the XML's distances (None if it has none)."""
    numa = [d for d in found.distances if d["n"]]
    if not numa:
        return None
    latency = [d for d in numa if d["name"] == "NUMALatency"] or [d for d in numa if d["kind"] & 4]
    if not latency:
        return None
    d = latency[0]
    where = f"{origin}: <distances2 name={d['name']!r}>"
    n = d["n"]
    if len(d["indexes"]) != n or len(d["values"]) != n * n:
        raise LabError(f"{where}: {len(d['indexes'])} indexes and {len(d['values'])} values for {n} nodes")
    if d["indexing"] == "gp":
        by_gp = {x.gp_index: x.os_index for x in found.numa}
        missing = [i for i in d["indexes"] if i not in by_gp]
        if missing:
            raise LabError(f"{where}: gp_index {missing[0]} is no NUMANode's")
        indexes = [by_gp[i] for i in d["indexes"]]
    elif d["indexing"] == "os":
        indexes = list(d["indexes"])
    else:
        raise LabError(f"{where}: indexing={d['indexing'][:20]!r}, expected os or gp")
    nodes = sorted(x.os_index for x in found.numa)
    if sorted(indexes) != nodes:
        raise LabError(f"{where}: the matrix is of nodes {sorted(indexes)} but the machine's are {nodes}")
    at = {node: i for i, node in enumerate(indexes)}
    matrix = [[d["values"][at[a] * n + at[b]] for b in nodes] for a in nodes]
    for a, row in zip(nodes, matrix):
        for b, v in zip(nodes, row):
            ok = v == LOCAL_DISTANCE if a == b else LOCAL_DISTANCE < v <= MAX_DISTANCE
            if not ok:
                raise LabError(
                    f"{where}: distance {a}->{b} is {v}; a SLIT is {LOCAL_DISTANCE} local and "
                    f"{LOCAL_DISTANCE + 1}..{MAX_DISTANCE} remote"
                )
    return matrix


# --- both: the machine ------------------------------------------------------------------------------------


def _machine(found: _Found, origin: str, where: str, matrix: list[list[int]] | None) -> Machine:
    """``found`` -> the machine: each CPU to its node (see the module's docstring), the groups, the SLIT."""
    if not found.pus:
        raise LabError(f"{where}: no PU (CPU) objects")
    if not found.numa:
        raise LabError(f"{where}: no NUMANode objects")
    numa = sorted(found.numa, key=lambda x: x.os_index)
    if len({x.os_index for x in numa}) != len(numa):
        raise LabError(f"{where}: two NUMANode objects have one os_index")
    cpus: dict[int, list[int]] = {x.os_index: [] for x in numa}
    facts = []
    ties: set[tuple[int, int]] = set()
    for pu in sorted(found.pus):
        near = [x for x in numa if pu in x.locality]
        if not near:
            raise LabError(f"{where}: CPU {pu} is in no NUMA node's cpuset")
        best = min(near, key=lambda x: (len(x.locality), x.os_index))
        cpus[best.os_index].append(pu)
        ties |= {(best.os_index, x.os_index) for x in near if x is not best and x.locality == best.locality}
    if ties:
        owners = sorted({a for a, _ in ties})
        others = sorted({b for _, b in ties})
        facts.append(
            f"nodes {others} are local to the same CPUs as nodes {owners}, which are given them (the lower id)"
        )
    nodes = tuple(
        MachineNode(x.os_index, tuple(cpus[x.os_index]), -(-x.memory_bytes // (1 << 20))) for x in numa
    )  # (a size under 1 MiB rounds up: such a node has memory)
    packages = tuple(found.groups.get("package", ()))
    if matrix is None:
        matrix = _default_distances(numa, packages)
        facts.append(f"the source gives no distances: {DEFAULT_DISTANCES} (numalab's choice)")
    machine = Machine(nodes=nodes, distances=tuple(tuple(r) for r in matrix), origin=origin, facts=tuple(facts))
    check_machine(machine, lambda node, kind: where)
    vendors = sorted(v for v in found.vendors if v)
    if len(vendors) > 1:
        raise LabError(f"{where}: packages of two CPU vendors ({', '.join(vendors)})")
    groups = CpuGroups(
        packages=packages,
        cores=tuple(found.groups.get("core", ())),
        llcs=tuple(found.groups.get("l3", ())),
        l2s=tuple(found.groups.get("l2", ())),
        dies=tuple(found.groups.get("die", ())),
        vendor=vendors[0] if vendors else "",
        cpu_models=_cpu_models(found.cpuid, where),
        caches=tuple(
            Cache(int(kind[1]), cpus, kib)
            for (kind, cpus), kib in sorted(found.cache_kib.items(), key=lambda c: (c[0][0], min(c[0][1], default=0)))
        ),
    )
    return replace(machine, groups=groups)


def _cpu_models(cpuid: dict[str, set[str]], where: str) -> tuple[tuple[int, int], ...]:
    """The (family, model) pairs the packages' CPUFamilyNumber and CPUModelNumber give (() when they do not);
    several are the machine's to say, and the grid leaves the field out."""
    families, models = (sorted(cpuid.get(k, ())) for k in _CPUID_INFOS)
    if not families or not models:
        return ()
    for text in (*families, *models):
        if not re.fullmatch(r"\d{1,3}", text.strip()):
            raise LabError(f"{where}: CPU family or model {text!r} is not a number")
    return tuple((int(f), int(m)) for f in families for m in models)


def _default_distances(numa: list[_Numa], packages: tuple[Group, ...]) -> list[list[int]]:
    """:data:`DEFAULT_DISTANCES`; a node whose CPUs (locality) are in no one package is across from every other."""

    def package(x: _Numa) -> int | None:
        return next((i for i, p in enumerate(packages) if x.locality <= p), None)

    pkg = [package(x) for x in numa]
    many = len(packages) > 1
    return [
        [
            LOCAL_DISTANCE if i == j else 20 if not many or (pkg[i] is not None and pkg[i] == pkg[j]) else 30
            for j in range(len(numa))
        ]
        for i in range(len(numa))
    ]


# --- synthetic descriptions ---------------------------------------------------------------------------------

_LEVELS = {
    **dict.fromkeys(("pack", "package", "socket"), "package"),
    "group": "group",
    **dict.fromkeys(("numa", "node", "numanode"), "numa"),
    "die": "die",
    **{f"l{n}{s}": f"l{n}" for n in (1, 2, 3) for s in ("", "u", "d", "cache", "ucache", "dcache")},
    "core": "core",
    "pu": "pu",
}
_RANK = {"package": 1, "die": 2, "l3": 3, "l2": 4, "l1": 5, "core": 6, "pu": 7}  # group and numa: above core
_TOKEN = re.compile(r"\[[^\]\s]*(?:\([^)]*\))?\]|[^\s(]+(?:\([^)]*\))?")
_LEVEL = re.compile(r"([A-Za-z][A-Za-z0-9]*):(\d{1,6})(?:\(([^)]*)\))?")
_ATTACH = re.compile(r"\[([A-Za-z]+)(?:\(([^)]*)\))?\]")
_SIZE = re.compile(r"(\d{1,15})([kmgt]i?b)?", re.IGNORECASE)
_UNITS = {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
          "tib": 1 << 40}  # fmt: skip


def _attrs(text: str | None, allowed: tuple[str, ...], token: str) -> dict[str, int]:
    """``memory=1GB size=32MB`` -> bytes by name; only ``allowed`` names."""
    out: dict[str, int] = {}
    for part in (text or "").split():
        name, eq, value = part.partition("=")
        if name not in allowed or not eq:
            why = f"only {', '.join(allowed)}" if allowed else "no attributes"
            raise LabError(f"hwloc synthetic description: {token!r}: attribute {part!r} is not supported ({why})")
        m = _SIZE.fullmatch(value)
        if not m:
            raise LabError(
                f"hwloc synthetic description: {token!r}: {name}={value!r} is not a size (like 1GB, 16GiB, 4096)"
            )
        out[name] = int(m.group(1)) * _UNITS[m.group(2).lower()] if m.group(2) else int(m.group(1))
    return out


@dataclass
class _Level:
    kind: str  # package, group, numa, die, l1, l2, l3, core, pu
    arity: int
    token: str
    memory: int = 0  # numa: bytes a node (0: hwloc's 1 GiB)
    attached: list[int] = field(default_factory=list)  # [numa] nodes attached to each object: their memory


def _parse_levels(desc: str) -> tuple[list[_Level], list[int]]:
    """The levels of a description, top down, and the NUMA nodes attached to the machine itself (``[numa] ...``)."""
    text = desc.strip()
    if not text:
        raise LabError("hwloc synthetic description: empty (expected levels like 'pack:2 numa:2 core:4 pu:2')")
    levels: list[_Level] = []
    machine_attached: list[int] = []
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        m = _TOKEN.match(text, pos)
        token = m.group(0) if m else text[pos:].split()[0]
        pos = m.end() if m else len(text)
        if token.startswith("["):
            a = _ATTACH.fullmatch(token)
            if not a or _LEVELS.get(a.group(1).lower()) != "numa":
                raise LabError(f"hwloc synthetic description: {token!r}: only NUMA nodes ([numa]) can be attached")
            memory = _attrs(a.group(2), ("memory",), token).get("memory", 0)
            (levels[-1].attached if levels else machine_attached).append(memory)
            continue
        lv = _LEVEL.fullmatch(token)
        if not lv:
            raise LabError(f"hwloc synthetic description: cannot read {token!r} (expected TYPE:N, like core:4)")
        kind = _LEVELS.get(lv.group(1).lower())
        if kind is None:
            raise LabError(
                f"hwloc synthetic description: {token!r}: unknown or unsupported level {lv.group(1)!r} "
                "(known: pack, group, numa, die, l3, l2, l1, core, pu)"
            )
        if int(lv.group(2)) < 1:
            raise LabError(f"hwloc synthetic description: {token!r}: a level needs at least 1 object")
        allowed = ("memory",) if kind == "numa" else ("size",) if kind.startswith("l") else ()
        memory = _attrs(lv.group(3), allowed, token).get("memory", 0)
        levels.append(_Level(kind, int(lv.group(2)), token, memory))
    return levels, machine_attached


def _check_order(levels: list[_Level], machine_attached: list[int]) -> None:
    """hwloc's rules (one PU level, last; one level of each kind but group; no NUMA both as a level and
    attached) and numalab's: levels from the package down, NUMA nodes above the cores."""
    if levels[-1].kind != "pu":
        raise LabError(f"hwloc synthetic description: {levels[-1].token!r}: the last level must be pu (pu:N)")
    seen: dict[str, str] = {}
    rank = 0
    for lv in levels:
        if lv.kind != "group" and lv.kind in seen:
            raise LabError(f"hwloc synthetic description: {lv.token!r}: a second {lv.kind} level ({seen[lv.kind]!r})")
        seen[lv.kind] = lv.token
        if lv.kind in ("group", "numa"):
            if rank >= _RANK["core"]:
                raise LabError(f"hwloc synthetic description: {lv.token!r}: must come above the cores")
            continue
        if _RANK[lv.kind] < rank:
            raise LabError(f"hwloc synthetic description: {lv.token!r} cannot come below a smaller level")
        rank = _RANK[lv.kind]
    places = [lv.token for lv in levels if lv.attached] + (["the machine"] if machine_attached else [])
    if len(places) > 1:
        raise LabError(f"hwloc synthetic description: [numa] attached at {places[0]!r} and {places[1]!r}: pick one")
    if places and "numa" in seen:
        raise LabError(f"hwloc synthetic description: {seen['numa']!r}: NUMA nodes both as a level and attached")


def parse_synthetic(desc: str) -> Machine:
    """An hwloc synthetic description -> the machine lstopo would show for it (see the module's docstring)."""
    levels, machine_attached = _parse_levels(desc)
    _check_order(levels, machine_attached)
    total = 1
    for lv in levels:
        total *= lv.arity
        if total > MAX_PU:
            raise LabError(f"hwloc synthetic description: {lv.token!r}: more than {MAX_PU} PUs")
    found = _Found(pus=set(range(total)))
    span = total
    for lv in levels:
        count = total // span * lv.arity  # objects at this level
        span //= lv.arity  # PUs an object
        objects = [frozenset(range(k * span, (k + 1) * span)) for k in range(count)]
        if lv.kind == "numa":
            memory = lv.memory or SYNTHETIC_NUMA_BYTES
            found.numa += [_Numa(k, cpus, memory) for k, cpus in enumerate(objects)]
        elif lv.kind in ("package", "core", "die", "l3", "l2"):
            found.groups[lv.kind] = objects
        for cpus in objects if lv.attached else ():
            for memory in lv.attached:
                found.numa.append(_Numa(len(found.numa), cpus, memory))
    for memory in machine_attached:
        found.numa.append(_Numa(len(found.numa), frozenset(found.pus), memory))
    if not found.numa:  # (hwloc: "Inserting a NUMA level with a single object")
        found.numa.append(_Numa(0, frozenset(found.pus), SYNTHETIC_NUMA_BYTES))
    if len(found.numa) > MAX_NODES:
        raise LabError(f"hwloc synthetic description: {len(found.numa)} NUMA nodes, at most {MAX_NODES}")
    origin = f"hwloc synthetic description ({' '.join(desc.split())})"
    return _machine(found, origin, "hwloc synthetic description", None)
