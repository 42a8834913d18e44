"""The guest's topology readback as it writes it (grep -H output), and as older records have it."""

from __future__ import annotations

from pathlib import Path

from lab.analysis.readback import read_topology

N = "/sys/devices/system/node"
RAW = f"""\
{N}/node0/cpulist:0-1
{N}/node1/cpulist:
{N}/node0/distance:10 20
{N}/node1/distance:20 10
/sys/devices/system/cpu/online:0-1
{N}/node0/meminfo:Node 0 MemTotal:         469116 kB
{N}/node1/meminfo:Node 1 MemTotal:         516096 kB
"""
EXPECTED = {
    "nodes": {
        0: {"cpus": [0, 1], "distances": [10, 20], "memtotal_mib": 458},
        1: {"cpus": [], "distances": [20, 10], "memtotal_mib": 504},
    },
    "online": "0-1",
}


def test_grep_output_of_a_cpu_less_node(tmp_path) -> None:
    (tmp_path / "topology.txt").write_text(RAW)
    assert read_topology(tmp_path) == EXPECTED


def test_records_made_before_keep_reading(tmp_path) -> None:
    old = (
        "node 0 cpulist 0-1\nnode 1 cpulist \nnode 0 distance 10 20\nnode 1 distance 20 10\n"
        "node 0 memtotal_kb 469116\nnode 1 memtotal_kb 516096\nonline 0-1\n"
    )
    (tmp_path / "topology.txt").write_text(old)
    assert read_topology(tmp_path) == EXPECTED
    recorded = Path(__file__).resolve().parents[1] / "data" / "runs" / "ring4-numa01-on-1"
    topo = read_topology(recorded)
    assert topo["online"] == "0-7" and topo["nodes"][3]["cpus"] == [6, 7]


def test_no_readback(tmp_path) -> None:
    assert read_topology(tmp_path) is None
