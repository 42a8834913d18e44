"""Uneven machines (issue #48): CPU nodes holding different numbers of LLCs of one size (a node's own ``llcs:``),
as QEMU can boot them (one -smp grid, each node given its whole dies by -numa cpu), and one-line errors for what it
cannot (LLCs of different sizes, packages of different die counts, a node across two packages).

The fixture ``tests/data/topologies/hwloc-genoa-nps4-ccd-off.xml`` was made by lstopo 2.9.0 from the Genoa-like
synthetic machine with its last CCX taken away: ``lstopo --if synthetic --input "pack:1 numa:4 l3:2 core:4 pu:1"
--restrict 0x0fffffff --of xml`` (node 3 keeps one L3 of 4 cores, the others two)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from common import BOOT, HOST, REPO, assert_one_line_error, host_inventory, numalab

from lab.analysis.cpu_readback import check_cpus
from lab.analysis.llc import llc_of, llcs
from lab.errors import LabError
from lab.placement.host_inventory import HostNode
from lab.placement.pinning import plan_placement
from lab.topology.importers.hwloc import read_hwloc_xml
from lab.topology.importers.imported_spec import grid_spec
from lab.topology.importers.machine_grid import derive_grid
from lab.topology.model.cpu_grid import grid_from_dict
from lab.topology.model.machine import CpuGroups, Machine, MachineNode
from lab.topology.model.ref import topology_with_sizes
from lab.topology.model.spec import load_spec, load_topology, preset_names
from lab.topology.model.topology import topology_from_dict
from lab.topology.predictions.cpu_view import predict_cpus
from lab.vm.libvirt.libvirt_xml import domain_xml
from lab.vm.qemu.qemu_argv import qemu_argv

PRESET = "nps2-uneven-llc"
CCD_OFF = REPO / "tests" / "data" / "topologies" / "hwloc-genoa-nps4-ccd-off.xml"


def spec(nodes: list[dict], **extra) -> dict:
    """A spec of ``nodes`` (each {cpus, llcs?, memory?}), 256M a node and distance 12 between any two."""
    n = len(nodes)
    return {
        "nodes": [{"id": i, "memory": "256M"} | node for i, node in enumerate(nodes)],
        "distances": [[10 if i == j else 12 for j in range(n)] for i in range(n)],
    } | extra


def domains(topo, release: str = "6.1.0-18-amd64") -> list[list[tuple[str, str]]]:
    return [[(d["name"], d["cpus"]) for d in c["domains"]] for c in predict_cpus(topo, release)["cpus"]]


# --- the model --------------------------------------------------------------------------------------------------


def test_the_preset_is_one_package_of_three_dies_two_for_node_0_one_for_node_1() -> None:
    topo = load_topology(PRESET)
    g = topo.cpu_grid
    assert (g.packages, g.dies_per_package, g.cores_per_die, g.threads) == (1, 3, 2, 1)
    assert g.uneven and g.llc_counts == (2, 1) and g.package_nodes() == (2,)
    assert [n.cpus for n in topo.nodes] == [4, 2] and [n.memory_mib for n in topo.nodes] == [512, 256]


def test_uneven_nodes_over_two_packages() -> None:
    """Nodes of 2, 1 and 1 LLCs in 2 packages of 2 dies: package 0 is node 0, package 1 nodes 1 and 2."""
    topo = load_spec(spec([{"cpus": 4, "llcs": 2}, {"cpus": 2}, {"cpus": 2}], packages=2), "t")
    g = topo.cpu_grid
    assert (g.packages, g.dies_per_package, g.llc_counts, g.package_nodes()) == (2, 2, (2, 1, 1), (1, 2))
    view = predict_cpus(topo)
    assert [(c["node"], c["package"], c["die"]) for c in view["cpus"]] == [
        (0, 0, 0), (0, 0, 0), (0, 0, 1), (0, 0, 1), (1, 1, 0), (1, 1, 0), (2, 1, 1), (2, 1, 1)]  # fmt: skip
    # a package holds two nodes, so x86 builds no package level anywhere (x86_has_numa_in_package is global)
    assert view["numa_in_package"] and all(name == "MC" for stack in domains(topo) for name, _ in stack)


def test_a_uniform_grid_keeps_its_record_and_an_uneven_one_adds_node_llcs() -> None:
    """A uniform grid's ``topology.cpu_grid`` is the dict it was before uneven grids (golden records do not
    move); an uneven one says ``node_llcs`` where a uniform one says ``llcs_per_node``, and both read back."""
    old_keys = ["packages", "dies_per_package", "clusters_per_die", "cores_per_cluster", "threads", "llcs_per_node"]
    for name in preset_names():
        topo = load_topology(name)
        if topo.cpu_grid is not None and not topo.cpu_grid.uneven:
            assert [k for k in topo.cpu_grid.to_dict() if k not in ("vendor", "cpu_model")] == old_keys, name
    spr = {"packages": 2, "dies_per_package": 2, "clusters_per_die": 1, "cores_per_cluster": 2, "threads": 1,
           "llcs_per_node": 2}  # fmt: skip
    # spr-2s-2llc has since said its vendor and Sapphire Rapids X's model (cpu_model): the rest of its dict is as a
    # record of before this change has it, and such a record reads back as that grid without them
    now = load_topology("spr-2s-2llc").cpu_grid
    assert now.to_dict() == spr | {"vendor": "intel", "cpu_model": {"family": 6, "model": 143}}
    assert grid_from_dict(spr) == replace(now, vendor="", cpu_model=None)
    topo = load_topology(PRESET)
    d = topo.to_dict()["cpu_grid"]
    assert d["node_llcs"] == [2, 1] and "llcs_per_node" not in d
    assert topology_from_dict(json.loads(json.dumps(topo.to_dict()))) == topo


def test_overrides_scale_the_nodes_of_the_fewest_llcs_and_the_others_in_proportion(tmp_path: Path) -> None:
    topo = load_topology(PRESET).with_overrides(cpus_per_node=4)
    assert [n.cpus for n in topo.nodes] == [8, 4] and topo.cpu_grid.llc_counts == (2, 1)
    assert topo.cpu_grid.cores_per_die == 4
    assert [n.cpus for n in topology_with_sizes(PRESET, cpus_per_node=6).nodes] == [12, 6]
    path = tmp_path / "four-and-two.yaml"
    path.write_text(yaml.safe_dump(spec([{"cpus": 8, "llcs": 4}, {"cpus": 4, "llcs": 2}], packages=1)))
    assert [n.cpus for n in topology_with_sizes(str(path), cpus_per_node=6).nodes] == [12, 6]
    with pytest.raises(LabError, match=r"applied to four-and-two: cpus_per_node: 3 CPUs for the nodes of 2 LLCs"):
        topology_with_sizes(str(path), cpus_per_node=3)


# --- QEMU and libvirt -------------------------------------------------------------------------------------------


def test_argv_is_one_grid_with_each_node_on_its_dies() -> None:
    topo = load_topology(PRESET)
    argv = qemu_argv(topo, plan_placement(topo, HOST), BOOT)
    assert argv[argv.index("-smp") + 1] == "6,sockets=1,dies=3,cores=2,threads=1"
    cpus = [a for a in argv if a.startswith("cpu,node-id=")]
    assert [a.split(",")[1:4] for a in cpus] == [
        ["node-id=0", "socket-id=0", "die-id=0"], ["node-id=0", "socket-id=0", "die-id=0"],
        ["node-id=0", "socket-id=0", "die-id=1"], ["node-id=0", "socket-id=0", "die-id=1"],
        ["node-id=1", "socket-id=0", "die-id=2"], ["node-id=1", "socket-id=0", "die-id=2"]]  # fmt: skip


def test_libvirt_gives_the_same_grid_and_cells() -> None:
    topo = load_topology(PRESET)
    root = ET.fromstring(domain_xml(topo, plan_placement(topo, HOST), BOOT, "qemu"))
    assert root.find("cpu/topology").attrib == {"sockets": "1", "dies": "3", "cores": "2", "threads": "1"}
    assert [(c.get("cpus"), c.get("memory")) for c in root.findall("cpu/numa/cell")] == [
        ("0-3", "524288"), ("4-5", "262144")]  # fmt: skip


# --- the kernel's view, the readback check and the LLC views ---------------------------------------------------


def test_prediction_node_0_has_two_llcs_node_1_one() -> None:
    topo = load_topology(PRESET)
    view = predict_cpus(topo, "6.1.0-18-amd64")
    assert [c["l3_cpus"] for c in view["cpus"]] == ["0-1", "0-1", "2-3", "2-3", "4-5", "4-5"]
    assert view["packages"] == 1 and view["numa_in_package"]
    # no DIE/PKG level (a package of two nodes); node 1's NODE level is its MC span, so MC is all below NUMA
    assert domains(topo) == [[("MC", "0-1")]] * 2 + [[("MC", "2-3")]] * 2 + [[("MC", "4-5")]] * 2
    assert domains(topo, "6.12.57+deb13-amd64") == domains(topo)


def test_smt_on_an_uneven_grid() -> None:
    topo = load_spec(spec([{"cpus": 8, "llcs": 2}, {"cpus": 4}], packages=1, threads=2), "t")
    assert domains(topo)[0] == [("SMT", "0-1"), ("MC", "0-3")] and domains(topo)[8] == [("SMT", "8-9"), ("MC", "8-11")]


def _seen(topo) -> dict:
    """The guest's view as lab.analysis.cpu_readback.read_cpus gives it, made from a prediction."""
    cpus = {}
    for v, c in enumerate(predict_cpus(topo)["cpus"]):
        caches = {"L1d": str(v), "L1i": str(v), "L2": c["l2_cpus"], "L3": c["l3_cpus"]}
        cpus[str(v)] = {"package": c["package"], "die": c["die"], "cluster": 0, "core": c["core"],
                        "thread_siblings": c["core_cpus"], "caches": caches}  # fmt: skip
    return {"vendor": "GenuineIntel", "cpus": cpus}


def test_readback_check_holds_the_uneven_prediction() -> None:
    """A guest that saw one LLC a node (node 0's four CPUs sharing an L3, the shape the grid would have without
    node 0's llcs: 2) is a mismatch named at the first CPU; the predicted view is not."""
    topo = load_topology(PRESET)
    assert check_cpus(topo, _seen(topo), {}, "6.1.0") == []
    flat = load_spec(spec([{"cpus": 4, "llcs": 1}, {"cpus": 4, "llcs": 1}], packages=1), "t")
    seen = _seen(flat)
    seen["cpus"] = {k: v for k, v in seen["cpus"].items() if int(k) < 6}
    problems = check_cpus(topo, seen, {}, "6.1.0")
    assert problems and problems[0].startswith("cpu 0 die siblings '0-3' != predicted '0-1'")


def test_llc_views_and_host_llc_pins_see_three_llcs() -> None:
    topo = load_topology(PRESET)
    assert [(x["cpus"], x["node"], x["package"]) for x in llcs(topo)] == [("0-1", 0, 0), ("2-3", 0, 0), ("4-5", 1, 0)]
    assert llc_of(topo) == {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2}
    # a host with two L3s a node whose CPUs interleave: each guest LLC lands on one of them
    host = host_inventory(
        HostNode(0, (0, 1, 2, 3), 65536, 60000),
        HostNode(1, (4, 5, 6, 7), 65536, 60000),
        distances=((10, 21), (21, 10)),
        llcs=((0, 2), (1, 3), (4, 6), (5, 7)),
    )
    p = plan_placement(topo, host)
    assert [p.cpuset(v) for v in range(6)] == ["0", "2", "1", "3", "4", "6"]
    assert [r["backed"] for r in p.llc_map] == [True, True, True]


def test_topo_show_says_the_llcs_of_each_node() -> None:
    proc = numalab("topo", "show", PRESET)
    assert proc.returncode == 0, proc.stderr
    assert "uneven LLCs a node (node 0 2, node 1 1), 2 node(s) a package" in proc.stdout
    assert "  package 0  LLC cpus 4-5" in proc.stdout


# --- what QEMU cannot express: one line naming the field -------------------------------------------------------


@pytest.mark.parametrize(
    "nodes,extra,needle",
    [
        # LLCs of different sizes: a 3-core and a 2-core one
        ([{"cpus": 3, "llcs": 1}, {"cpus": 2, "llcs": 1}], {"packages": 1},
         "nodes[1].llcs: node 1's LLCs would be 2 CPUs (2 in 1) and node 0's 3 (3 in 1); QEMU's -smp is a uniform "
         "grid"),
        ([{"cpus": 6, "llcs": 2}, {"cpus": 2}], {"packages": 1}, "nodes[1].llcs: node 1's LLCs would be 2 CPUs"),
        ([{"cpus": 4, "llcs": 2}, {"cpus": 2}], {},
         "packages: nodes of 2 and 1 LLCs cannot each be a package (QEMU gives every package the same number of dies)"),
        ([{"cpus": 4, "llcs": 2}, {"cpus": 2}], {"packages": 2},
         "packages: 3 LLCs do not split evenly into 2 packages (QEMU's -smp gives every package the same number of "
         "dies); 1 would"),
        ([{"cpus": 2}, {"cpus": 4, "llcs": 2}, {"cpus": 2}], {"packages": 2},
         "packages: node 1's LLCs would be in packages 0 and 1 (2 LLC(s) a package, nodes laid over them in id "
         "order); a node cannot span two packages; 1 would do"),
        ([{"cpus": 0, "llcs": 1}, {"cpus": 2}], {}, "nodes[0].llcs: node 0 has no CPUs, so no LLC"),
        ([{"cpus": 3, "llcs": 2}, {"cpus": 2}], {"packages": 1},
         "nodes[0].llcs: node 0's 3 CPUs do not split into 2 LLCs of whole cores"),
        ([{"cpus": 4, "llcs": 0}, {"cpus": 2}], {"packages": 1}, "nodes[0].llcs"),
        ([{"cpus": 4, "llcs": 2}, {"cpus": 2}], {"packages": 1, "cores_per_cluster": 3},
         "cores_per_cluster: 2 cores an LLC do not split into clusters of 3"),
    ],
)  # fmt: skip
def test_what_qemu_cannot_express_is_one_line_naming_the_field(
    tmp_path: Path, nodes: list, extra: dict, needle: str
) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(spec(nodes, **extra)))
    assert_one_line_error(numalab("topo", "check", str(path)), needle)


def test_a_node_without_llcs_takes_llcs_per_node() -> None:
    topo = load_spec(spec([{"cpus": 4}, {"cpus": 2, "llcs": 1}], packages=1, llcs_per_node=2), "t")
    assert topo.cpu_grid.llc_counts == (2, 1)
    even = load_spec(spec([{"cpus": 4, "llcs": 2}, {"cpus": 4, "llcs": 2}]), "t")  # the same count: not uneven
    assert not even.cpu_grid.uneven and even.cpu_grid.llcs_per_node == 2 and even.cpu_grid.packages == 2


# --- importing an uneven machine --------------------------------------------------------------------------------


def test_a_machine_with_a_ccx_off_imports_with_each_nodes_llcs(tmp_path: Path) -> None:
    gm = read_hwloc_xml(CCD_OFF)
    g = derive_grid(gm)
    assert g.node_llcs == (2, 2, 2, 1) and g.llcs_per_node is None and g.packages == 1
    imported = grid_spec(gm, "ccd-off", None, 512)
    assert [(n["cpus"], n["llcs"]) for n in imported.data["nodes"]] == [(4, 2), (4, 2), (4, 2), (2, 1)]
    assert "# nodes have 1 or 2 L3s: each CPU node's own llcs: (an uneven machine)" in imported.text
    assert imported.topology is not None and imported.topology.cpu_grid.llc_counts == (2, 2, 2, 1)
    scaled = grid_spec(gm, "ccd-off", 4, 512)  # --cpus-per-node: the nodes of the fewest L3s, the others in step
    assert [n["cpus"] for n in scaled.data["nodes"]] == [8, 8, 8, 4]
    # the CLI round trip: import, check, show
    out = tmp_path / "ccd-off.yaml"
    assert numalab("topo", "import", str(CCD_OFF), "--out", str(out)).returncode == 0
    assert numalab("topo", "check", str(out)).returncode == 0
    show = numalab("topo", "show", str(out))
    assert "uneven LLCs a node (node 0 2, node 1 2, node 2 2, node 3 1)" in show.stdout, show.stderr


def test_packages_of_different_l3_counts_drop_the_llcs_with_a_comment() -> None:
    """Two packages, one holding nodes of 2 and 1 L3s, the other one node of 1: QEMU cannot give the packages
    different dies, so the import keeps one LLC a node and says why."""
    nodes = [[0, 1, 2, 3], [4, 5], [6, 7]]
    groups = CpuGroups(packages=(frozenset(range(6)), frozenset({6, 7})),
                       llcs=tuple(frozenset(g) for g in ([0, 1], [2, 3], [4, 5], [6, 7])))  # fmt: skip
    m = Machine(tuple(MachineNode(i, tuple(c), 1024) for i, c in enumerate(nodes)),
                ((10, 20, 20), (20, 10, 20), (20, 20, 10)), "test", groups=groups)  # fmt: skip
    g = derive_grid(m)
    assert g.packages is None and g.node_llcs == () and g.llcs_per_node is None
    assert "packages hold 1 or 3 L3s (QEMU gives every package the same dies)" in g.comments["packages"]
    assert "need the packages" in g.comments["llcs_per_node"]


def test_a_cpu_less_node_between_uneven_nodes_holds_no_die() -> None:
    """A CPU-less node (memory only) takes no die: the dies go to nodes 0 and 2, and errors name the node id."""
    topo = load_spec(spec([{"cpus": 4, "llcs": 2}, {"cpus": 0}, {"cpus": 2}], packages=1), "t")
    assert topo.cpu_grid.llc_counts == (2, 1)
    assert [(c["node"], c["die"]) for c in predict_cpus(topo)["cpus"]][-2:] == [(2, 2), (2, 2)]
    argv = qemu_argv(topo, plan_placement(topo, HOST), BOOT)
    assert [a for a in argv if a.startswith("cpu,node-id=2")][0].startswith("cpu,node-id=2,socket-id=0,die-id=2")
    with pytest.raises(LabError, match=r"^t: packages: node 2's LLCs would be in packages 1 and 2"):
        load_spec(spec([{"cpus": 2}, {"cpus": 0}, {"cpus": 4, "llcs": 2}, {"cpus": 2}], packages=4), "t")
