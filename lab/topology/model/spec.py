"""Topology spec files (YAML) -> :class:`Topology`.

A spec gives the nodes either as a count with per-node sizes, or as a list::

    nodes: 4                      # or a list of {id, cpus, memory}
    cpus_per_node: 2
    memory_per_node: 512M
    threads: 1                    # SMT threads per core
    total_cpus: 8                 # optional cross-check

and the SLIT either from a link graph and a distance rule::

    links: [[0, 1], [1, 2], [2, 3], [3, 0]]
    distance: {per_hop: 10}       # 10 + 10 * hops, or
    distance: {hops: {1: 20, 2: 30}}

or explicitly, as a full matrix or as QEMU-style entries (mirrored when only
one direction of a pair is given; an asymmetric SLIT must be given in full)::

    distances: [[10, 20], [20, 10]]
    distances: [{src: 0, dst: 1, value: 20}]

The fields' types, ranges and names are checked against ``lab/schemas/topology.schema.json`` first; what
spans fields (node ids 0..n-1, a matrix's size, links between existing nodes, the SLIT's rules) is checked here.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

from lab import datafile, schemas
from lab.errors import LabError
from lab.paths import cache_dir, read_text_file, write_text_atomic
from lab.topology.model.cpu_grid import build_grid
from lab.topology.model.numactl import looks_like_numactl
from lab.topology.model.tiers import parse_tiers
from lab.topology.model.topology import (
    LOCAL_DISTANCE,
    Node,
    Topology,
    check_name,
    hop_matrix,
    llc_costs_from_dict,
    validate,
)

REPO_ROOT = Path(__file__).resolve().parents[3]
PRESET_DIR = REPO_ROOT / "topologies"

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)


def parse_mib(value: object, field: str) -> int:
    """'512M', '1G', '2048' (MiB) or an int -> whole MiB; anything else is an error."""
    if isinstance(value, bool):
        raise LabError(f"{field}: expected a size such as 512M or 1G, got {value!r}")
    if isinstance(value, int):
        mib = value
    else:
        m = _SIZE_RE.match(str(value))
        if not m:
            raise LabError(f"{field}: expected a size such as 512M or 1G, got {value!r}")
        scale = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[m.group(2).upper()]
        mib = float(m.group(1)) * scale
        if not math.isfinite(mib):
            raise LabError(f"{field}: too large, got {value!r}")
    if mib <= 0:
        raise LabError(f"{field}: must be positive, got {value!r}")
    if mib != int(mib):
        raise LabError(f"{field}: must be a whole number of MiB, got {value!r}")
    return int(mib)


def node_mib(value: object, field: str) -> int:
    """A node's memory: a size as :func:`parse_mib` takes it, or 0 for a memoryless node."""
    if not isinstance(value, bool) and (value == 0 or (isinstance(value, str) and value.strip() in ("0", "0M", "0G"))):
        return 0
    return parse_mib(value, field)


GRID_FIELDS = ("packages", "llcs_per_node", "cores_per_cluster", "cpu_vendor", "cpu_model")


def _node_llcs(spec: dict) -> list[int | None] | None:
    """Each node's own ``llcs:`` in id order (None where it has none), or None when no node has one."""
    raw = spec["nodes"]
    if isinstance(raw, int) or not any("llcs" in item for item in raw):
        return None
    return [item.get("llcs") for item in sorted(raw, key=lambda item: item["id"])]


def _grid(spec: dict, nodes: list[Node], threads: int):
    """The CPU grid (lab.topology.model.cpu_grid) when the spec names any of its fields, else None."""
    node_llcs = _node_llcs(spec)
    if node_llcs is None and not any(f in spec for f in GRID_FIELDS):
        return None
    return build_grid(
        [n.cpus for n in nodes],
        threads,
        spec.get("packages"),
        spec.get("llcs_per_node"),
        spec.get("cores_per_cluster"),
        spec.get("cpu_vendor"),
        node_llcs,
        spec.get("cpu_model"),
    )


def _nodes(spec: dict) -> list[Node]:
    """The nodes (the schema has checked each field's type and range)."""
    raw = spec["nodes"]
    cpn = spec.get("cpus_per_node")
    mpn = spec.get("memory_per_node")
    if isinstance(raw, int):
        if cpn is None or mpn is None:
            raise LabError("nodes: a node count needs cpus_per_node and memory_per_node")
        mem = parse_mib(mpn, "memory_per_node")
        return [Node(i, cpn, mem) for i in range(raw)]
    nodes = []
    for idx, item in enumerate(raw):
        cpus = item.get("cpus", cpn)
        if cpus is None:
            raise LabError(f"nodes[{idx}].cpus: missing (and no cpus_per_node)")
        mem = item.get("memory", mpn)
        if mem is None:
            raise LabError(f"nodes[{idx}].memory: missing (and no memory_per_node)")
        nodes.append(Node(item["id"], cpus, node_mib(mem, f"nodes[{idx}].memory")))
    ids = sorted(n.id for n in nodes)
    for expect, got in enumerate(ids):
        if got != expect:
            what = "duplicated" if got < expect else "missing"
            raise LabError(f"nodes: node id {expect if got > expect else got} is {what}; ids must be 0..{len(ids) - 1}")
    return sorted(nodes, key=lambda n: n.id)


def _links(spec: dict, n: int) -> list[tuple[int, int]]:
    links: list[tuple[int, int]] = []
    for idx, (a, b) in enumerate(spec.get("links", [])):
        if a >= n or b >= n or a == b:
            raise LabError(f"links[{idx}]: [{a}, {b}] is not a link between two distinct nodes 0..{n - 1}")
        if (a, b) in links or (b, a) in links:  # (a second link would not shorten any path: a slip of the pen)
            first = next(i for i, lk in enumerate(links) if lk in ((a, b), (b, a)))
            raise LabError(f"links[{idx}]: [{a}, {b}] is links[{first}] again")
        links.append((a, b))
    return links


def _from_rule(spec: dict, n: int, links: list[tuple[int, int]]) -> list[list[int]]:
    rule = spec["distance"]  # (the schema: per_hop or hops, not both)
    local = rule.get("local", LOCAL_DISTANCE)
    if not links and n > 1:
        raise LabError("links: a distance rule needs a link graph")
    hops = hop_matrix(n, links)
    if "hops" in rule:  # (a hop count may be a quoted key: an editor's schema check sees every key as text)
        table = {int(k): v for k, v in rule["hops"].items()}
    else:
        table = {h: local + rule["per_hop"] * h for h in range(1, n)}
    out = []
    for i in range(n):
        row = []
        for j in range(n):
            h = hops[i][j]
            if h < 0:
                raise LabError(f"links: node {j} cannot be reached from node {i}")
            if h == 0:
                row.append(local)
            elif h not in table:
                raise LabError(f"distance.hops: no distance for {h} hops (nodes {i} and {j})")
            else:
                row.append(table[h])
        out.append(row)
    return out


def _explicit(raw: list, n: int) -> list[list[int]]:
    if isinstance(raw[0], list):  # (the schema: a matrix of integers, or {src, dst, value} entries)
        if len(raw) != n or any(len(r) != n for r in raw):
            raise LabError(f"distances: a matrix must be {n}x{n} for {n} nodes")
        return [list(r) for r in raw]
    given: dict[tuple[int, int], int] = {}
    for idx, e in enumerate(raw):
        s, d, value = e["src"], e["dst"], e["value"]
        if s >= n or d >= n:
            raise LabError(f"distances[{idx}]: node {max(s, d)} does not exist ({n} nodes)")
        if given.get((s, d), value) != value:
            raise LabError(f"distances[{idx}]: {s}->{d} is given twice, as {given[(s, d)]} and {value}")
        given[(s, d)] = value
    asym = any((d, s) in given and given[(d, s)] != v for (s, d), v in given.items())
    out = [[LOCAL_DISTANCE if i == j else 0 for j in range(n)] for i in range(n)]
    for i in range(n):
        for j in range(n):
            if (i, j) in given:
                out[i][j] = given[(i, j)]
            elif i != j and (j, i) in given and not asym:
                out[i][j] = given[(j, i)]
            elif i != j:
                why = "an asymmetric SLIT must be given in full" if asym else "every pair needs a distance"
                raise LabError(f"distances: no value for {i}->{j}; {why}")
    return out


def _latency_ratio(raw: list, n: int, field: str = "latency_ratio") -> tuple[tuple[float, ...], ...]:
    """``latency_ratio:`` (or ``bandwidth_ratio:``), an n x n matrix of remote/local latency (local/remote
    bandwidth) per (CPU node, memory node): 1 on the diagonal, a finite number from 1 to 20 elsewhere (the
    schema: numbers from 1 to 20)."""
    if len(raw) != n or not all(len(r) == n for r in raw):
        raise LabError(f"{field}: expected a {n}x{n} matrix (a list of {n} lists of {n} numbers)")
    out = []
    for i, row in enumerate(raw):
        vals = []
        for j, v in enumerate(row):
            where = f"{field}[{i}][{j}]"
            if not math.isfinite(v):
                raise LabError(f"{where}: expected a finite number, got {v!r:.40}")
            if i == j and v != 1:
                raise LabError(f"{where}: a node's own memory is the unit: must be 1, got {v:g}")
            vals.append(float(v))
        out.append(tuple(vals))
    return tuple(out)


def load_spec(data: object, where: str, name: str | None = None, schema_checked: bool = False) -> Topology:
    """Build and validate a Topology from parsed YAML. ``where`` prefixes errors. ``schema_checked``: ``data``
    has passed the schema already (numalab's parsed-spec cache holds only specs that have)."""
    try:
        if not schema_checked:
            data = schemas.check(data, "topology")
        assert isinstance(data, dict)  # (for the type checker: the schema's top level is a mapping)
        nodes = _nodes(data)
        n = len(nodes)
        links = _links(data, n)
        if ("distance" in data) == ("distances" in data):
            raise LabError("distances: give exactly one of 'distance' (a rule over links) or 'distances'")
        matrix = _from_rule(data, n, links) if "distance" in data else _explicit(data["distances"], n)
        threads = data.get("threads", 1)
        topo = Topology(
            # (checked here, where names come from, not in validate(): old run records keep theirs; a name given
            # empty is refused, not taken for the file's)
            name=check_name(data["name"] if "name" in data else name or "custom", "name"),
            nodes=tuple(nodes),
            distances=tuple(tuple(r) for r in matrix),
            threads=threads,
            links=tuple(links),
            description=" ".join(str(data.get("description", "")).split()),
            source=where,
            extra={"why": " ".join(str(data.get("why", "")).split())},
            tiers=parse_tiers(data, [node.cpus for node in nodes], matrix),
            latency_ratio=_latency_ratio(data["latency_ratio"], n) if "latency_ratio" in data else None,
            bandwidth_ratio=(
                _latency_ratio(data["bandwidth_ratio"], n, "bandwidth_ratio") if "bandwidth_ratio" in data else None
            ),
            cpu_grid=_grid(data, nodes, threads),
            llc=llc_costs_from_dict(data.get("llc")),
        )
        if "total_cpus" in data:
            total = data["total_cpus"]
            if total != topo.total_cpus:
                raise LabError(
                    f"total_cpus: {total} does not match the per-node CPUs, which add up to {topo.total_cpus}"
                )
        validate(topo)
        return topo
    except LabError as err:
        raise LabError(f"{where}: {err}") from None


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def spec_path(name_or_path: str) -> Path:
    """The file behind a preset name (``ring-4``) or a path to a YAML spec."""
    path = Path(name_or_path)
    # A bare name is a preset (a file of that name in the current directory
    # does not hide it); anything with a '/' or a .yaml suffix is a file.
    if not (path.suffix in (".yaml", ".yml") or "/" in name_or_path):
        path = PRESET_DIR / f"{name_or_path}.yaml"
        if not path.exists():
            raise LabError(f"topology {name_or_path!r}: no such preset (known: {', '.join(preset_names())}) or file")
    return path


def load_topology(name_or_path: str, cache: bool = True) -> Topology:
    """A preset name (``ring-4``) or a path to a YAML spec. ``cache``: use the parsed-spec cache (a
    check reads the file itself and writes nothing)."""
    path = spec_path(name_or_path)

    text = read_text_file(path)
    if looks_like_numactl(text):
        raise LabError(f"{path}: this is numactl -H output, not a spec; numalab topo import {path} makes one")
    return load_spec(_parse_yaml(text, path, cache), str(path), name=path.stem, schema_checked=True)


# The cache's entries are named with this: a spec an older reader accepted (a duplicate key, say) is read again,
# and an older reader never takes a newer one's entry (v4: a node's llcs:, which v3's schema refuses; v5: a blank
# name, which v4's schema took).
_CACHE_VERSION = "v5"


def _parse_yaml(text: str, path: Path, cache: bool = True):
    """YAML -> data (lab.datafile's bounded reader) checked against the topology schema, remembered by the
    text's hash as JSON in the cache directory: importing PyYAML (it compiles dozens of regular expressions)
    and jsonschema is most of a `numalab` start. Only a spec that passed the schema is remembered."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:24]
    cached = cache_dir("specs") / f"{digest}.{_CACHE_VERSION}.json" if cache else None
    if cached is not None:
        try:
            return json.loads(cached.read_text())
        except (OSError, ValueError, RecursionError):
            pass
    data = datafile.parse_yaml(text, str(path))  # (bounded: the dump below cannot expand an alias bomb)
    try:
        schemas.check(data, "topology")
    except LabError as err:
        raise LabError(f"{path}: {err}") from None
    try:
        as_json = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError):
        return data  # (dates and the like: not cached)
    if cached is not None and json.loads(as_json) == data:  # e.g. integer mapping keys would come back as strings
        try:
            write_text_atomic(cached, as_json)
        except OSError:
            pass  # a cache that cannot be written is no reason to fail
    return data
