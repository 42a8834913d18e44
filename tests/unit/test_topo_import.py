"""``numalab topo import``: numactl -H output and sysfs node directories -> spec files.

Unit tests read the parser directly and the CLI in a subprocess; the VM test boots the
spec imported from seed 000's numactl -H block and checks that the guest sees it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import REPO, assert_one_line_error, numalab

from lab.errors import LabError
from lab.topology.importers.topo_import import scaled_topology, to_spec_yaml, yaml_data
from lab.topology.model.numactl import parse_numactl
from lab.topology.model.spec import load_spec, load_topology
from lab.topology.model.sysfs_machine import read_sysfs
from lab.topology.predictions.kernel_view import predict

DATA = REPO / "tests" / "data" / "numactl"
# Seed 000's mail as posted to LKML (Srikar Dronamraju, "[PATCH 00/19] Fixes for sched/numa_balancing", June 2018),
# a copy of the seed thread 000_37ed6e66b18add46.txt, checked in so that the test below always runs.
SEED000 = DATA / "seed000-mail.txt"
SEED000_BLOCK = (DATA / "seed000.txt").read_text()


def _import(text: str, name: str = "t", cpus: int = 2, mem: int = 512):
    topo = scaled_topology(parse_numactl(text, "x.txt"), name, cpus, mem)
    return load_spec(yaml_data(to_spec_yaml(topo)), "x.yaml")


def test_seed000_block_imports_to_the_seed000_preset_distances():
    topo = _import(SEED000_BLOCK, "seed000-imported")
    preset = load_topology("seed000-4node")
    assert topo.distances == preset.distances
    assert [n.cpus for n in topo.nodes] == [n.cpus for n in preset.nodes]
    assert [n.memory_mib for n in topo.nodes] == [n.memory_mib for n in preset.nodes]
    assert predict(topo)["type"] == "NUMA_BACKPLANE"
    # The real machine's sizes are kept.
    for real in ("96 CPUs", "node 0: 24 CPUs, 32431 MiB", "node 2: 24 CPUs, 30425 MiB", "node 3: 24 CPUs, 32200 MiB"):
        assert real in topo.description


def test_the_whole_seed000_mail_imports_too():
    """The numactl block inside the mail, with the text around it."""
    machine = parse_numactl(SEED000.read_text(), "seed")
    assert [len(n.cpus) for n in machine.nodes] == [24] * 4
    assert machine.nodes[3].cpus == tuple(range(72, 96))
    assert machine.distances == load_topology("seed000-4node").distances


def test_cpuless_nodes_stay_cpuless_and_sizes_scale():
    topo = _import((DATA / "cxl-2socket.txt").read_text(), "cxl", cpus=4, mem=256)
    assert [n.cpus for n in topo.nodes] == [4, 4, 0, 0]
    assert [n.memory_mib for n in topo.nodes] == [256] * 4
    assert topo.distances[0] == (10, 21, 14, 24)
    assert predict(topo)["cpuless_nodes"] == [2, 3]
    assert "node 2: 0 CPUs, 131072 MiB" in topo.description
    assert "Scaled to 4 CPUs and 256M per node" in topo.description


def test_quoted_mail_and_sparse_node_ids_are_renumbered():
    topo = _import((DATA / "sparse.txt").read_text())
    assert topo.n_nodes == 2
    assert topo.distances == ((10, 32), (32, 10))
    assert "node ids [0, 2] renumbered 0..1" in topo.description


def _mutate(old: str, new: str) -> str:
    assert old in SEED000_BLOCK
    return SEED000_BLOCK.replace(old, new, 1)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (_mutate("1: 20 10 40 40", "1: 20 10 40"), "x.txt:18: distance row for node 1 has 3 values, expected 4"),
        (_mutate("3: 40 40 20 10\n", ""), "x.txt:19: the distance table ends without a row for node 3"),
        (_mutate("2: 40 40 10 20", "2: 40 40 12 20"), "x.txt:19: node 2's distance to itself is 12"),
        (_mutate("0: 10 20 40 40", "0: 10 10 40 40"), "x.txt:17: distance 0->1 is 10, expected 11..255"),
        (_mutate("0: 10 20 40 40", "0: 10 20 256 40"), "x.txt:17: distance 0->2 is 256"),
        (_mutate("node 0 1 2 3", "node 0 1 2"), "x.txt:16: the distance table's columns [0, 1, 2]"),
        (_mutate("available: 4 nodes (0-3)", "available: 5 nodes (0-3)"), "x.txt:2: says 5 nodes but lists 4"),
        (_mutate("available: 4 nodes (0-3)", "available: four"), "x.txt:2: expected 'available: N nodes (LIST)'"),
        (_mutate("node 2 size: 30425 MB\n", ""), "node 2 has no 'node 2 size:' line"),
        (_mutate("node 1 cpus: 24", "node 7 cpus: 24"), "x.txt:6: node 7 is not in 'available:'"),
        (_mutate("node 0 size: 32431 MB", "node 0 size: lots"), "x.txt:4: cannot read 'node 0 size: lots'"),
        (_mutate("node 1 cpus: 24", "node 1 cpus: 23"), "CPU 23 is listed for node 0 and node 1"),
        (SEED000_BLOCK.split("node distances:")[0], "no 'node distances:' table after line"),
        ("hello\nworld\n", "no 'available: N nodes (...)' line"),
    ],
)
def test_bad_or_partial_tables_name_the_line(text: str, needle: str):
    with pytest.raises(LabError) as err:
        parse_numactl(text, "x.txt")
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def _fake_sysfs(root: Path, nodes: dict[int, tuple[str, int, str]], online: str | None) -> Path:
    for node, (cpulist, kib, distance) in nodes.items():
        d = root / f"node{node}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpulist + "\n")
        (d / "meminfo").write_text(f"Node {node} MemTotal:       {kib} kB\nNode {node} MemFree: 1 kB\n")
        (d / "distance").write_text(distance + "\n")
    if online is not None:
        (root / "online").write_text(online + "\n")
    return root


def test_sysfs_with_a_cpuless_node(tmp_path):
    root = _fake_sysfs(
        tmp_path / "node",
        {0: ("0-7", 16 << 20, "10 20 17"), 1: ("8-15", 16 << 20, "20 10 28"), 2: ("", 8 << 20, "17 28 10")},
        "0-2",
    )
    m = read_sysfs(root)
    assert [len(n.cpus) for n in m.nodes] == [8, 8, 0]
    assert [n.memory_mib for n in m.nodes] == [16384, 16384, 8192]
    topo = scaled_topology(m, "box", 2, 512)
    assert [n.cpus for n in topo.nodes] == [2, 2, 0]
    assert topo.distances == ((10, 20, 17), (20, 10, 28), (17, 28, 10))


def test_sysfs_of_this_host_loads():
    topo = scaled_topology(read_sysfs(), "host", 1, 256)
    assert topo.n_nodes >= 1 and topo.distances[0][0] == 10


@pytest.mark.parametrize(
    ("nodes", "online", "needle"),
    [
        ({0: ("0-1", 1 << 20, "10 20")}, "0", "node0/distance: 2 distances for 1 nodes"),
        ({0: ("0-1", 1 << 20, "10 x")}, None, "node0/distance: not a row of numbers"),
        ({0: ("0-1", 1 << 20, "10")}, "0-1", "node1: missing, but online lists node 1"),
        ({0: ("zero", 1 << 20, "10")}, "0", "node0/cpulist: cannot read the CPU list 'zero'"),
    ],
)
def test_bad_sysfs_names_the_file(tmp_path, nodes, online, needle):
    root = _fake_sysfs(tmp_path / "node", nodes, online)
    with pytest.raises(LabError) as err:
        read_sysfs(root)
    assert needle in str(err.value)


# --- the CLI ------------------------------------------------------------------------------


def test_cli_import_writes_a_spec_that_checks(tmp_path):
    out = tmp_path / "seed.yaml"
    proc = numalab("topo", "import", str(DATA / "seed000.txt"), "--name", "seed000-imported", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert load_topology(str(out)).distances == load_topology("seed000-4node").distances
    check = numalab("topo", "check", str(out))
    assert check.returncode == 0 and "NUMA_BACKPLANE" in check.stdout


def test_cli_import_from_stdin_with_sizes_and_json(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lab.cli",
            "topo",
            "import",
            "-",
            "--cpus-per-node",
            "3",
            "--mem-per-node",
            "1G",
            "--json",
        ],
        input=(DATA / "cxl-2socket.txt").read_text(),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["topology"]["cpus"] == [3, 3, 0, 0]
    assert data["topology"]["memory_mib"] == [1024] * 4
    assert data["topology"]["name"] == "imported"
    assert "memory: 1G" in data["spec"]


def test_cli_import_bad_input_is_one_line_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text(_mutate("1: 20 10 40 40", "1: 20 10 40"))
    out = tmp_path / "out.yaml"
    proc = numalab("topo", "import", str(bad), "--out", str(out))
    assert_one_line_error(proc, f"{bad}:18:", "distance row for node 1")
    assert proc.returncode == 2
    assert not out.exists()
    assert_one_line_error(numalab("topo", "import", str(tmp_path / "none.txt")), "none.txt", "cannot read")
    assert_one_line_error(numalab("topo", "import"), "--from-sysfs")
    assert_one_line_error(numalab("topo", "import", str(DATA / "seed000.txt"), "--cpus-per-node", "200"), "288")
    assert_one_line_error(numalab("topo", "import", "--from-sysfs", str(tmp_path)), "no node directories")


def test_cli_topo_check_on_raw_numactl_output_points_at_import():
    proc = numalab("topo", "check", str(DATA / "seed000.txt"))
    assert_one_line_error(proc, "seed000.txt: this is numactl -H output, not a spec", "numalab topo import")
    assert proc.returncode == 2


# --- a real VM ----------------------------------------------------------------------------


@pytest.mark.vm
def test_imported_seed000_boots_and_verifies(tmp_path):
    spec = tmp_path / "seed000-imported.yaml"
    proc = numalab("topo", "import", str(DATA / "seed000.txt"), "--name", "seed000-imported", "--out", str(spec))
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "run"
    proc = numalab(
        "run",
        "--topology",
        str(spec),
        "--workload",
        "idle",
        "--duration",
        "1",
        "--no-trace",
        "--mem-per-node",
        "256M",
        "--out",
        str(out),
        "--json",
        "--timeout",
        "240",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = json.loads(proc.stdout)
    assert manifest["status"] == "ok", manifest.get("reason")
    assert manifest["guest_topology_ok"] is True
    readback = manifest["guest_topology"]["readback"]["nodes"]
    preset = load_topology("seed000-4node")
    for node in range(4):
        assert readback[str(node)]["distances"] == list(preset.distances[node])
        assert readback[str(node)]["cpus"] == [2 * node, 2 * node + 1]


@pytest.mark.vm
def test_imported_cxl_machine_with_slow_cpuless_nodes_boots_tiered(tmp_path):
    spec = tmp_path / "cxl.yaml"
    proc = numalab("topo", "import", str(DATA / "cxl-2socket.txt"), "--slow-cpuless", "--out", str(spec))
    assert proc.returncode == 0, proc.stderr
    proc = numalab(
        "run", "--topology", str(spec), "--workload", "idle", "--duration", "1", "--no-trace",
        "--out", str(tmp_path / "run"), "--json", "--timeout", "240", timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = json.loads(proc.stdout)
    assert manifest["status"] == "ok" and manifest["guest_topology_ok"] is True
    tiers = manifest["guest_topology"]["readback"]["memory_tiers"]["tiers"]
    assert tiers == {"memory_tier4": "0-1", "memory_tier22": "2-3"}


def test_sysfs_memory_tiers_mark_the_slow_nodes(tmp_path):
    root = _fake_sysfs(
        tmp_path / "devices" / "system" / "node",
        {
            0: ("0-7", 16 << 20, "10 20 14 24"),
            1: ("8-15", 16 << 20, "20 10 24 14"),
            2: ("", 8 << 20, "14 24 10 26"),
            3: ("", 8 << 20, "24 14 26 10"),
        },
        "0-3",
    )
    tiering = tmp_path / "devices" / "virtual" / "memory_tiering"
    for tier, nodes in (("memory_tier4", "0-1"), ("memory_tier22", "2-3")):
        (tiering / tier).mkdir(parents=True)
        (tiering / tier / "nodelist").write_text(nodes + "\n")
    m = read_sysfs(root)
    assert m.slow_nodes == (2, 3)
    topo = scaled_topology(m, "box", 2, 256)
    assert topo.tiers.slow_nodes == (2, 3) and "nodes [2, 3] are in a lower memory tier" in topo.description
    assert load_spec(yaml_data(to_spec_yaml(topo)), "x").tiers.slow_nodes == (2, 3)
    # a CPU-less node in the CPUs' tier is plain DRAM
    (tiering / "memory_tier22" / "nodelist").write_text("3\n")
    (tiering / "memory_tier4" / "nodelist").write_text("0-2\n")
    assert read_sysfs(root).slow_nodes == (3,)
    (tiering / "memory_tier4" / "nodelist").write_text("zero\n")
    with pytest.raises(LabError, match="memory_tier4/nodelist: cannot read the node list"):
        read_sysfs(root)


def test_a_memoryless_node_imports_as_one(tmp_path):
    """A node with CPUs and size 0 (numactl) or MemTotal 0 (sysfs) is a memoryless node, kept at memory 0 when
    the others are scaled; it boots (tests/vm/test_vm_machines.py, memoryless-3)."""
    src = tmp_path / "x.txt"
    src.write_text(_mutate("node 1 size: 31961 MB", "node 1 size: 0 MB"))
    proc = numalab("topo", "import", str(src), "--out", str(tmp_path / "m.yaml"))
    assert proc.returncode == 0, proc.stderr
    topo = load_topology(str(tmp_path / "m.yaml"))
    assert topo.memoryless_nodes == [1] and topo.nodes[0].memory_mib == 512
    root = _fake_sysfs(tmp_path / "node", {0: ("0-1", 0, "10 20"), 1: ("2-3", 1 << 20, "20 10")}, "0-1")
    assert [n.memory_mib for n in read_sysfs(root).nodes] == [0, 1024]


def test_a_huge_cpulist_in_a_sysfs_copy_is_refused_not_expanded(tmp_path):
    root = _fake_sysfs(tmp_path / "node", {0: ("0-99999999", 1 << 20, "10")}, "0")
    with pytest.raises(LabError, match="node0/cpulist: cannot read the CPU list"):
        read_sysfs(root)


def test_a_numeric_name_stays_a_name(tmp_path):
    src = tmp_path / "123.txt"
    src.write_text(SEED000_BLOCK)
    out = tmp_path / "123.yaml"
    proc = numalab("topo", "import", str(src), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert 'name: "123"' in out.read_text() and load_topology(str(out)).name == "123"
