"""A guest LLC on a host LLC (issue #48): pins that keep a guest LLC's vCPUs on one host LLC, and the record of
which guest LLCs a real one backs. The host is fabricated: this machine has one L3 (lab.placement.llc_backing)."""

from __future__ import annotations

from pathlib import Path

from common import HOST, host_inventory

from lab.placement.host_inventory import HostNode, read_inventory, usable_llcs
from lab.placement.pinning import plan_placement
from lab.topology.model.spec import load_topology
from lab.topology.model.sysfs import Trust
from lab.topology.model.sysfs_machine import read_machine

# Two host nodes of 4 CPUs, each with two L3s whose CPUs interleave (0,2 and 1,3): pins in CPU order would
# split every guest LLC across two host L3s.
INTERLEAVED = host_inventory(
    HostNode(0, (0, 1, 2, 3), 65536, 60000),
    HostNode(1, (4, 5, 6, 7), 65536, 60000),
    distances=((10, 21), (21, 10)),
    llcs=((0, 2), (1, 3), (4, 6), (5, 7)),
)
ONE_L3_A_NODE = host_inventory(*INTERLEAVED.nodes, distances=INTERLEAVED.distances, llcs=((0, 1, 2, 3), (4, 5, 6, 7)))


def test_guest_llcs_land_on_host_llcs_and_are_recorded_as_backed() -> None:
    p = plan_placement(load_topology("spr-2s-2llc"), INTERLEAVED)
    assert p.pinning == "cpu"
    assert [p.cpuset(v) for v in range(8)] == ["0", "2", "1", "3", "4", "6", "5", "7"]
    assert [(r["guest_cpus"], r["host_cpus"], r["backed"]) for r in p.llc_map] == [
        ("0-1", "0,2", True), ("2-3", "1,3", True), ("4-5", "4,6", True), ("6-7", "5,7", True)]  # fmt: skip
    assert not any("LLC" in n for n in p.notes)


def test_a_host_llc_too_small_or_shared_is_not_backing() -> None:
    # one host L3 a node: the guest's two LLCs of a node share it
    host = ONE_L3_A_NODE
    p = plan_placement(load_topology("spr-2s-2llc"), host)
    assert [r["backed"] for r in p.llc_map] == [False, False, False, False]
    assert any("guest LLCs 0-1, 2-3, 4-5, 6-7 are not each on a host LLC" in n for n in p.notes)


def test_without_the_hosts_caches_pins_are_as_before_and_backing_unknown() -> None:
    topo = load_topology("spr-2s-2llc")
    p = plan_placement(topo, HOST)
    assert [p.cpuset(v) for v in range(8)] == ["0", "1", "2", "3", "4", "5", "6", "7"]
    assert {r["backed"] for r in p.llc_map} == {None}
    # a machine without a grid: recorded, never a note (an LLC a node: the distance notes speak of it)
    ring = plan_placement(load_topology("ring-4"), ONE_L3_A_NODE)
    assert len(ring.llc_map) == 4 and not any("LLC" in n for n in ring.notes)


def test_the_hosts_llcs_from_a_sysfs_copy(tmp_path: Path) -> None:
    """The host's L3s are its machine's (lab.topology.model.sysfs_machine, best effort), cut to the CPUs this
    process may use; a cache file that cannot be read leaves that CPU's cache out."""
    node = tmp_path / "node" / "node0"
    node.mkdir(parents=True)
    (node / "cpulist").write_text("0-3\n")
    for cpu, (l2, l3) in enumerate([("0", "0-1"), ("1", "0-1"), ("2", "2-3"), ("3", "2-3")]):
        for i, (level, shared) in enumerate([(2, l2), (3, l3)]):
            d = tmp_path / "cpu" / f"cpu{cpu}" / "cache" / f"index{i}"
            d.mkdir(parents=True)
            (d / "level").write_text(f"{level}\n")
            (d / "shared_cpu_list").write_text(shared + "\n")
    machine = read_machine(tmp_path, Trust.BEST_EFFORT)
    assert usable_llcs(machine, (0, 1, 2, 3)) == ((0, 1), (2, 3))
    assert usable_llcs(machine, (0, 1, 2)) == ((0, 1), (2,))  # only the CPUs this process may use
    for cpu in (2, 3):
        (tmp_path / "cpu" / f"cpu{cpu}" / "cache" / "index1" / "shared_cpu_list").write_text("garbage\n")
    assert usable_llcs(read_machine(tmp_path, Trust.BEST_EFFORT), (2, 3)) == ()
    # read_inventory reads them beside its node directory, this host's affinity the CPUs it may use
    inventory = read_inventory(tmp_path / "node", tmp_path / "meminfo")
    assert inventory.llcs == usable_llcs(read_machine(tmp_path, Trust.BEST_EFFORT), inventory.online_cpus)
    assert set(inventory.llcs) <= {(0, 1), (0,), (1,)}
