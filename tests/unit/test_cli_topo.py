"""``numalab topo ...`` through the real CLI in a subprocess (no VMs)."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import xml.etree.ElementTree as ET

import pytest
from common import REPO, assert_one_line_error, numalab

from lab.cli.main import build_parser
from lab.errors import LabError
from lab.topology.model.spec import load_spec, load_topology, preset_names

DATA = REPO / "tests" / "data" / "topologies"
INVALID = sorted(DATA.glob("invalid-*.yaml"))
VALID = sorted(DATA.glob("valid-*.yaml"))
# The emitters plan placement against this host's free memory; keep the guest small.
SMALL = ("--mem-per-node", "64M")


def expected_errors(path) -> list[str]:
    """The '# error: ...' lines of a data file: what its one-line error must contain."""
    return [m.group(1).strip() for m in re.finditer(r"^# error:(.*)$", path.read_text(), re.MULTILINE)]


# --- topo check on invalid files -------------------------------------------------------------


def test_the_issue_cases_are_among_the_invalid_files():
    names = {p.stem for p in INVALID}
    assert {
        "invalid-remote-distance-10",
        "invalid-distance-256",
        "invalid-missing-node-id",
        "invalid-asymmetric-partial",
        "invalid-zero-memory",
    } <= names


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_check_rejects_invalid_file_in_one_line(path):
    needles = expected_errors(path)
    assert needles, f"{path.name} has no '# error:' line"
    proc = numalab("topo", "check", str(path))
    assert_one_line_error(proc, str(path), *needles)
    assert proc.stdout == ""


@pytest.mark.parametrize("path", INVALID[:3], ids=lambda p: p.stem)
def test_show_rejects_invalid_file_in_one_line(path):
    assert_one_line_error(numalab("topo", "show", str(path), "--json"), str(path), *expected_errors(path))


def test_unknown_preset():
    proc = numalab("topo", "check", "ring-5")
    assert_one_line_error(proc, "'ring-5'", "no such preset", "ring-4")


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    assert_one_line_error(numalab("topo", "check", str(path)), str(path), "cannot read")


@pytest.mark.parametrize("text", ["nodes: [1, 2\n", "nodes: 2\n  bad: indent\n", "\tnodes: 2\n"])
def test_invalid_yaml(tmp_path, text):
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    assert_one_line_error(numalab("topo", "check", str(path)), str(path), "not valid YAML")


@pytest.mark.parametrize(
    "text, field",
    [
        ("", "top level"),
        ("- 1\n- 2\n", "top level"),
        ("nodes: 2\n", "cpus_per_node"),
        ("nodes: 2\ncpus_per_node: 1\nmemory_per_node: 1G\n", "distances"),
    ],
)
def test_yaml_that_is_not_a_spec(tmp_path, text, field):
    path = tmp_path / "odd.yaml"
    path.write_text(text)
    assert_one_line_error(numalab("topo", "check", str(path)), str(path), field)


@pytest.mark.parametrize("name", ['""', "' '", "'\t'"])
def test_a_blank_name_is_refused_not_taken_for_the_files(tmp_path, name):
    """``name: ""`` was taken as no name at all, and the file's stem used without a word."""
    path = tmp_path / "box.yaml"
    path.write_text(f"name: {name}\nnodes: 2\ncpus_per_node: 1\nmemory_per_node: 256M\nlinks: [[0, 1]]\n"
                    "distance: {per_hop: 10}\n")  # fmt: skip
    for cmd in ("check", "show"):
        assert_one_line_error(numalab("topo", cmd, str(path)), f"{path}: name: expected a non-blank name")
    data = {"name": "", "nodes": 1, "cpus_per_node": 1, "memory_per_node": "256M", "distances": [[10]]}
    for checked in (False, True):  # (the loader refuses it even where the schema's check was made before)
        with pytest.raises(LabError, match=r"^x\.yaml: name: "):
            load_spec(data, "x.yaml", name="x", schema_checked=checked)
    assert_one_line_error(numalab("topo", "import", "--hwloc-synthetic", "pack:1 numa:2 core:2 pu:1", "--name", ""),
                          "--name: '' is not a usable name")  # fmt: skip


def test_slit_255_is_a_distance_and_said_to_be_one(tmp_path):
    """255 is ACPI's 'unreachable', which Linux does not read as such: sched_init_numa() takes every distance below
    1 << DISTANCE_BITS (256) as a level, and its farthest NUMA level spans the nodes at 255 (6.1, 6.12 and 7.3's
    kernel/sched/topology.c; the SRAT code takes any SLIT entry above 10). numalab keeps it as the distance the
    guest gets (issue 38) and says so, not without a word (issue 71)."""
    path = tmp_path / "far.yaml"
    path.write_text("nodes: 3\ncpus_per_node: 1\nmemory_per_node: 256M\n"
                    "distances: [[10, 20, 255], [20, 10, 255], [255, 255, 10]]\n")  # fmt: skip
    check = numalab("topo", "check", str(path))
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith(f"{path}: ok (3 nodes")
    note = (f"numalab: note: {path}: distance 255 (nodes 0-2, 1-2) is ACPI's 'unreachable', which Linux reads as "
            "an ordinary distance, the farthest: a NUMA level spans it")  # fmt: skip
    assert [ln for ln in check.stderr.splitlines() if ln.startswith(note)], check.stderr
    show = numalab("topo", "show", str(path))
    assert show.returncode == 0, show.stderr
    assert "level 2 NUMA distance 255" in " ".join(show.stdout.split())
    assert "note: distance 255 (nodes 0-2, 1-2) is ACPI's 'unreachable'" in show.stdout
    assert "distance 255" not in numalab("topo", "check", "ring-4").stderr


@pytest.mark.parametrize(
    "options, needles",
    [
        (["--mem-per-node", "1000K"], ["--mem-per-node", "whole number of MiB"]),
        (["--mem-per-node", "0"], ["--mem-per-node", "positive"]),
        (["--cpus-per-node", "3", "--threads", "2"], ["threads=2"]),
        (["--cpus-per-node", "0"], ["cpus"]),
    ],
)
def test_bad_overrides_in_one_line(options, needles):
    assert_one_line_error(numalab("topo", "show", "ring-4", *options), *needles)


# --- topo check on valid specs ----------------------------------------------------------------------


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_check_accepts_valid_custom_file(path):
    proc = numalab("topo", "check", str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert str(path) in proc.stdout and "ok" in proc.stdout


@pytest.mark.parametrize("name", preset_names())
def test_check_accepts_every_preset(name):
    proc = numalab("topo", "check", name)
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout


# --- topo show -------------------------------------------------------------------------------------


def show_json(*args: str) -> dict:
    proc = numalab("topo", "show", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_show_json_ring4():
    data = show_json("ring-4")
    topo = load_topology("ring-4")
    assert data["nodes"] == 4
    assert isinstance(data["distances"], list) and all(isinstance(row, list) for row in data["distances"])
    assert data["distances"] == [list(row) for row in topo.distances]
    assert data["cpus"] == [n.cpus for n in topo.nodes]
    assert data["memory_mib"] == [n.memory_mib for n in topo.nodes]
    view = data["kernel_view"]
    assert view["levels"] == len({d for row in topo.distances for d in row})
    assert view["type"] == "NUMA_GLUELESS_MESH"


def test_show_json_overrides():
    data = show_json("ring-4", "--cpus-per-node", "3", "--mem-per-node", "1G")
    assert data["cpus"] == [3] * 4
    assert data["memory_mib"] == [1024] * 4
    assert data["total_cpus"] == 12
    assert data["node_cpus"][1] == [3, 4, 5]
    assert data["distances"] == [list(row) for row in load_topology("ring-4").distances]


def test_show_json_overrides_keep_cpuless_nodes_cpuless():
    data = show_json(str(DATA / "valid-cpuless.yaml"), "--cpus-per-node", "3")
    assert data["cpus"] == [3, 3, 0]
    assert data["kernel_view"]["cpuless_nodes"] == [2]
    assert 40 not in data["kernel_view"]["distinct_distances"]


@pytest.mark.parametrize("name", ["ring-4", "seed000-4node"])
def test_show_text_has_the_slit_and_the_type(name):
    proc = numalab("topo", "show", name)
    assert proc.returncode == 0, proc.stderr
    topo = load_topology(name)
    assert "node distances:" in proc.stdout
    for i, row in enumerate(topo.distances):
        assert re.search(rf"^\s*{i}:\s+" + r"\s+".join(map(str, row)) + r"\s*$", proc.stdout, re.MULTILINE)
    assert show_json(name)["kernel_view"]["type"] in proc.stdout


def test_show_text_joins_a_cpuless_node_to_its_nearest_nodes():
    """The SLIT has no links: node 2 (CPU-less, 40 from both others) is drawn joined to both, as the HTML
    report draws it (one implementation: lab.topology.pictures.render.edges)."""
    proc = numalab("topo", "show", str(DATA / "valid-cpuless.yaml"))
    assert proc.returncode == 0, proc.stderr
    node2 = r"^\s*\[2\] \(no cpus, 256M\)\s+--40-- \[0\]\s+--40-- \[1\]$"
    assert re.search(node2, proc.stdout, re.MULTILINE), proc.stdout


# --- topo list -------------------------------------------------------------------------------------


def test_list_names_every_preset():
    proc = numalab("topo", "list")
    assert proc.returncode == 0, proc.stderr
    listed = [line.split()[0] for line in proc.stdout.splitlines()[1:] if line.strip()]
    assert listed == preset_names()


def test_list_columns_never_run_together():
    """Every column of every row is set off from the next by two spaces or more, whatever its width (gnr-2s-snc3's
    seven SLIT values ran into its TYPE: ``10/15/17/21/23/26/28NUMA_GLUELESS_MESH``)."""
    proc = numalab("topo", "list")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(numalab("topo", "list", "--json").stdout)}
    header, *lines = proc.stdout.splitlines()
    assert re.split(r"\s{2,}", header.strip()) == ["NAME", "NODES", "CPUS", "MEM", "SLIT VALUES", "TYPE",
                                                   "DESCRIPTION"]  # fmt: skip
    for line in lines:
        cells = re.split(r"\s{2,}", line.strip(), maxsplit=6)
        r = rows[cells[0]]
        slit = "/".join(map(str, r["slit_distances"]))
        assert cells == [r["name"], str(r["nodes"]), str(r["cpus"]), f"{r['memory_mib']}M", slit, r["type"],
                         r["description"]], line  # fmt: skip
    assert len(lines) == len(rows)


def test_list_json():
    proc = numalab("topo", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["name"] for r in rows] == preset_names()
    for row in rows:
        topo = load_topology(row["name"])
        assert row["nodes"] == topo.n_nodes
        assert row["cpus"] == topo.total_cpus
        assert row["memory_mib"] == topo.total_memory_mib
        # the kernel's distance levels: between nodes with CPUs (CPU-less memory nodes take no part)
        cpu = topo.cpu_nodes
        assert row["distances"] == sorted({topo.distances[i][j] for i in cpu for j in cpu})


# --- emitters ------------------------------------------------------------------------------------


def test_qemu_args_ring4_has_the_slit():
    proc = numalab("topo", "qemu-args", "ring-4", *SMALL)
    assert proc.returncode == 0, proc.stderr
    assert "-numa dist,src=0,dst=2,val=30" in proc.stdout
    argv = shlex.split(proc.stdout)
    dists = {argv[i + 1] for i, a in enumerate(argv) if a == "-numa" and argv[i + 1].startswith("dist,")}
    topo = load_topology("ring-4")
    # Symmetric: each pair once, lower id first.
    assert dists == {f"dist,src={i},dst={j},val={topo.distances[i][j]}" for i in range(4) for j in range(i + 1, 4)}


def test_qemu_args_json_topology_only():
    proc = numalab("topo", "qemu-args", "ring-4", *SMALL, "--topology-only", "--json")
    assert proc.returncode == 0, proc.stderr
    argv = json.loads(proc.stdout)
    assert argv[:2] == ["-m", "256M"]
    assert "-kernel" not in argv
    assert sum(1 for a in argv if a.startswith("node,nodeid=")) == 4


def test_libvirt_xml_mesh2():
    proc = numalab("topo", "libvirt-xml", "mesh-2", *SMALL)
    assert proc.returncode == 0, proc.stderr
    assert "<acpi" in proc.stdout
    root = ET.fromstring(proc.stdout)
    assert root.tag == "domain"
    assert root.find("features/acpi") is not None
    cells = root.findall("cpu/numa/cell")
    assert [c.get("id") for c in cells] == ["0", "1"]
    for cell in cells:
        i = int(cell.get("id"))
        siblings = {int(s.get("id")): int(s.get("value")) for s in cell.findall("distances/sibling")}
        assert siblings == {j: 10 if i == j else 20 for j in range(2)}


# --- help ------------------------------------------------------------------------------------------


def topo_subcommands() -> list[str]:
    def subparsers(parser):
        return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices

    return sorted(subparsers(subparsers(build_parser())["topo"]))


def test_the_topo_subcommands_are_known():
    assert topo_subcommands() == ["check", "import", "libvirt-xml", "list", "qemu-args", "schema", "show", "vng-args"]


@pytest.mark.parametrize(
    "args", [[], ["topo"]] + [["topo", sub] for sub in topo_subcommands()], ids=lambda a: " ".join(a) or "numalab"
)
def test_help(args):
    proc = numalab(*args, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: numalab {' '.join(args)}".rstrip())
    assert proc.stderr == ""
