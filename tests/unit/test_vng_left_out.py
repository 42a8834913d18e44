"""``numalab topo vng-args`` says what of a topology virtme-ng's options leave out (issue 48): one stderr line a
spec field with its value, exit 0, and stdout the options alone, as before, so ``vng $(...)`` still works."""

from __future__ import annotations

import json
import shlex

import pytest
from common import numalab

from lab.topology.model.spec import load_topology
from lab.vm.qemu.vng_args import left_out

# what stdout was before the lines (--no-pin: the same on any host)
STDOUT = {
    "gnr-2s-snc3": "--cpus 12,sockets=6,cores=2,threads=1 --memory 1536M --numa 256M,cpus=0-1 --numa 256M,cpus=2-3 "
    "--numa 256M,cpus=4-5 --numa 256M,cpus=6-7 --numa 256M,cpus=8-9 --numa 256M,cpus=10-11 "
    "--numa-distance 0,1=15 --numa-distance 0,2=17 --numa-distance 0,3=21 --numa-distance 0,4=28 "
    "--numa-distance 0,5=26 --numa-distance 1,0=15 --numa-distance 1,2=15 --numa-distance 1,3=23 "
    "--numa-distance 1,4=26 --numa-distance 1,5=23 --numa-distance 2,0=17 --numa-distance 2,1=15 "
    "--numa-distance 2,3=26 --numa-distance 2,4=23 --numa-distance 2,5=21 --numa-distance 3,0=21 "
    "--numa-distance 3,1=28 --numa-distance 3,2=26 --numa-distance 3,4=15 --numa-distance 3,5=17 "
    "--numa-distance 4,0=23 --numa-distance 4,1=26 --numa-distance 4,2=23 --numa-distance 4,3=15 "
    "--numa-distance 4,5=15 --numa-distance 5,0=26 --numa-distance 5,1=23 --numa-distance 5,2=21 "
    "--numa-distance 5,3=17 --numa-distance 5,4=15",
    "spr-2s-2llc": "--cpus 8,sockets=2,cores=4,threads=1 --memory 1024M --numa 512M,cpus=0-3 --numa 512M,cpus=4-7 "
    "--numa-distance 0,1=21",
    "srf-2s-modules": "--cpus 8,sockets=2,cores=4,threads=1 --memory 1024M --numa 512M,cpus=0-3 --numa 512M,cpus=4-7 "
    "--numa-distance 0,1=21",
    "ring-2": "--cpus 4,sockets=2,cores=2,threads=1 --memory 1024M --numa 512M,cpus=0-1 --numa 512M,cpus=2-3 "
    "--numa-distance 0,1=20",
}
LEFT_OUT = {
    "gnr-2s-snc3": {"packages: 2", "cpu_vendor: intel", "cpu_model: {family: 6, model: 173}"},
    "spr-2s-2llc": {"llcs_per_node: 2", "cpu_vendor: intel", "cpu_model: {family: 6, model: 143}"},
    "srf-2s-modules": {"cores_per_cluster: 2", "cpu_vendor: intel", "cpu_model: {family: 6, model: 175}"},
    "genoa-nps2": {"packages: 1", "llcs_per_node: 2"},
    "nps2-uneven-llc": {"packages: 1", "nodes[0].llcs: 2", "nodes[1].llcs: 1"},
    "tiered-2s-cxl": {
        "tiers.slow_nodes: [2, 3]",
        "hmat: {latency_ns: [[100, 200, 250, 350], [200, 100, 350, 250]], "
        "bandwidth_mib: [[20480, 10240, 8192, 4096], [10240, 20480, 4096, 8192]]}",
    },
}
PREFIX = "numalab: vng-args: left out "


def _left_out_lines(stderr: str) -> set[str]:
    return {ln.removeprefix(PREFIX).split(" (")[0] for ln in stderr.splitlines() if ln.startswith(PREFIX)}


@pytest.mark.parametrize("name", ["gnr-2s-snc3", "spr-2s-2llc", "srf-2s-modules"])
def test_each_left_out_field_is_a_line_and_stdout_is_the_options(name: str) -> None:
    proc = numalab("topo", "vng-args", name, "--no-pin")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == STDOUT[name] + "\n"
    assert _left_out_lines(proc.stderr) == LEFT_OUT[name]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(PREFIX)]
    assert len(lines) == len(LEFT_OUT[name])  # one line a field
    assert "Traceback" not in proc.stderr


def test_a_plain_preset_says_nothing_left_out() -> None:
    proc = numalab("topo", "vng-args", "ring-2", "--no-pin")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == STDOUT["ring-2"] + "\n"
    assert "left out" not in proc.stderr and "vng-args:" not in proc.stderr
    assert proc.stderr.splitlines() == [
        "numalab: note: virtme-ng backs each node with memfd on no particular host node: guest memory is not bound",
        "numalab: note: no vCPU pinning asked for",
    ]


@pytest.mark.parametrize("name", sorted(LEFT_OUT))
def test_what_each_preset_leaves_out(name: str) -> None:
    assert {f"{d.field}: {d.value}" for d in left_out(load_topology(name))} == LEFT_OUT[name]


@pytest.mark.parametrize("name", ["ring-2", "ring-4", "memoryless-3", "amd-2s-xgmi", "grid-2x4"])
def test_what_virtme_ng_expresses_is_not_left_out(name: str) -> None:
    """No grid and no tiers: a memoryless node (--numa 0,cpus=...), a CPU-less one and the SLIT are vng's."""
    assert left_out(load_topology(name)) == []


def test_quiet_keeps_the_lines_and_json_has_them() -> None:
    quiet = numalab("-q", "topo", "vng-args", "gnr-2s-snc3", "--no-pin")
    assert quiet.returncode == 0 and _left_out_lines(quiet.stderr) == LEFT_OUT["gnr-2s-snc3"]
    assert "note:" not in quiet.stderr
    proc = numalab("topo", "vng-args", "gnr-2s-snc3", "--no-pin", "--json")
    assert proc.returncode == 0 and proc.stderr == ""
    d = json.loads(proc.stdout)
    assert d["args"] == shlex.split(STDOUT["gnr-2s-snc3"]) and d["notes"]
    assert {f"{x['field']}: {x['value']}" for x in d["left_out"]} == LEFT_OUT["gnr-2s-snc3"]
    assert all(x["why"] for x in d["left_out"])
