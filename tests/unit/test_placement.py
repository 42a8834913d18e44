"""lab.placement, lab.placement.host_inventory and lab.cpulist, on synthetic hosts (no VMs)."""

from __future__ import annotations

import os
import random
from dataclasses import replace
from pathlib import Path

import pytest
from common import HOST
from common import host_inventory as host

from lab.cpulist import format_cpulist, parse_cpulist
from lab.errors import LabError
from lab.placement.host_inventory import HostNode, read_inventory
from lab.placement.pinning import QEMU_OVERHEAD_MIB, Backing, plan_placement
from lab.topology.model.spec import load_topology, preset_names

ONE_NODE = host(HostNode(0, (0, 1, 2, 3), 32768, 30000, {2048: 10000}))


# --- where guest nodes go --------------------------------------------------------------


@pytest.mark.parametrize("name", preset_names())
def test_one_host_node_binds_everything_to_it_and_says_so(name):
    topo = load_topology(name)
    plan = plan_placement(topo, ONE_NODE)
    assert plan.memory_host_nodes == (0,) * topo.n_nodes
    assert set().union(*plan.vcpu_pins) <= set(ONE_NODE.nodes[0].cpus)
    assert len(plan.vcpu_pins) == topo.total_cpus
    note = plan.notes[0]
    assert "one NUMA node" in note and "host node 0" in note and "emulated" in note


@pytest.mark.parametrize("name", ["ring-4", "grid-2x4", "seed000-4node", "mesh-2"])
def test_two_host_nodes_round_robin_and_pin_within_the_host_node(name):
    topo = load_topology(name)
    plan = plan_placement(topo, HOST)
    assert plan.memory_host_nodes == tuple(i % 2 for i in range(topo.n_nodes))
    host_cpus = {n.id: set(n.cpus) for n in HOST.nodes}
    for guest_node, vcpus in enumerate(topo.node_cpus()):
        host_node = plan.memory_host_nodes[guest_node]
        assert set().union(*(plan.vcpu_pins[v] for v in vcpus)) <= host_cpus[host_node]
    # 8 host CPUs are enough for these guests: each vCPU has one of its own.
    assert plan.pinning == "cpu" and all(len(p) == 1 for p in plan.vcpu_pins)
    assert len(set(plan.vcpu_pins)) == len(plan.vcpu_pins)
    assert plan.warnings == ()


def test_more_guest_nodes_than_host_nodes_is_noted():
    plan = plan_placement(load_topology("ring-4"), HOST)
    assert any("4 guest nodes share 2 host nodes" in n for n in plan.notes)
    assert plan_placement(load_topology("ring-2"), HOST).notes == ()


def test_host_nodes_without_memory_get_no_guest_memory():
    cpu_only = host(
        HostNode(0, (0, 1), 0, 0),
        HostNode(1, (2, 3), 16384, 16000),
        HostNode(2, (4, 5), 16384, 16000),
    )
    topo = load_topology("ring-4")
    plan = plan_placement(topo, cpu_only)
    assert plan.memory_host_nodes == (1, 2, 1, 2)
    for guest_node, vcpus in enumerate(topo.node_cpus()):
        host_node = cpu_only.nodes[plan.memory_host_nodes[guest_node]]
        assert set().union(*(plan.vcpu_pins[v] for v in vcpus)) <= set(host_node.cpus)


# --- overcommit ----------------------------------------------------------------------------


def test_more_vcpus_than_host_cpus_warns():
    topo = load_topology("ring-4").with_overrides(cpus_per_node=3)  # 12 vCPUs, 8 host CPUs
    plan = plan_placement(topo, HOST)
    assert len(plan.vcpu_pins) == 12
    assert len(plan.warnings) == 1
    assert "overcommit" in plan.warnings[0] and "12 vCPUs" in plan.warnings[0]
    # auto: each vCPU floats over its host node's CPUs instead of sharing one CPU in lock-step
    assert plan.pinning == "node" and plan.pinning_policy == "auto"
    for guest_node, vcpus in enumerate(topo.node_cpus()):
        host_node = HOST.nodes[plan.memory_host_nodes[guest_node]]
        assert all(plan.vcpu_pins[v] == host_node.cpus for v in vcpus)
    assert plan.to_dict()["vcpu_pins"][0] == format_cpulist(HOST.nodes[0].cpus)
    assert any("pinned to its host node's CPUs" in n for n in plan.notes)
    # cpu: one CPU each, shared round-robin, as asked
    forced = plan_placement(topo, HOST, pinning="cpu")
    assert forced.pinning == "cpu" and all(len(p) == 1 for p in forced.vcpu_pins)
    assert len(set(forced.vcpu_pins)) == HOST.n_cpus


def test_under_the_virtual_clock_more_vcpus_than_host_cpus_is_a_note_not_a_warning():
    """One host thread runs every vCPU there: 12 vCPUs on 8 host CPUs crowd nothing."""
    topo = load_topology("ring-4").with_overrides(cpus_per_node=3)
    plan = plan_placement(topo, HOST, one_thread=True)
    assert plan.warnings == () and any("one host thread" in n for n in plan.notes)
    assert plan.vcpu_pins == plan_placement(topo, HOST).vcpu_pins


def test_a_crowded_host_node_warns_even_if_the_total_fits():
    """6 + 2 host CPUs hold 4 + 4 vCPUs in total, but host node 0 has 4 vCPUs on 2 CPUs."""
    uneven = host(HostNode(0, (0, 1), 16384, 16000), HostNode(1, (2, 3, 4, 5, 6, 7), 16384, 16000))
    topo = load_topology("mesh-2").with_overrides(cpus_per_node=4)
    assert topo.total_cpus == uneven.n_cpus
    plan = plan_placement(topo, uneven, pinning="cpu")
    assert len(set(plan.vcpu_pins)) < len(plan.vcpu_pins)
    assert any("overcommit" in w and "2 vCPUs share" in w for w in plan.warnings)
    auto = plan_placement(topo, uneven)
    assert auto.pinning == "node"
    assert auto.vcpu_pins == ((0, 1),) * 4 + ((2, 3, 4, 5, 6, 7),) * 4


def test_node_pinning_when_asked_even_if_cpus_suffice():
    plan = plan_placement(load_topology("ring-2"), HOST, pinning="node")
    assert plan.pinning == "node" and plan.pinning_policy == "node"
    assert plan.vcpu_pins == (HOST.nodes[0].cpus,) * 2 + (HOST.nodes[1].cpus,) * 2
    assert plan.warnings == ()


def test_only_the_cpus_this_process_may_use_are_pinned_to():
    """online_cpus is the process's affinity (taskset, or the matrix runner's share of the host)."""
    share = replace(HOST, online_cpus=(2, 3, 4, 5))
    plan = plan_placement(load_topology("ring-2").with_overrides(cpus_per_node=1), share)
    assert plan.pinning == "cpu"
    assert set().union(*plan.vcpu_pins) <= {2, 3, 4, 5}
    # ring-2 with 4 vCPUs a node: 8 vCPUs on 4 usable CPUs
    crowded = plan_placement(load_topology("ring-2").with_overrides(cpus_per_node=4), share)
    assert crowded.pinning == "node"
    assert {crowded.vcpu_pins[0], crowded.vcpu_pins[-1]} == {
        tuple(c for c in HOST.nodes[0].cpus if c in share.online_cpus),
        tuple(c for c in HOST.nodes[1].cpus if c in share.online_cpus),
    }


def test_a_host_node_with_no_usable_cpu_borrows_the_usable_ones():
    share = replace(HOST, online_cpus=HOST.nodes[1].cpus)
    plan = plan_placement(load_topology("ring-2").with_overrides(cpus_per_node=1), share)
    assert set().union(*plan.vcpu_pins) <= set(HOST.nodes[1].cpus)
    assert any("host node 0 has none of the host CPUs" in n for n in plan.notes)


def test_unknown_pinning():
    with pytest.raises(LabError, match="--pinning socket"):
        plan_placement(load_topology("ring-2"), HOST, pinning="socket")


# --- memory ----------------------------------------------------------------------------------


def test_memory_that_does_not_fit_names_the_host_node():
    # Host node 1 has room for one 512M guest node with QEMU's overhead but not for two.
    tight = host(HostNode(0, (0, 1), 65536, 60000), HostNode(1, (2, 3), 4096, 1024 + QEMU_OVERHEAD_MIB - 1))
    with pytest.raises(LabError) as err:
        plan_placement(load_topology("ring-4"), tight)
    message = str(err.value)
    assert message.startswith("memory:")
    assert "host node 1" in message and "1024 MiB" in message
    roomy = host(HostNode(0, (0, 1), 65536, 60000), HostNode(1, (2, 3), 4096, 1024 + QEMU_OVERHEAD_MIB))
    assert plan_placement(load_topology("ring-4"), roomy).memory_host_nodes == (0, 1, 0, 1)


def test_too_few_free_hugepages():
    # ring-4 puts 2 x 512M on each host node: 512 pages of 2 MiB; node 1 has 511 free.
    short = host(HostNode(0, (0, 1), 65536, 60000, {2048: 512}), HostNode(1, (2, 3), 65536, 60000, {2048: 511}))
    with pytest.raises(LabError) as err:
        plan_placement(load_topology("ring-4"), short, Backing("hugepages"))
    message = str(err.value)
    assert "host node 1" in message and "nr_hugepages" in message
    assert "node1/hugepages/hugepages-2048kB" in message


def test_enough_free_hugepages():
    enough = host(HostNode(0, (0, 1), 65536, 60000, {2048: 512}), HostNode(1, (2, 3), 65536, 60000, {2048: 512}))
    plan = plan_placement(load_topology("ring-4"), enough, Backing("hugepages", prealloc=True))
    assert plan.memory_host_nodes == (0, 1, 0, 1)
    assert plan.backing.kind == "hugepages"


def test_hugepages_of_another_size_do_not_count():
    gigantic_only = host(HostNode(0, (0, 1), 65536, 60000, {1048576: 64}))
    with pytest.raises(LabError, match="nr_hugepages"):
        plan_placement(load_topology("ring-2"), gigantic_only, Backing("hugepages"))


def test_guest_nodes_must_be_whole_hugepages():
    with pytest.raises(LabError, match="memory: guest node 0"):
        plan_placement(load_topology("ring-2"), HOST, Backing("hugepages", hugepage_kib=1048576))


@pytest.mark.parametrize("kind", ["tmpfs", "", "HugePages"])
def test_unknown_backing_kind(kind):
    with pytest.raises(LabError, match="backing"):
        Backing(kind)


# --- reading the host ----------------------------------------------------------------------


def write_node(root: Path, node: int, cpulist: str, kb: dict[str, int], huge: dict[int, int]) -> None:
    d = root / f"node{node}"
    (d / "hugepages").mkdir(parents=True)
    (d / "cpulist").write_text(cpulist + "\n")
    (d / "meminfo").write_text("".join(f"Node {node} {key}:{value:>16} kB\n" for key, value in kb.items()))
    for size, free in huge.items():
        h = d / "hugepages" / f"hugepages-{size}kB"
        h.mkdir()
        (h / "nr_hugepages").write_text(f"{free + 1}\n")
        (h / "free_hugepages").write_text(f"{free}\n")


def write_meminfo(path: Path, total_kb: int, available_kb: int) -> Path:
    path.write_text(f"MemTotal:       {total_kb} kB\nMemFree:        1024 kB\nMemAvailable:   {available_kb} kB\n")
    return path


def test_read_inventory_two_nodes(tmp_path):
    sysfs = tmp_path / "node"
    write_node(
        sysfs,
        0,
        "0-3,8",
        {"MemTotal": 8 * 1048576, "MemFree": 3 * 1048576, "Inactive(file)": 1048576 + 1023},
        {2048: 100, 1048576: 2},
    )
    write_node(sysfs, 1, "4-7", {"MemTotal": 4 * 1048576, "MemFree": 1048576, "Inactive(file)": 0}, {2048: 0})
    for name in ("possible", "online", "has_cpu"):
        (sysfs / name).write_text("0-1\n")
    meminfo = write_meminfo(tmp_path / "meminfo", 12 * 1048576, 6 * 1048576 + 512)

    inv = read_inventory(sysfs, meminfo)

    assert [n.id for n in inv.nodes] == [0, 1]
    assert inv.nodes[0].cpus == (0, 1, 2, 3, 8)
    assert inv.nodes[1].cpus == (4, 5, 6, 7)
    assert [n.mem_total_mib for n in inv.nodes] == [8192, 4096]
    # Free plus inactive page cache, whole MiB rounded down.
    assert [n.mem_available_mib for n in inv.nodes] == [4096, 1024]
    assert inv.nodes[0].hugepages_free == {2048: 100, 1048576: 2}
    assert inv.nodes[1].hugepages_free == {2048: 0}
    assert inv.mem_available_mib == 6144
    assert inv.online_cpus == tuple(sorted(os.sched_getaffinity(0)))


def test_read_inventory_one_node_prefers_proc_meminfo(tmp_path):
    sysfs = tmp_path / "node"
    write_node(sysfs, 0, "0-1", {"MemTotal": 1048576, "MemFree": 512 * 1024}, {2048: 7})
    meminfo = write_meminfo(tmp_path / "meminfo", 8 * 1048576, 5 * 1048576)
    inv = read_inventory(sysfs, meminfo)
    (node,) = inv.nodes
    assert node.cpus == (0, 1)
    assert node.mem_total_mib == 8192
    assert node.mem_available_mib == 5120
    assert node.hugepages_free == {2048: 7}


def test_read_inventory_without_numa_sysfs(tmp_path):
    meminfo = write_meminfo(tmp_path / "meminfo", 2 * 1048576, 1048576)
    inv = read_inventory(tmp_path / "missing", meminfo)
    (node,) = inv.nodes
    assert node.id == 0
    assert node.cpus == inv.online_cpus == tuple(sorted(os.sched_getaffinity(0)))
    assert (node.mem_total_mib, node.mem_available_mib) == (2048, 1024)


def test_plan_on_a_read_inventory(tmp_path):
    sysfs = tmp_path / "node"
    for node in (0, 1):
        write_node(sysfs, node, f"{4 * node}-{4 * node + 3}", {"MemTotal": 8388608, "MemFree": 4194304}, {})
    inv = read_inventory(sysfs, write_meminfo(tmp_path / "meminfo", 16777216, 8388608))
    plan = plan_placement(load_topology("ring-4"), inv)
    assert plan.memory_host_nodes == (0, 1, 0, 1)
    assert plan.host_nodes == 2


# --- cpulists --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, cpus",
    [("", []), ("0", [0]), ("0-3,8,10-11\n", [0, 1, 2, 3, 8, 10, 11]), ("5-5", [5]), ("1,3,5", [1, 3, 5])],
)
def test_parse_cpulist(text, cpus):
    assert parse_cpulist(text) == cpus


@pytest.mark.parametrize("seed", range(100))
def test_cpulist_round_trip(seed):
    rng = random.Random(seed)
    universe = rng.choice([8, 64, 300])
    cpus = [c for c in range(universe) if rng.random() < rng.random()]
    shuffled = cpus * rng.randint(1, 2)  # duplicates and any order are accepted
    rng.shuffle(shuffled)
    text = format_cpulist(shuffled)
    assert parse_cpulist(text) == cpus
    assert format_cpulist(parse_cpulist(text)) == text
    # Canonical: ascending runs with a gap between them, single CPUs not written as a range.
    runs = [part.split("-") for part in text.split(",")] if text else []
    bounds = [(int(r[0]), int(r[-1])) for r in runs]
    assert all(len(r) == 1 or int(r[0]) < int(r[1]) for r in runs)
    assert all(prev[1] + 1 < nxt[0] for prev, nxt in zip(bounds, bounds[1:]))
