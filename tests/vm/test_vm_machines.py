"""Known answers on the machines of issue #48 that a boot alone does not show (each preset's CPU view, LLCs
and the SNC-3 machine's complaints are checked in test_vm_presets.py): the memoryless node, and a sched
debugfs knob beyond NUMA balancing's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import REPO, numalab

pytestmark = pytest.mark.vm

WORKLOADS = REPO / "tests" / "data" / "workloads"


def run(tmp_path: Path, *args: str) -> dict:
    proc = numalab("run", "--topology", "memoryless-3", "--out", str(tmp_path / "r"), "--json", "--timeout", "240",
                   *args, timeout=300)  # fmt: skip
    manifest = json.loads(proc.stdout) if proc.stdout.strip() else {}
    assert proc.returncode == 0 and manifest["status"] == "ok", proc.stderr[-3000:]
    return manifest


def test_memoryless_node_takes_its_memory_from_the_nearest_node_with_memory(tmp_path: Path) -> None:
    """memoryless-3: node 1 has CPUs 2-3 and no memory; node 0 is 20 away, node 2 30. A task bound to node 1's
    CPUs writing 32 MiB of tmpfs gets it from node 0 (the kernel's fallback list, nearest first)."""
    m = run(tmp_path, "--workload", str(WORKLOADS / "memless.yaml"), "--duration", "1", "--no-trace")
    node1 = m["guest_topology"]["readback"]["nodes"]["1"]
    assert node1["cpus"] == [2, 3] and node1["memtotal_mib"] == 0
    got = m["workload"]["result"]
    assert got["node0_kib"] >= 30 * 1024, got  # (32 MiB, less what tmpfs wrote before its first page)
    assert got["node1_kib"] == 0 and got["node2_kib"] < 1024, got


def test_memoryless_node_numa01_with_balancing_completes_and_is_traced(tmp_path: Path) -> None:
    # (and a sched debugfs knob outside numa_balancing/, as a cache-aware kernel's llc_balancing/ ones are set,
    # read back: the same boot)
    m = run(tmp_path, "--workload", "numa01", "--duration", "3", "--numa-balancing", "on",
            "--knob", "domains/cpu0/domain1/imbalance_pct=117")  # fmt: skip
    assert "domains/cpu0/domain1/imbalance_pct 117" in m["settings"]["readback"]
    vm = m["metrics"]["vmstat"]
    assert vm["numa_hint_faults"] > 0 and vm["numa_pages_migrated"] > 0, vm
    events = m["metrics"]["events"]
    assert events["mm_migrate_pages"] > 0, events
    assert all(f"sched_{k}_numa" in events for k in ("move", "swap", "stick")), events
    assert (tmp_path / "r" / "trace.dat").stat().st_size > 0
