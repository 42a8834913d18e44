"""``numalab topo import`` with caches and packages (issue #48): hwloc XML, hwloc synthetic descriptions and a
sysfs copy with ``cpu/`` -> a spec with packages, llcs_per_node, cores_per_cluster, threads and cpu_vendor.

The spec is tested as data (and as the YAML that loads to it): ``topo check`` of it needs the grid fields in the
spec model; the round trip below runs once the schema knows them.

The fixtures in tests/data/topologies/ were made by lstopo 2.9.0:

- ``hwloc-genoa-nps4.xml``: ``lstopo --if synthetic --input "pack:1 numa:4 l3:2 core:4 pu:1" --of xml``
- ``hwloc-snc3-2socket.xml``: ``lstopo --if synthetic --input "pack:2 l3:1 numa:3 core:2 pu:2" --of xml``, then
  ``hwloc-annotate`` added a NUMALatency matrix (10 local, 12 within a package, 21 across) and
  ``CPUVendor GenuineIntel`` on both packages.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from common import REPO, assert_one_line_error, numalab

from lab import schemas
from lab.datafile import parse_yaml
from lab.errors import LabError
from lab.topology.importers.hwloc import parse_hwloc_xml, parse_synthetic, read_hwloc_xml
from lab.topology.importers.imported_spec import grid_spec
from lab.topology.importers.machine_grid import derive_grid
from lab.topology.importers.topo_import import import_spec
from lab.topology.model.machine import CpuGroups, Machine, MachineNode
from lab.topology.model.sysfs_machine import read_machine

DATA = REPO / "tests" / "data" / "topologies"
GENOA = DATA / "hwloc-genoa-nps4.xml"
SNC3 = DATA / "hwloc-snc3-2socket.xml"
LSTOPO = shutil.which("lstopo")
GRID_IN_SCHEMA = "llcs_per_node" in schemas.load_schema("topology")["properties"]


def _spec(gm: Machine, cpus: int | None = None, mem: int = 512, slow: bool = False):
    return grid_spec(gm, "t", cpus, mem, slow)


def _without_origin(spec, origin: str) -> dict:
    """The spec's data with the source named in its description made neutral (an XML file vs a description)."""
    data = dict(spec.data)
    data["description"] = data["description"].replace(origin, "SOURCE")
    return data


# --- hwloc XML: the checked-in fixtures (no hwloc needed) -----------------------------------------------------


def test_genoa_xml_imports_with_two_llcs_a_node():
    machine = read_hwloc_xml(GENOA)
    assert machine.groups is not None  # its 8 L3s of 4 CPUs with their sizes (cache_size, bytes)
    assert [(c.level, len(c.cpus), c.size_kib) for c in machine.groups.caches] == [(3, 4, 16384)] * 8
    spec = _spec(machine)
    d = spec.data
    # 4 CPUs a node, LLCs of 2 cores: 2, the grid's fewest, would be LLCs of one core, which 6.1 misreads
    assert (d["nodes"], d["cpus_per_node"], d["memory_per_node"]) == (4, 4, "512M")
    assert (d["packages"], d["llcs_per_node"]) == (1, 2)
    assert "threads" not in d and "cores_per_cluster" not in d and "cpu_vendor" not in d
    assert d["distances"] == [[10 if i == j else 20 for j in range(4)] for i in range(4)]
    assert "4 nodes, 32 CPUs (a CPU node 2 L3s x 4 cores x 1 thread" in d["description"]
    assert "no distances: 10 local, 20 within a package, 30 across packages" in d["description"]
    assert "# cores_per_cluster left out: the source has no L2" in spec.text
    assert parse_yaml(spec.text, "x") == d
    assert _spec(read_hwloc_xml(GENOA), cpus=8).data["cpus_per_node"] == 8


def test_genoa_xml_and_its_synthetic_description_give_the_same_spec():
    desc = "pack:1 numa:4 l3:2 core:4 pu:1"
    from_xml = _spec(read_hwloc_xml(GENOA), cpus=4)
    from_desc = _spec(parse_synthetic(desc), cpus=4)
    assert _without_origin(from_xml, f"hwloc XML ({GENOA})") == _without_origin(
        from_desc, f"hwloc synthetic description ({desc})"
    )


def test_snc3_xml_l3_spans_the_package_and_distances_and_vendor_are_read():
    spec = _spec(read_hwloc_xml(SNC3))
    d = spec.data
    assert (d["nodes"], d["threads"], d["packages"], d["llcs_per_node"], d["cpu_vendor"]) == (6, 2, 2, 1, "intel")
    assert d["distances"][0] == [10, 12, 12, 21, 21, 21] and d["distances"][4] == [21, 21, 21, 12, 10, 12]
    assert "each of the machine's L3s spans 3 nodes (as on Intel SNC" in spec.text
    assert "the kernel splits it per node as on SNC" in spec.text
    assert "no distances" not in d["description"]
    assert "2 packages, 6 nodes, 24 CPUs" in d["description"]
    # threads=2: a node's CPUs come in pairs
    with pytest.raises(LabError, match=r"--cpus-per-node 3: .* multiples of 2; pick 2, 4, 6"):
        _spec(read_hwloc_xml(SNC3), cpus=3)


# --- hwloc XML made by lstopo here, against the synthetic description --------------------------------------

DESCRIPTIONS = [
    "pack:1 numa:4 l3:2 core:4 pu:1",  # Genoa NPS4-like: 2 CCXs a node
    "pack:2 numa:3 l3:1 core:2 pu:2",  # an L3 a node
    "pack:2 l3:1 numa:3 core:2 pu:2",  # SNC-3: the L3 spans the package's nodes
    "pack:2 l3:1 numa:2 l2:2 core:2 pu:2",  # SNC-2 with 2 cores an L2
    "pack:2 [numa] [numa(memory=2GiB)] core:2 pu:1",  # a memoryless CPU node and a CPU-less one a package
    "numa:2(memory=3GB) pack:2 l3:2 l2:1 core:2 pu:2",  # a node over 2 packages: packages left out
    "pack:2 core:2 pu:2",  # no NUMA level: hwloc makes one node
    "package:2 die:2 numanode:1 l3u:1 group:2 l2d:2 l1d:1 core:3 pu:1",
]


@pytest.mark.skipif(LSTOPO is None, reason="lstopo (apt-get install hwloc) is not installed")
@pytest.mark.parametrize("desc", DESCRIPTIONS)
def test_lstopo_xml_and_the_synthetic_description_give_the_same_spec(tmp_path, desc):
    xml = tmp_path / "machine.xml"
    subprocess.run(
        [LSTOPO, "-f", "--if", "synthetic", "--input", desc, "--of", "xml", str(xml)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    from_desc = parse_synthetic(desc)
    from_xml = read_hwloc_xml(xml)
    assert from_xml.nodes == from_desc.nodes
    assert from_xml.distances == from_desc.distances
    a, b = _spec(from_xml), _spec(from_desc)
    assert _without_origin(a, f"hwloc XML ({xml})") == _without_origin(b, f"hwloc synthetic description ({desc})")
    assert a.notes == b.notes


def test_synthetic_layouts():
    snc2 = _spec(parse_synthetic("pack:2 l3:1 numa:2 l2:2 core:2 pu:2"))
    # a node: 1 LLC x clusters of 2 cores x 2 threads -> 4 CPUs at least
    assert (snc2.data["cpus_per_node"], snc2.data["cores_per_cluster"], snc2.data["llcs_per_node"]) == (4, 2, 1)
    hbm = _spec(parse_synthetic("pack:2 [numa] [numa(memory=2GiB)] core:2 pu:1"), mem=256)
    assert hbm.data["nodes"] == [
        {"id": 0, "cpus": 2, "memory": 0},
        {"id": 1, "cpus": 0, "memory": "256M"},
        {"id": 2, "cpus": 2, "memory": 0},
        {"id": 3, "cpus": 0, "memory": "256M"},
    ]
    assert "nodes [1, 3] are local to the same CPUs as nodes [0, 2]" in hbm.data["description"]
    assert "memoryless nodes [0, 2]" in hbm.data["description"]
    spread = _spec(parse_synthetic("numa:2(memory=3GB) pack:2 l3:2 l2:1 core:2 pu:2"))
    assert "packages" not in spread.data and "# packages left out: node 0's CPUs are in 2 packages" in spread.text
    assert spread.data["distances"] == [[10, 30], [30, 10]]
    assert "node 0: 16 CPUs, 2862 MiB" in spread.data["description"]  # 3 GB is 3e9 bytes in hwloc
    big = parse_synthetic("pack:1 numa:2 l3:2 l2:1 core:4 pu:2")  # a node: 2 LLCs x 4 cores an L2 x 2 threads
    with pytest.raises(LabError, match=r"--cpus-per-node 8: .* 2 LLC\(s\) x clusters of 4 cores x 2 thread\(s\)"):
        _spec(big, cpus=8)
    assert _spec(big).data["cpus_per_node"] == 16
    assert _spec(big, cpus=32).data["cpus_per_node"] == 32
    with pytest.raises(LabError, match="more than QEMU's 288"):
        _spec(big, cpus=160)


@pytest.mark.parametrize(
    ("desc", "needle"),
    [
        ("", "empty"),
        ("pack:2 misc:2 core:1 pu:1", "'misc:2': unknown or unsupported level 'misc'"),
        ("pack:2 l1i:2 core:1 pu:1", "'l1i:2': unknown or unsupported level"),
        ("pack:2 core:2", "'core:2': the last level must be pu"),
        ("pack:0 core:1 pu:1", "'pack:0': a level needs at least 1 object"),
        ("pack:2x core:1 pu:1", "cannot read 'pack:2x'"),
        ("(memory=1GB) pack:2 core:1 pu:1", "cannot read '(memory=1GB)'"),
        ("pack:2 numa:2(indexes=1,0) core:1 pu:1", "attribute 'indexes=1,0' is not supported (only memory)"),
        ("pack:2 numa:2(memory=1.5GB) core:1 pu:1", "memory='1.5GB' is not a size"),
        ("pack:2(memory=1GB) core:1 pu:1", "'pack:2(memory=1GB)': attribute 'memory=1GB' is not supported"),
        ("pack:1 numa:2 numa:2 core:1 pu:1", "'numa:2': a second numa level ('numa:2')"),
        ("pack:1 core:2 numa:2 pu:1", "'numa:2': must come above the cores"),
        ("core:2 pack:2 pu:1", "'pack:2' cannot come below a smaller level"),
        ("pack:2 numa:2 [numa] core:1 pu:1", "NUMA nodes both as a level and attached"),
        ("[core] pack:2 core:1 pu:1", "'[core]': only NUMA nodes ([numa]) can be attached"),
        ("pack:64 core:64 pu:4", "'pu:4': more than 8192 PUs"),
        ("pack:2 numa:65 core:1 pu:1", "130 NUMA nodes, at most 128"),
    ],
)
def test_bad_synthetic_descriptions_name_the_token(desc, needle):
    with pytest.raises(LabError) as err:
        parse_synthetic(desc)
    assert needle in str(err.value) and "\n" not in str(err.value)


# --- hwloc XML: untrusted input --------------------------------------------------------------------------------

_HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'


def _genoa_with(old: str, new: str) -> bytes:
    text = GENOA.read_text()
    assert old in text
    return text.replace(old, new, 1).encode()


_NODE0_CPUSET = 'os_index="0" cpuset="0x000000ff"'
_DIST = (
    '<distances2 type="NUMANode" nbobjs="4" kind="5" name="NUMALatency" indexing="os">'
    "<indexes length='8'>{idx}</indexes><u64values length='40'>{vals}</u64values></distances2>\n</topology>"
)


def _with_distances(idx: str, vals: str) -> bytes:
    return _genoa_with("</topology>", _DIST.format(idx=idx, vals=vals))


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (
            (
                _HEAD + '<!DOCTYPE t [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;">]>\n<topology>&b;</topology>'
            ).encode(),
            "x.xml:2: a DTD with an internal subset",
        ),
        ((_HEAD + '<topology version="2.0">&ext;</topology>').encode(), "x.xml:2: not well-formed XML: undefined"),
        ((_HEAD + "<topology>\n</topology>").encode(), "an hwloc 1.x XML file"),
        ((_HEAD + '<topology version="7">\n</topology>').encode(), "hwloc XML version '7', expected 2.x"),
        ((_HEAD + "<svg/>").encode(), "x.xml:2: not an hwloc topology (the root element is <svg>"),
        (b"\x00\x01", "not well-formed XML"),
        (GENOA.read_bytes()[:3000], "not well-formed XML"),
        (
            _genoa_with('os_index="0" cpuset="0x000000ff"', 'os_index="0" cpuset="0xzz"'),
            "cannot read the cpuset '0xzz'",
        ),
        (_genoa_with('os_index="0" cpuset="0x000000ff"', 'os_index="0" cpuset="0xf...f"'), "has CPUs beyond 8191"),
        (_genoa_with('local_memory="1073741824"', 'local_memory="-1"'), "local_memory='-1' is not a whole number"),
        (_genoa_with('type="NUMANode" os_index="1"', 'type="NUMANode" os_index="0"'), "one os_index"),
        (_with_distances("0 1 2 3", "10 20"), "4 indexes and 2 values for 4 nodes"),
        (_with_distances("0 1 2 3", "10 20 20 20 20 10 20 20 20 20 10 20 20 20 20 5"), "distance 3->3 is 5"),
        (_with_distances("0 1 2 7", "10 20 20 20 20 10 20 20 20 20 10 20 20 20 20 10"), "nodes [0, 1, 2, 7]"),
        (_with_distances("0 1 2 3", "10 20 20 x"), "holds more than whole numbers"),
        (_with_distances("0 1 2 3", "10 20 20 20 20 10 20 20 20 20 10 20 20 20 21 10"), "must be symmetric"),
    ],
)
def test_bad_hwloc_xml_is_one_line_naming_the_file(data, needle):
    with pytest.raises(LabError) as err:
        parse_hwloc_xml(data, "x.xml")
    assert str(err.value).startswith("x.xml") and needle in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_xml_distances_by_gp_index_and_too_big_a_file(tmp_path, monkeypatch):
    text = GENOA.read_text()
    gp = [line.split('gp_index="')[1].split('"')[0] for line in text.splitlines() if 'type="NUMANode"' in line]
    vals = " ".join(str(10 if i == j else 11 + i + j) for i in range(4) for j in range(4))
    data = _genoa_with("</topology>", _DIST.format(idx=" ".join(gp), vals=vals).replace('"os"', '"gp"'))
    gm = parse_hwloc_xml(data, "x.xml")
    assert gm.distances[1] == (12, 10, 14, 15)
    import lab.topology.importers.hwloc as hwloc  # (to shrink its size limit)

    monkeypatch.setattr(hwloc, "MAX_XML_BYTES", 4096)
    with pytest.raises(LabError, match="more than the 4 KiB"):
        read_hwloc_xml(GENOA)


# --- the grid from uneven machines: fields left out, with a comment ------------------------------------------


def _machine(nodes: list[list[int]], vendor: str = "", **groups) -> Machine:
    n = len(nodes)
    dist = tuple(tuple(10 if i == j else 20 for j in range(n)) for i in range(n))
    cpu_groups = CpuGroups(**{k: tuple(frozenset(g) for g in v) for k, v in groups.items()}, vendor=vendor)
    return Machine(tuple(MachineNode(i, tuple(c), 1024) for i, c in enumerate(nodes)), dist, "test", groups=cpu_groups)


def test_uneven_machines_leave_fields_out_and_say_why():
    four = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    g = derive_grid(_machine(four, packages=[range(0, 12), range(12, 16)]))
    assert g.packages is None and "packages hold 1 or 3 CPU nodes" in g.comments["packages"]
    g = derive_grid(_machine(four, packages=[[*range(4), *range(8, 12)], [*range(4, 8), *range(12, 16)]]))
    assert g.packages is None and "(0, 2) are not consecutive ids" in g.comments["packages"].replace(" and ", ", ")
    g = derive_grid(_machine(four, llcs=[[0, 1], [2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]))
    assert g.llcs_per_node is None and "nodes have 1 or 2 L3s" in g.comments["llcs_per_node"]
    g = derive_grid(_machine(four, llcs=[[0, 1, 2], [3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]]))
    assert g.llcs_per_node == 2 and "L3s hold 1 or 2 or 3 cores" in g.comments["llcs_per_node"]
    g = derive_grid(_machine(four, llcs=[range(0, 6), range(6, 16)]))
    assert g.llcs_per_node is None and "holds parts of 2 L3s" in g.comments["llcs_per_node"]
    g = derive_grid(_machine(four, l2s=[[0, 1], [2], [3], *([c] for c in range(4, 16))]))
    assert g.cores_per_cluster is None and "shared by 1 or 2 cores" in g.comments["cores_per_cluster"]
    g = derive_grid(_machine(four, l2s=[[c, c + 1] for c in range(0, 16, 2)], cores=[[c] for c in range(16)]))
    assert g.cores_per_cluster == 2 and g.unit == 2
    g = derive_grid(_machine(four, l2s=[[c, (c + 1) % 16] for c in range(1, 16, 2)]))
    assert g.cores_per_cluster is None and "an L2 spans two nodes" in g.comments["cores_per_cluster"]
    g = derive_grid(_machine(four, cores=[[0, 1], *([c] for c in range(2, 16))]))
    assert g.threads == 1 and "cores have 1 or 2 threads" in g.comments["threads"]
    g = derive_grid(_machine(four, packages=[range(16)], vendor="HygonGenuine"))
    assert g.cpu_vendor is None and "'HygonGenuine' is not Intel's or AMD's" in g.comments["cpu_vendor"]
    with pytest.raises(LabError, match=r"test: CPU 1 is in two L3s \(CPUs 0-1 and CPUs 1-2\)"):
        derive_grid(_machine(four, llcs=[[0, 1], [1, 2]]))
    with pytest.raises(LabError, match=r"a core \(CPUs 3-4\) is in two nodes"):
        derive_grid(_machine(four, cores=[[3, 4]]))
    spec = _spec(_machine(four, packages=[range(0, 12), range(12, 16)]))
    assert "# packages left out: packages hold 1 or 3 CPU nodes" in spec.text and "packages" not in spec.data


# --- sysfs with cpu/ ------------------------------------------------------------------------------------------


def _fake_system(root: Path, *, l3_per: str = "node", memoryless: int | None = None, vendor: str = "0002") -> Path:
    """/sys/devices/system/{node,cpu} of a 2-package machine: 2 nodes a package, 4 CPUs a node (2 cores x 2
    threads, numbered as Linux does: the second threads after all first ones), 2 cores an L2, an L3 a node (or a
    package: ``l3_per="package"``)."""
    system = root / "devices" / "system"
    cores = [(c, c + 8) for c in range(8)]  # core k: CPUs k and k+8
    node_of_core = [k // 2 for k in range(8)]
    for node in range(4):
        d = system / "node" / f"node{node}"
        d.mkdir(parents=True)
        cpus = sorted(c for k, pair in enumerate(cores) if node_of_core[k] == node for c in pair)
        (d / "cpulist").write_text(",".join(map(str, cpus)) + "\n")
        kib = 0 if node == memoryless else 8 << 20
        (d / "meminfo").write_text(f"Node {node} MemTotal:       {kib} kB\n")
        (d / "distance").write_text(
            " ".join(str(10 if i == node else 12 if i // 2 == node // 2 else 32) for i in range(4))
        )
    (system / "node" / "online").write_text("0-3\n")
    for k, pair in enumerate(cores):
        node = node_of_core[k]
        for c in pair:
            top = system / "cpu" / f"cpu{c}" / "topology"
            top.mkdir(parents=True)
            (top / "physical_package_id").write_text(f"{node // 2}\n")
            (top / "die_id").write_text("0\n")
            (top / "cluster_id").write_text(f"{k // 2}\n")
            (top / "core_id").write_text(f"{k % 4}\n")
            (top / "thread_siblings_list").write_text(f"{pair[0]},{pair[1]}\n")
            l2 = [x for j in (k - k % 2, k - k % 2 + 1) for x in cores[j]]
            l3_cores = range(node * 2, node * 2 + 2) if l3_per == "node" else range(node // 2 * 4, node // 2 * 4 + 4)
            l3 = [x for j in l3_cores for x in cores[j]]
            for i, (level, kind, shared) in enumerate(
                [(1, "Data", pair), (1, "Instruction", pair), (2, "Unified", l2), (3, "Unified", l3)]
            ):
                idx = system / "cpu" / f"cpu{c}" / "cache" / f"index{i}"
                idx.mkdir(parents=True)
                (idx / "level").write_text(f"{level}\n")
                (idx / "type").write_text(kind + "\n")
                (idx / "shared_cpu_list").write_text(",".join(map(str, sorted(shared))) + "\n")
                (idx / "size").write_text(f"{32 << level}K\n")
    (system / "cpu" / "modalias").write_text(f"cpu:type:x86,ven{vendor}fam0019mod0011:feature:,0000\n")
    return system


def test_sysfs_with_cpu_reads_packages_caches_and_threads(tmp_path):
    system = _fake_system(tmp_path)
    gm = read_machine(system)
    assert gm.groups is not None
    assert [n.cpus for n in gm.nodes] == [(0, 1, 8, 9), (2, 3, 10, 11), (4, 5, 12, 13), (6, 7, 14, 15)]
    # the L2s (2 cores) and L3s (a node's 2 L2s) with their sizes, by level and first CPU
    nodes = [[0, 1, 8, 9], [2, 3, 10, 11], [4, 5, 12, 13], [6, 7, 14, 15]]
    assert [(c.level, sorted(c.cpus), c.size_kib) for c in gm.groups.caches] == [
        *((2, cpus, 128) for cpus in nodes), *((3, cpus, 256) for cpus in nodes)]  # fmt: skip
    spec = _spec(gm)
    d = spec.data
    assert (d["packages"], d["llcs_per_node"], d["cores_per_cluster"], d["threads"]) == (2, 1, 2, 2)
    assert d["cpu_vendor"] == "amd" and d["cpus_per_node"] == 4  # the fewest: a cluster of 2 cores x 2 threads
    # modalias's fam0019mod0011 (hex, as the kernel writes it): AMD family 25 model 17, a Genoa
    assert d["cpu_model"] == {"family": 25, "model": 17} and "cpu_model: {family: 25, model: 17}\n" in spec.text
    assert d["distances"][0] == [10, 12, 32, 32]
    assert f"sysfs ({system / 'node'} and {system / 'cpu'})" in d["description"]
    # the same from ROOT/node, which has cpu/ beside it
    assert read_machine(system / "node").groups == gm.groups


def test_sysfs_snc_memoryless_and_a_node_directory_alone(tmp_path):
    system = _fake_system(tmp_path, l3_per="package", memoryless=1, vendor="0000")
    spec = _spec(read_machine(system))
    assert spec.data["llcs_per_node"] == 1 and "each of the machine's L3s spans 2 nodes" in spec.text
    assert spec.data["cpu_vendor"] == "intel"
    assert [n["memory"] for n in spec.data["nodes"]] == ["512M", 0, "512M", "512M"]
    # a copy of node/ alone (not named node: no cpu/ beside it is looked for) reads as before: nodes and SLIT
    alone = tmp_path / "copy"
    shutil.copytree(system / "node", alone)
    m = read_machine(alone)
    assert isinstance(m, Machine) and [n.memory_mib for n in m.nodes] == [8192, 0, 8192, 8192]


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda s: shutil.rmtree(s / "cpu" / "cpu9" / "topology"), "cpu9/topology: missing (a node lists CPU 9)"),
        (lambda s: (s / "cpu/cpu3/topology/physical_package_id").write_text("one\n"), "physical_package_id: not a"),
        (lambda s: (s / "cpu/cpu3/cache/index3/shared_cpu_list").write_text("0-9999999\n"), "cannot read the CPU list"),
        (lambda s: (s / "cpu/cpu3/cache/index3/shared_cpu_list").write_text("0-2\n"), "does not list CPU 3 itself"),
        (lambda s: (s / "cpu/cpu2/cache/index3/shared_cpu_list").write_text("2,3,10\n"), "CPU 2 is in two L3s"),
    ],
)
def test_bad_sysfs_cpu_files_name_the_file(tmp_path, edit, needle):
    system = _fake_system(tmp_path)
    edit(system)
    with pytest.raises(LabError) as err:
        _spec(read_machine(system))
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_sysfs_without_caches_or_with_uneven_l2s(tmp_path):
    system = _fake_system(tmp_path)
    for cpu in (system / "cpu").glob("cpu[0-9]*"):
        shutil.rmtree(cpu / "cache")
    spec = _spec(read_machine(system))
    assert "llcs_per_node left out (1): the source has no L3" in spec.text
    assert spec.data["cores_per_cluster"] == 2  # (from cluster_id)


# --- the CLI --------------------------------------------------------------------------------------------------


def test_cli_imports_hwloc_xml_and_synthetic(tmp_path):
    out = tmp_path / "snc3.yaml"
    proc = numalab("topo", "import", str(SNC3), "--cpus-per-node", "4", "--mem-per-node", "1G", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"{out}: 6 nodes, 24 vCPUs, 6144 MiB" in proc.stderr
    assert "note: cores_per_cluster left out" in proc.stderr
    text = out.read_text()
    assert text.startswith(f"# numalab topo import: hwloc XML ({SNC3})\nname: hwloc-snc3-2socket\n")
    data = parse_yaml(text, "x")
    assert (data["packages"], data["llcs_per_node"], data["threads"], data["cpus_per_node"]) == (2, 1, 2, 4)
    proc = numalab("topo", "import", "--hwloc-synthetic", "pack:1 numa:4 l3:2 core:4 pu:1", "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["data"]["llcs_per_node"] == 2 and got["data"]["name"] == "synthetic"
    assert "llcs_per_node: 2" in got["spec"] and got["data"]["cpus_per_node"] == 4
    assert got["notes"][0] == "cores_per_cluster left out: the source has no L2 (each core its own)"
    assert got["notes"][1].startswith("cpus_per_node 4 (the default): the fewest CPUs a node that the kernel reads")
    assert len(got["notes"]) == 2
    assert "examples:" in numalab("topo", "import", "--help").stdout


def test_the_default_scale_is_the_fewest_cpus_the_kernel_reads_as_the_machine(tmp_path):
    """Genoa NPS4-like, 2 L3s a node: 2 CPUs a node, the fewest the grid allows, are LLCs of one core, which 6.1
    takes for packages of their own (lab.topology.predictions.kernel_warnings); the default is 4, LLCs of 2 cores, and
    the spec, its notes and --out say why. A --cpus-per-node 2 given is taken, with topo check's warning on a line of
    its own."""
    desc = "pack:1 numa:4 l3:2 core:4 pu:1"
    spec = _spec(parse_synthetic(desc))
    assert (spec.data["cpus_per_node"], spec.data["llcs_per_node"], spec.warnings) == (4, 2, ())
    why = ("cpus_per_node 4 (the default): the fewest CPUs a node that the kernel reads as this machine; 2, the fewest "
           "the grid allows, would make topo check warn: a die (LLC) or module of one core: 6.1 takes")  # fmt: skip
    assert [n for n in spec.notes if n.startswith(why)]
    assert f"# {why}" in spec.text and spec.text.index(f"# {why}") < spec.text.index("cpus_per_node: 4\n")
    assert "Scaled to 4 CPUs a CPU node (2 L3s x 2 cores x 1 thread)" in spec.data["description"]
    assert parse_yaml(spec.text, "x") == spec.data
    # a cluster of 3 cores a package: 3 CPUs a socket, which 7.2 and 6.1 hang on; 6 by default
    three = _spec(parse_synthetic("pack:2 numa:1 l3:1 l2:1 core:3 pu:1"))
    assert three.data["cpus_per_node"] == 6 and three.warnings == ()
    assert [n for n in three.notes if n.startswith("cpus_per_node 6 (the default): the fewest CPUs a node")]
    forced = _spec(parse_synthetic(desc), cpus=2)
    assert forced.data["cpus_per_node"] == 2 and not [n for n in forced.notes if n.startswith("cpus_per_node")]
    assert len(forced.warnings) == 1 and forced.warnings[0].startswith("a die (LLC) or module of one core")

    out = tmp_path / "genoa.yaml"
    proc = numalab("topo", "import", "--hwloc-synthetic", desc, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr and f"numalab: note: {why}" in proc.stderr
    check = numalab("topo", "check", str(out))
    assert check.returncode == 0 and check.stderr == "", check.stderr
    proc = numalab("topo", "import", "--hwloc-synthetic", desc, "--cpus-per-node", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == f"numalab: {out}: 4 nodes, 8 vCPUs, 2048 MiB" and all(ln.startswith("numalab: ") for ln in lines)
    warned = [ln for ln in lines if ln.startswith("numalab: warning: ")]
    assert warned == [
        "numalab: warning: --cpus-per-node 2: a die (LLC) or module of one core: 6.1 takes each such CPU for a "
        "package of its own (it reads no module level), so its guest view will not be this machine's; give an LLC "
        "or module 2 cores or more"
    ]
    assert proc.stderr.endswith("2 cores or more\n")
    assert numalab("topo", "check", str(out)).stderr.startswith(f"numalab: warning: {out}: a die (LLC)")


def test_cli_import_errors_are_one_line(tmp_path):
    assert_one_line_error(
        numalab("topo", "import", str(GENOA), "--hwloc-synthetic", "core:1 pu:1"), "give one of a file"
    )
    assert_one_line_error(numalab("topo", "import", "--hwloc-synthetic", "pack:2 misc:1 pu:1"), "'misc:1'")
    bad = tmp_path / "bad.xml"
    bad.write_text(_HEAD + '<!DOCTYPE t [<!ENTITY a "x">]>\n<topology/>\n')
    assert_one_line_error(numalab("topo", "import", str(bad)), f"{bad}:2: a DTD with an internal subset")
    assert_one_line_error(
        numalab("topo", "import", str(SNC3), "--cpus-per-node", "5"), "--cpus-per-node 5", "pick 2, 4, 6"
    )


def test_import_spec_api():
    spec = import_spec(str(GENOA), None, "genoa", None, "1G")
    assert spec.data["memory_per_node"] == "1G" and spec.n_nodes == 4 and spec.total_cpus == 16
    old = import_spec(str(REPO / "tests/data/numactl/seed000.txt"), None, None, None, "512M")
    assert old.topology is not None and old.data["cpus_per_node"] == 2 and "packages" not in old.data


@pytest.mark.skipif(not GRID_IN_SCHEMA, reason="the spec model has no packages/llcs_per_node yet (issue #48)")
@pytest.mark.parametrize("source", [GENOA, SNC3])
def test_imported_grid_spec_passes_topo_check(tmp_path, source):
    out = tmp_path / "spec.yaml"
    assert numalab("topo", "import", str(source), "--out", str(out)).returncode == 0
    check = numalab("topo", "check", str(out))
    assert check.returncode == 0, check.stderr


def _snc3_with_cpuid(tmp_path: Path, models: tuple[str, str]) -> Path:
    """The SNC-3 XML with each package's CPUFamilyNumber and CPUModelNumber, as lstopo writes them (decimal)."""
    text = SNC3.read_text()
    parts = text.split('<info name="CPUVendor" value="GenuineIntel"/>')
    assert len(parts) == 3
    out = parts[0]
    for model, rest in zip(models, parts[1:]):
        out += (
            '<info name="CPUVendor" value="GenuineIntel"/><info name="CPUFamilyNumber" value="6"/>'
            f'<info name="CPUModelNumber" value="{model}"/>' + rest
        )
    path = tmp_path / "snc3-gnr.xml"
    path.write_text(out)
    return path


def test_hwloc_cpu_family_and_model_become_cpu_model(tmp_path: Path) -> None:
    spec = _spec(read_hwloc_xml(_snc3_with_cpuid(tmp_path, ("173", "173"))))
    assert spec.data["cpu_vendor"] == "intel" and spec.data["cpu_model"] == {"family": 6, "model": 173}
    assert "cpu_vendor: intel\ncpu_model: {family: 6, model: 173}\n" in spec.text
    assert parse_yaml(spec.text, "t") == spec.data
    # packages of two models: the machine's to say, left out with a comment
    mixed = _spec(read_hwloc_xml(_snc3_with_cpuid(tmp_path, ("173", "175"))))
    assert "cpu_model" not in mixed.data
    assert "# cpu_model left out: the machine's packages give several families/models (6/173, 6/175)" in mixed.text
    # the file without them (hwloc-snc3-2socket.xml) imports as before
    assert "cpu_model" not in _spec(read_hwloc_xml(SNC3)).data
