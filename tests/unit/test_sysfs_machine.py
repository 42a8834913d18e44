"""One reader of a sysfs copy into a Machine (lab.topology.model.sysfs_machine), under its trust: STRICT refuses
what BEST_EFFORT (this host, for placement) leaves out, and the host's inventory no longer raises on a file it
cannot read."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.errors import LabError
from lab.placement.host_inventory import read_inventory
from lab.topology.model.sysfs import Trust
from lab.topology.model.sysfs_machine import read_machine


def _node(root: Path, node: int, cpulist: str, kib: int, distance: str | None) -> None:
    d = root / "node" / f"node{node}"
    d.mkdir(parents=True)
    (d / "cpulist").write_text(cpulist + "\n")
    (d / "meminfo").write_text(f"Node {node} MemTotal:       {kib} kB\nNode {node} MemFree:   {kib // 2} kB\n")
    if distance is not None:
        (d / "distance").write_text(distance + "\n")


def test_both_trusts_read_a_good_copy_alike(tmp_path: Path) -> None:
    _node(tmp_path, 0, "0-1", 1 << 20, "10 21")
    _node(tmp_path, 1, "2-3", 2 << 20, "21 10")
    strict = read_machine(tmp_path, Trust.STRICT)
    assert read_machine(tmp_path, Trust.BEST_EFFORT) == strict
    assert [(n.id, n.cpus, n.memory_mib) for n in strict.nodes] == [(0, (0, 1), 1024), (1, (2, 3), 2048)]
    assert strict.distances == ((10, 21), (21, 10)) and strict.groups is None


def test_best_effort_leaves_out_what_strict_refuses(tmp_path: Path) -> None:
    _node(tmp_path, 0, "zero", 1 << 20, "10 21")
    _node(tmp_path, 1, "2-3", 2 << 20, None)
    with pytest.raises(LabError, match="node0/cpulist: cannot read the CPU list 'zero'"):
        read_machine(tmp_path, Trust.STRICT)
    m = read_machine(tmp_path, Trust.BEST_EFFORT)
    assert [(n.id, n.cpus) for n in m.nodes] == [(0, ()), (1, (2, 3))]
    assert m.distances == ((10, 20), (20, 10))  # a row not read: ACPI's default
    (tmp_path / "node" / "node0" / "meminfo").write_text("nothing\n")
    assert read_machine(tmp_path, Trust.BEST_EFFORT).nodes[0].memory_mib == 0


def test_best_effort_reads_columns_by_node_id_and_a_missing_tree_as_no_nodes(tmp_path: Path) -> None:
    """(A row as long as the highest id + 1: each node's column at its id, as the host's reader always did.)"""
    _node(tmp_path, 0, "0-1", 1 << 20, "10 99 21")
    _node(tmp_path, 2, "2-3", 1 << 20, "21 99 10")
    assert read_machine(tmp_path, Trust.BEST_EFFORT).distances == ((10, 21), (21, 10))
    assert read_machine(tmp_path / "missing", Trust.BEST_EFFORT).nodes == ()
    with pytest.raises(LabError, match="missing: not a directory"):
        read_machine(tmp_path / "missing", Trust.STRICT)


def test_the_inventory_of_a_host_with_an_unreadable_cpulist(tmp_path: Path) -> None:
    _node(tmp_path, 0, "0-1", 4 << 20, "10 21")
    _node(tmp_path, 1, "zero", 4 << 20, "21 10")
    inv = read_inventory(tmp_path / "node", tmp_path / "meminfo")
    assert [(n.id, n.cpus, n.mem_total_mib, n.mem_available_mib) for n in inv.nodes] == [
        (0, (0, 1), 4096, 2048), (1, (), 4096, 2048)]  # fmt: skip
    assert inv.distances == ((10, 21), (21, 10))


def test_cache_sizes_and_a_bad_one(tmp_path: Path) -> None:
    """The L2s and L3s with their sizes; a size that is not one is refused by STRICT, naming the file, and left
    out by BEST_EFFORT."""
    _node(tmp_path, 0, "0-1", 1 << 20, "10")
    for cpu in (0, 1):
        (tmp_path / "cpu" / f"cpu{cpu}" / "topology").mkdir(parents=True)
        (tmp_path / "cpu" / f"cpu{cpu}" / "topology" / "physical_package_id").write_text("0\n")
        (tmp_path / "cpu" / f"cpu{cpu}" / "topology" / "thread_siblings_list").write_text(f"{cpu}\n")
        for i, (level, shared, size) in enumerate([(2, str(cpu), "1024K"), (3, "0-1", "32768K")]):
            d = tmp_path / "cpu" / f"cpu{cpu}" / "cache" / f"index{i}"
            d.mkdir(parents=True)
            for name, text in (("level", level), ("type", "Unified"), ("shared_cpu_list", shared), ("size", size)):
                (d / name).write_text(f"{text}\n")
    caches = read_machine(tmp_path, Trust.STRICT).groups.caches
    assert [(c.level, sorted(c.cpus), c.size_kib) for c in caches] == [
        (2, [0], 1024),
        (2, [1], 1024),
        (3, [0, 1], 32768),
    ]
    (tmp_path / "cpu" / "cpu0" / "cache" / "index1" / "size").write_text("big\n")
    with pytest.raises(LabError, match="cpu0/cache/index1/size: not a cache size"):
        read_machine(tmp_path, Trust.STRICT)
    assert read_machine(tmp_path, Trust.BEST_EFFORT).groups.caches[-1].size_kib == 32768  # (cpu1's)
